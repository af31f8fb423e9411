"""What ``plan_execute`` keeps of one task's plan: its steps, the verified ones with their outputs, the model's
replies read into plans and decisions, a revision's diff, and the program the verified steps make together.

A verified step is known by its output file and its spec: a revision that keeps a step unchanged (same intent,
inputs, output and contract), and reads nothing a reset step writes, keeps it verified, outputs and all.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from redraft.protocols.bounds import bounded
from redraft.protocols.messages import CheckResult, Observation, PlanAction, PlanStep, StepContract

MAX_STEPS = 8
"""Steps a plan may have; a longer reply is cut to its first ones."""
_TYPE_NAMES = {
    "int": "int",
    "integer": "int",
    "float": "float",
    "decimal": "float",
    "number": "float",
    "date": "date",
    "text": "text",
    "str": "text",
    "string": "text",
}
_JSON_BLOCK = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""An output a step may write: a plain file name, as the sandbox hands files out."""
RESERVED = frozenset({"main.py"})
"""Names a step may not write: the sandbox's own program."""


class StepReply(msgspec.Struct, kw_only=True):
    """One step as a model writes it (lenient: unknown type names are dropped, not refused)."""

    intent: str = ""
    inputs: list[str] = []
    output: str = ""
    columns: list[str] = []
    types: dict[str, str] = {}
    min_rows: int = 0
    max_rows: int | None = None


class PlanReply(msgspec.Struct, kw_only=True):
    steps: list[StepReply] = []


class DecisionReply(msgspec.Struct, kw_only=True):
    action: PlanAction
    reason: str = ""
    redo: int | None = None
    steps: list[StepReply] = []


def read_plan(text: str) -> list[PlanStep] | None:
    """The plan in a model's reply (numbered from 1), or None when it holds no usable one."""
    reply = _json_in(text, PlanReply)
    return steps_of(reply.steps) if reply is not None else None


def read_decision(text: str) -> DecisionReply | None:
    """The decision in a model's reply, or None when it holds none."""
    reply: DecisionReply | None = _json_in(text, DecisionReply)
    return reply


def steps_of(replies: list[StepReply]) -> list[PlanStep] | None:
    """Plan steps from a reply's; None if any step has no intent or no output file of its own (a plain name,
    written by no other step), or there are none."""
    steps = []
    for number, reply in enumerate(replies[:MAX_STEPS], 1):
        output = reply.output.strip()
        if not _FILE_NAME.fullmatch(output) or output in RESERVED or not reply.intent.strip():
            return None
        types = {k: _TYPE_NAMES[v.lower()] for k, v in reply.types.items() if v.lower() in _TYPE_NAMES}
        contract = StepContract(
            columns=[c for c in reply.columns if c],
            types=types,  # type: ignore[arg-type]  # the values are ColumnType names
            min_rows=max(0, reply.min_rows),
            max_rows=reply.max_rows if reply.max_rows is None or reply.max_rows >= 0 else None,
        )
        intent = " ".join(reply.intent.split())[:300]
        steps.append(
            PlanStep(number=number, intent=intent, inputs=list(reply.inputs), output=output, contract=contract)
        )
    if len({s.output for s in steps}) < len(steps):
        return None
    return steps or None


def _json_in(text: str, kind: type[Any]) -> Any:
    """The first JSON object in ``text`` (in a fenced block, or from its first ``{`` to its last ``}``) read as
    ``kind``; None when there is none."""
    candidates = [block for block in _JSON_BLOCK.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return msgspec.convert(bounded(json.loads, candidate, what="a plan"), kind)
        except (ValueError, msgspec.ValidationError):  # bounded: too large or too deep is a ValueError too
            continue
    return None


@dataclass(frozen=True)
class Verified:
    """A step whose output passed its contract: its spec, and what it produced (its program and file with it)."""

    step: PlanStep
    observation: Observation


@dataclass
class PlanState:
    """One task's plan across rounds (the strategy's memory, `RoundContext.state`)."""

    steps: list[PlanStep] = field(default_factory=list)
    version: int = 0
    verified: dict[str, Verified] = field(default_factory=dict)
    """By output file name."""
    tries: dict[int, int] = field(default_factory=dict)
    """Failed attempts of each step since it was last reset."""
    failure: dict[int, tuple[str, Observation | None, list[CheckResult]]] = field(default_factory=dict)
    """Each step's last failed attempt: its program, what it did, its failed checks."""
    final_checks: list[CheckResult] = field(default_factory=list)
    """The failed checks of the whole program at the end of the last round (what the next round starts from)."""

    def is_verified(self, step: PlanStep) -> bool:
        kept = self.verified.get(step.output)
        return kept is not None and same(kept.step, step)

    def verified_numbers(self) -> list[int]:
        return [s.number for s in self.steps if self.is_verified(s)]

    def next_step(self) -> PlanStep | None:
        return next((s for s in self.steps if not self.is_verified(s)), None)

    def carried(self, step: PlanStep) -> dict[str, bytes]:
        """The verified outputs of the steps before ``step``: the files it runs beside the task's."""
        files: dict[str, bytes] = {}
        for earlier in self.steps[: step.number - 1]:
            kept = self.verified.get(earlier.output)
            if kept is not None and same(kept.step, earlier):
                files.update(kept.observation.files)
        return files

    def observations(self) -> list[Observation]:
        """What the verified steps produced, in plan order, without their files or programs (for a prompt)."""
        return [bare(self.verified[s.output].observation) for s in self.steps if self.is_verified(s)]

    def reset(self, names: set[str]) -> None:
        """Forget the verified outputs named, and every step's that reads one of them, transitively."""
        changed = True
        while changed:
            changed = False
            for step in self.steps:
                if step.output not in names and names.intersection(step.inputs):
                    names.add(step.output)
                    changed = True
        for name in names:
            self.verified.pop(name, None)
        for step in self.steps:
            if step.output in names:
                self.tries.pop(step.number, None)
                self.failure.pop(step.number, None)

    def program(self) -> str:
        """The verified steps' programs as one program, run in turn in one working directory."""
        return compose([(s, self.verified[s.output].observation.program) for s in self.steps if self.is_verified(s)])


def bare(observation: Observation) -> Observation:
    """An observation without its file bytes or program (what a prompt or a plan version needs of it)."""
    return msgspec.structs.replace(observation, files={}, program="")


def same(a: PlanStep, b: PlanStep) -> bool:
    """Whether two steps are the same work (their number aside)."""
    return (a.intent, a.inputs, a.output, a.contract) == (b.intent, b.inputs, b.output, b.contract)


def diff(old: list[PlanStep], new: list[PlanStep]) -> tuple[list[int], list[int], list[int]]:
    """(added, removed, changed): step numbers new has that old had not, old had that new has not, and those in
    both (new's numbers) whose work changed. Steps are matched by their output file, in order."""
    matcher = difflib.SequenceMatcher(a=[s.output for s in old], b=[s.output for s in new], autojunk=False)
    added: list[int] = []
    removed: list[int] = []
    changed: list[int] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs = zip(old[i1:i2], new[j1:j2], strict=True)
            changed += [b.number for a, b in pairs if not same(a, b)]
        else:
            removed += [s.number for s in old[i1:i2]]
            added += [s.number for s in new[j1:j2]]
    return added, removed, changed


PROGRAM_HEADER = "# The verified steps of a plan, run in turn in one working directory.\n"


def compose(steps: list[tuple[PlanStep, str]]) -> str:
    """One program that runs each step's program in turn, each in a fresh namespace, as its own ``__main__``.

    A step that exits 0 (``sys.exit()``) lets the next one run; any other exit ends the program with it.
    """
    if not steps:
        return ""
    listed = "".join(f"    ({f'step {s.number}: {s.intent}'!r}, {code!r}),\n" for s, code in steps)
    return (
        f"{PROGRAM_HEADER}import sys\n\nSTEPS = [\n{listed}]\n\n"
        "for name, code in STEPS:\n"
        "    try:\n"
        '        exec(compile(code, name, "exec"), {"__name__": "__main__"})\n'
        "    except SystemExit as exc:\n"
        "        if exc.code not in (None, 0):\n"
        "            raise\n"
    )
