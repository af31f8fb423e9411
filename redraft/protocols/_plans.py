"""The records of a plan executed step by step (``plan_execute``): its steps, what a step's run showed, and
what the drafter is asked about it.

They travel inside frames (`redraft.protocols.messages` re-exports them) and follow the same evolution rules.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from redraft.protocols._records import CheckResult

ColumnType = Literal["int", "float", "date", "text"]
PlanAskKind = Literal["plan", "step", "decide"]
"""What the drafter is asked: the first plan, one step's program, or what to do after an observation."""
PlanAction = Literal["continue", "retry", "revise", "finish"]


class StepContract(msgspec.Struct, frozen=True, kw_only=True):
    """What a step's output file must hold: these columns (in order, when given), their types, a row bound."""

    columns: list[str] = []
    types: dict[str, ColumnType] = {}
    """A column's cells must read as this type (ints, decimals, ISO dates YYYY-MM-DD, any text)."""
    min_rows: int = 0
    max_rows: int | None = None


class PlanStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a plan: what it is for, which files it reads, the one file it writes, and that file's contract."""

    number: int
    """1-based position in the plan."""
    intent: str
    inputs: list[str] = []
    """The task's files and earlier steps' outputs it reads (by name)."""
    output: str
    """The file it writes, in its working directory."""
    contract: StepContract = StepContract()

    def summary(self) -> str:
        """``parse the dates; reads a.csv -> writes dates.csv (columns: id, date; date: date; 1.. rows)``."""
        contract = self.contract
        shape = [f"columns: {', '.join(contract.columns)}"] if contract.columns else []
        shape += [f"{name}: {kind}" for name, kind in contract.types.items()]
        shape.append(f"{contract.min_rows}..{'' if contract.max_rows is None else contract.max_rows} rows")
        reads = ", ".join(self.inputs) or "nothing named"
        return f"{self.intent}; reads {reads} -> writes {self.output} ({'; '.join(shape)})"


class ColumnProfile(msgspec.Struct, frozen=True, kw_only=True):
    """One column of a step's output as it really is: its likely type and how many cells match each pattern."""

    name: str
    type: str
    """The type most of its non-empty cells read as (``int``, ``float``, ``date``, ``text``, or ``empty``)."""
    patterns: dict[str, int] = {}
    """Cells per value pattern, e.g. ``{"YYYY-MM-DD": 80, "DD.MM.YYYY": 40}``, ``{"1,234.5": 7}``, ``{"empty": 2}``."""
    distinct: int = 0


class Observation(msgspec.Struct, frozen=True, kw_only=True):
    """What really happened when one step ran: its exit, the end of its stderr, its output's profile."""

    step: int
    returncode: int | None = None
    """None when the sandbox killed it (``killed`` says why) or it never ran."""
    killed: str = ""
    stderr_tail: str = ""
    output: str = ""
    """The output file's name."""
    written: bool = False
    """Whether the output file was written (and collected)."""
    rows: int | None = None
    """Data rows of the output, when it reads as CSV."""
    columns: list[ColumnProfile] = []
    sample: list[list[str]] = []
    """Its first rows as written (a few, each cell cut short)."""
    files: dict[str, bytes] = {}
    """The output file's bytes, carried to the steps that read it once the step is verified."""
    program: str = ""
    """The program that ran, as read from the reply (what a verified step contributes to the whole)."""

    def lines(self) -> list[str]:
        """The run in lines: how it ended, its output's rows, each column's type and value patterns, a sample."""
        ended = f"killed: {self.killed}" if self.killed else f"exit {self.returncode}"
        rows = f"{self.rows} rows" if self.rows is not None else "written" if self.written else "not written"
        lines = [f"step {self.step} ({ended}) -> {self.output}: {rows}"]
        for column in self.columns:
            patterns = ", ".join(f"{p} x{n}" for p, n in column.patterns.items())
            lines.append(f"  {column.name} ({column.type}, {column.distinct} distinct): {patterns}")
        lines += [f"  row: {', '.join(row)}" for row in self.sample]
        if self.stderr_tail:
            lines.append(f"  stderr: {self.stderr_tail}")
        return lines


class StepRun(msgspec.Struct, frozen=True, kw_only=True):
    """Verifier: run a step's program over the task's files and the verified outputs of earlier steps."""

    step: PlanStep
    files: dict[str, bytes] = {}
    """Verified outputs of earlier steps, by name (the task's own files are the scenario's)."""


class PlanAsk(msgspec.Struct, frozen=True, kw_only=True):
    """Drafter: write the plan, one step's program, or the decision after an observation."""

    kind: PlanAskKind
    steps: list[PlanStep] = []
    """The plan as it stands (empty when asking for the first)."""
    step: int | None = None
    """The step asked about (its program, or the observation that asks for a decision)."""
    verified: list[int] = []
    """Steps whose outputs passed their contracts, and are kept."""
    observations: list[Observation] = []
    """What the verified steps produced, and the observation that asks for a decision (without file bytes)."""
    checks: list[CheckResult] = []
    """The failed checks of the step (or of the whole program) that prompted this ask."""
    code: str = ""
    """The program of the step's last failed attempt, when asking for another."""
