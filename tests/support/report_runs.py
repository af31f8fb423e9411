"""Run directories for the report, trace and export tests, made without Ray.

The real Arbiter runs in-process with the scripted backend (`tests.support.harness`)
and every task is written through `RunStore.append`, so the directory is exactly
what `redraft run` writes. The tasks are a mix: one passes at once, one is fixed
in round 2, one never passes, one has HTML and rich markup in its candidates,
one fails in its backend, and one was lost with its arbiter (frames: task and
result only). Every task id contains a ``/``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from redraft import RunConfig
from redraft.actors._attempts import failed_result
from redraft.backends.base import ChatRequest
from redraft.engine._refine import refine_trace
from redraft.engine.grader import Grader
from redraft.engine.resolution import arbiter_settings
from redraft.protocols.messages import Result, Task, decode_as, encode
from redraft.rundir import RunStore, result_records
from tests.support.harness import scripted_arbiter
from tests.support.paths import REPO_ROOT
from tests.support.replies import is_critique, round_of
from tests.support.resolved import manifest_for

HTML_TEXT = '<script>alert("pwned")</script> [bold red]not markup[/] & <b>bold</b>'
QUESTION = "Is <one> added to the first number?"
ISSUE = {"severity": "critical", "quote": "<b>Answer</b>", "reason": "the sum is <off>", "fix": "add again"}


@dataclass(frozen=True)
class Plan:
    gold: int
    fix_at: int | None
    """The revision round from which the drafter answers right; None: never."""
    html: bool = False
    explode: bool = False
    bad_critic: bool = False
    """The critic answers nonsense (the run's critiques carry ``error``)."""


PLANS: dict[str, Plan] = {
    "suite/pass-first": Plan(gold=12, fix_at=0),
    "suite/late": Plan(gold=30, fix_at=2),
    "suite/never": Plan(gold=41, fix_at=None),
    "suite/html": Plan(gold=9, fix_at=1, html=True),
    "suite/boom": Plan(gold=5, fix_at=None, explode=True),
}
LOST = "suite/lost arbiter"


def prompt_of(task_id: str, plan: Plan) -> str:
    return f"Question {task_id}: what is {plan.gold - 1} plus 1?"


@dataclass(frozen=True)
class MixedReplies:
    """A draft's answer follows its task's plan; the critic always reports one critical issue."""

    def __call__(self, request: ChatRequest) -> str:
        if request.json_schema is not None and "questions" in request.json_schema.get("properties", {}):
            return json.dumps({"questions": [QUESTION]})  # chain of verification (cove)
        if is_critique(request):
            return json.dumps({"issues": [ISSUE]})
        user = request.messages[-1].content
        plan = next(p for t, p in PLANS.items() if prompt_of(t, p) in user)
        if plan.explode:
            raise RuntimeError("backend exploded")
        r = round_of(request)
        right = plan.fix_at is not None and r >= plan.fix_at
        answer = plan.gold if right else plan.gold + 1 + r
        prefix = f"{HTML_TEXT}\n" if plan.html else ""
        # One step, checked by the feedback's calculator: right only when the answer is.
        return f"{prefix}Working on it, attempt {r}.\n{plan.gold - 1} + 1 = {answer}\nAnswer: {answer}"


def make_run(root: Path, *, max_rounds: int = 4, copies: int = 1, strategy: str = "adversarial") -> Path:
    """Write a finished run directory at ``root`` (``copies`` repeats the task mix)."""
    config = RunConfig.build(
        scenario="arithmetic", strategy=strategy, samples=2, max_rounds=max_rounds, patience=2, out=str(root)
    )
    ticks = itertools.count()
    arbiter = scripted_arbiter(
        MixedReplies(),
        arbiter_settings(config),
        model="gpt-4o-mini",  # a priced model: costs are not 0
        clock=lambda: float(next(ticks)),
    )
    grader = Grader("arithmetic")
    store = RunStore.open(root, manifest_for(config, root.name))
    for copy in range(copies):
        for task_id, plan in PLANS.items():
            suffix = f"#{copy}" if copies > 1 else ""
            task = Task(
                task_id=task_id + suffix,
                scenario="arithmetic",
                prompt=prompt_of(task_id, plan),
                gold={"answer": plan.gold},
            )
            trace = asyncio.run(refine_trace(arbiter, grader, task))
            store.append([encode(m) for m in trace], decode_as(encode(trace[-1]), Result))
        lost = Task(task_id=LOST + (f"#{copy}" if copies > 1 else ""), scenario="arithmetic", prompt="?")
        result = failed_result(lost, ArbiterDied("the arbiter died"))
        store.append([encode(lost), encode(result)], result)
    store.finish(wall_s=12.5)
    return root


class ArbiterDied(Exception):
    """Stands in for Ray's error when an arbiter dies (its class name is the cause the run records)."""


ArbiterDied.__name__ = "RayActorError"


def redraft(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command, in a subprocess at the repository's root (errors end it with an exit code)."""
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO_ROOT,
    )


def records(root: Path) -> list[dict[str, object]]:
    return result_records(root)


class _Tables(HTMLParser):
    """The text of every table cell, grouped by the <h2> heading the table follows."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._heading = ""
        self._in_h2 = False
        self._depth = 0
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2":
            self._in_h2, self._heading = True, ""
        elif tag == "table":
            self._depth += 1
            if self._depth == 1:
                self.tables.setdefault(self._heading, [])
        elif tag == "tr" and self._depth == 1:
            self._row = []
        elif tag in ("td", "th") and self._depth == 1:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False
        elif tag == "table":
            self._depth -= 1
        elif tag in ("td", "th") and self._cell is not None and self._row is not None and self._depth == 1:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._depth == 1:
            self.tables[self._heading].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self._heading += data
        if self._cell is not None:
            self._cell.append(data)


def html_tables(page: str) -> dict[str, list[list[str]]]:
    """Heading -> rows of cell texts (header row first) of the first-level tables after it."""
    parser = _Tables()
    parser.feed(page)
    return parser.tables


FOREIGN_ID = "future/1"


def make_foreign_run(root: Path) -> Path:
    """A run directory from another writer version: kinds and fields this reader does not know.

    Written by hand (no RunStore, no summary.json), as a newer redraft or another
    language's writer could: stages, two critics on one candidate, verification
    questions, a reflection frame, a frame with no round, and unknown fields.
    """
    import msgpack

    root.mkdir(parents=True)
    t = {"task_id": FOREIGN_ID, "v": 9}
    frames = [
        {"kind": "task", **t, "scenario": "arithmetic", "prompt": "What is 2+2?", "reference": {"answer": 4}},
        {
            "kind": "draft",
            **t,
            "round": 0,
            "sample": 0,
            "text": "Plan: add <two> numbers.",
            "stage": "outline",
            "mystery_field": {"depth": 7},
        },
        {
            "kind": "verification",
            **t,
            "round": 0,
            "sample": 0,
            "score": 0.5,
            "passed": False,
            "stage": "outline",
            "checks": [{"name": "stage_check", "passed": False, "score": 0.5, "detail": "no answer yet"}],
            "questions": [{"question": "Is 2+2 four?", "answer": "yes, four"}],
        },
        {
            "kind": "critique",
            **t,
            "round": 0,
            "sample": 0,
            "stance": "skeptic",
            "model": "critic-b",
            "issues": [{"severity": "major", "quote": "Plan", "reason": "no final answer", "fix": "finish it"}],
        },
        {
            "kind": "critique",
            **t,
            "round": 0,
            "sample": 0,
            "stance": "advocate",  # not a stance of this version: the frame reads as a generic one
            "model": "critic-a",
            "issues": [{"severity": "minor", "quote": "add", "reason": "terse", "fix": "explain"}],
        },
        {"kind": "reflection", **t, "round": 0, "sample": 0, "text": "I stopped before the answer."},
        {
            "kind": "decision",
            **t,
            "round": 0,
            "action": "continue",
            "best_round": 0,
            "best_sample": 0,
            "best_score": 0.5,
            "round_best_score": 0.5,
            "confidence": 0.25,
        },
        {"kind": "draft", **t, "round": 1, "sample": 0, "text": "Plan: add <two> numbers.\nAnswer: 4"},
        {"kind": "verification", **t, "round": 1, "sample": 0, "score": 1.0, "passed": True},
        {
            "kind": "decision",
            **t,
            "round": 1,
            "action": "stop",
            "reason": "threshold",
            "best_round": 1,
            "best_sample": 0,
            "best_score": 1.0,
            "round_best_score": 1.0,
        },
        {"kind": "audit_note", **t, "note": "a frame with no round", "retries": 0},
    ]
    data = b"".join(msgpack.packb(f) for f in frames)
    (root / "trace.msgpack").write_bytes(data)
    record = {
        "task_id": FOREIGN_ID,
        "scenario": "arithmetic",
        "answer": "4",
        "text": "Plan: add <two> numbers.\nAnswer: 4",
        "score": 1.0,
        "passed": True,
        "initial_score": 0.5,
        "initial_passed": False,
        "rounds": 2,
        "stop_reason": "threshold",
        "usage": {"input_tokens": 10, "output_tokens": 5, "calls": 2, "cost_usd": 0.5},
        "usage_by_role": {"judge": {"calls": 2, "cost_usd": 0.5}},
        "wall_s": 1.5,
        "error": None,
        "novelty": 3,
        "trace_end": len(data),
    }
    (root / "results.jsonl").write_text(json.dumps(record) + "\n")
    (root / "manifest.json").write_text(json.dumps({"run_id": "foreign", "config": {"threshold": 1.0}}))
    return root
