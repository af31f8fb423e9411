"""How the old run directory ``tests/fixtures/run-v2/`` was made, so it can be made again.

It was written once by redraft as of commit 2bb053f (wire version 2, before the
run directory had one reader) and is kept as it was written: later versions must
still read it (``tests/unit/rundir/test_fixture_run.py``). Re-make it only on purpose (a new
fixture for a new writer), never to make a failing reader pass:

    git worktree add ../redraft-2bb053f 2bb053f
    cd ../redraft-2bb053f && PYTHONPATH=.:<this repository> python -m tests.support.fixture_run tests/fixtures/run-v2

(``redraft`` comes from that commit, ``tests.support`` from this repository; the maker
imports that commit's modules, ``redraft.batch`` and ``redraft.store``, inside
`make_fixture_run`, so the constants here import with any version).

The real Arbiter runs in-process with the scripted backend and every task goes
through `RunStore.append`, as in ``report_runs.py``. So that one small trace holds
frames of every kind, the tasks are refined under several strategies, each by its
own arbiter, into the one directory (the manifest names the first, adversarial):
plain rewrites with a critic (one task fixed late, one never, one with HTML and
rich markup in its candidates, one whose critic answers nonsense, so its critiques
carry ``error``, one whose backend fails, so it stops with ``error``), patch edits
(one edit applies, one is refused), stages (``stepwise``), a reflection
(``verifier_only``), verification questions (``cove``), two critics (``debate``),
and a task lost with its arbiter (task and result frames only). The clock is a
counter and ``started_at`` is pinned; the manifest records the package versions
of the machine that made it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.strategies import get_strategy
from tests.support.paths import FIXTURES
from tests.support.replies import is_critique, round_of
from tests.support.report_runs import ArbiterDied, Plan, prompt_of

FIXTURE = FIXTURES / "run-v2"
HTML_TEXT = '<script>alert("old")</script> [bold red]not markup[/] & <b>bold</b>'
ISSUE = {"severity": "major", "quote": "Answer", "reason": "the sum is <off>", "fix": "add again"}
QUESTION = "Is <one> added to the first number?"
BAD_CRITIQUE = "no issues, I think?"
REFUSED_SEARCH = "a line that is not there"


PLANS: dict[str, Plan] = {
    "pass-first": Plan(gold=12, fix_at=0),
    "late": Plan(gold=30, fix_at=2),
    "never": Plan(gold=41, fix_at=None),
    "html": Plan(gold=9, fix_at=1, html=True),
    "boom": Plan(gold=5, fix_at=None, explode=True),
    "bad-critic": Plan(gold=17, fix_at=1, bad_critic=True),
    "fix-1": Plan(gold=23, fix_at=1),
}
SEGMENTS: list[tuple[str, str, bool, list[str]]] = [
    # (task id prefix, strategy, patch revisions, plans)
    ("rewrite", "adversarial", False, ["pass-first", "late", "never", "html", "boom", "bad-critic"]),
    ("patch", "adversarial", True, ["fix-1"]),
    ("stepwise", "stepwise", False, ["fix-1"]),
    ("reflexion", "verifier_only", False, ["fix-1"]),
    ("cove", "cove", False, ["fix-1"]),
    ("debate", "debate", False, ["fix-1"]),
]
LOST = "rewrite/lost arbiter"
_PROMPT = re.compile(r"Question [a-z]+/([a-z0-9-]+):")


@dataclass(frozen=True)
class FixtureReplies:
    """A draft's answer follows its task's plan; critics find one issue (or answer nonsense, if so planned)."""

    def __call__(self, request: ChatRequest) -> str:
        if request.json_schema is not None and "questions" in request.json_schema.get("properties", {}):
            return json.dumps({"questions": [QUESTION]})  # chain of verification (cove)
        user = request.messages[-1].content
        found = _PROMPT.search(user)
        if found is None:  # a cove question, answered without the candidate
            return "Yes: one is added."
        plan = PLANS[found.group(1)]
        if is_critique(request):
            return BAD_CRITIQUE if plan.bad_critic else json.dumps({"issues": [ISSUE]})
        if plan.explode:
            raise RuntimeError("backend exploded")
        r = round_of(request)
        right = plan.fix_at is not None and r >= plan.fix_at
        answer = plan.gold if right else plan.gold + 1 + r
        if "<<<<<<< SEARCH" in user:  # a patch revision of round 0's answer: one edit applies, one is refused
            return (
                f"<<<<<<< SEARCH\nAnswer: {plan.gold + 1}\n=======\nAnswer: {answer}\n>>>>>>> REPLACE\n"
                f"<<<<<<< SEARCH\n{REFUSED_SEARCH}\n=======\nanything\n>>>>>>> REPLACE"
            )
        prefix = f"{HTML_TEXT}\n" if plan.html else ""
        return f"{prefix}Working on it, attempt {r}.\nAnswer: {answer}"


# A priced model, so costs are not 0.
SPEC = ScriptedSpec(script=FixtureReplies(), spec="scripted:fixture_run.FixtureReplies", model="gpt-4o-mini")


def config_of(strategy: str, patch: bool, root: Path) -> Any:
    from redraft.batch import RunConfig  # type: ignore[import-not-found]  # the code of commit 2bb053f

    return RunConfig(
        scenario="arithmetic",
        strategy=strategy,
        samples=2,
        max_rounds=3,
        patience=2,
        patch=patch,
        drafter=SPEC.spec,
        critic=SPEC.spec,
        out=str(root),
    )


def make_fixture_run(root: Path) -> Path:
    """Write the fixture's run directory at ``root`` (which must not exist yet)."""
    # The writer of commit 2bb053f (see the module docstring), imported only to re-make the fixture.
    # That commit's modules (since moved): only the maker, run at that commit, imports them.
    from redraft.actors.arbiter import Arbiter  # type: ignore[import-not-found]
    from redraft.actors.factory import RoleSetup, local_roles  # type: ignore[import-not-found]
    from redraft.batch import failed_result, manifest_for  # type: ignore[import-not-found]
    from redraft.store import RunStore  # type: ignore[import-not-found]

    from redraft.protocols.messages import Result, Task, decode_as, encode

    if root.exists():
        raise SystemExit(f"{root} exists; remove it first to re-make the fixture on purpose")
    ticks = itertools.count()
    manifest = manifest_for(config_of("adversarial", False, root), root.name)
    manifest["started_at"] = "2026-01-01T00:00:00Z"
    store = RunStore.open(root, manifest)
    for prefix, strategy, patch, plans in SEGMENTS:
        config = config_of(strategy, patch, root)
        roles = local_roles(
            RoleSetup(scenario="arithmetic", drafter=SPEC, critic=SPEC, cache=False), get_strategy(strategy)
        )
        arbiter = Arbiter(roles, config.arbiter_settings(), clock=lambda: float(next(ticks)))
        for name in plans:
            task_id = f"{prefix}/{name}"
            task = Task(
                task_id=task_id,
                scenario="arithmetic",
                prompt=prompt_of(task_id, PLANS[name]),
                reference={"answer": PLANS[name].gold},
            )
            frames = asyncio.run(arbiter.run(encode(task)))
            store.append(frames, decode_as(frames[-1], Result))
    lost = Task(task_id=LOST, scenario="arithmetic", prompt="?")
    result = failed_result(lost, ArbiterDied("the arbiter died"))
    store.append([encode(lost), encode(result)], result)
    store.finish(wall_s=42.5)
    return root


if __name__ == "__main__":
    print(make_fixture_run(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE))
