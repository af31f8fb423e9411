"""The judge: a model that grades a final answer by a rubric, or picks the better of two, after the loop.

A judge is a role of its own, with its own model (any backend spec) and its own prompts
(``judging/prompts.toml``, versioned). It grades only: like the grader, it is asked after a task's loop has
finished, and nothing it writes is ever sent to a drafter, critic, verifier or arbiter.

- **Rubric** (`Judge.grade`): one call; the model names a level and a reason per criterion, in a schema
  made from the rubric (`redraft.judging._answers.rubric_schema`); the grade is the rubric's weighted score
  and a pass at its threshold. A reply that is not a valid answer is the judgment's ``error``, with no
  score: unknown, not 0.
- **Pairwise** (`Judge.compare`): two answers to one task, asked in both orders. A verdict that names the
  same answer both times stands; one that changes with the order is a tie, and says it ``flipped``.

Calls go through the node's response cache (`redraft.backends.cache`) unless the settings turn it off, so a
judgment asked again with the same seed is answered again for free; a repeat that must reach the model (the
card's repeatability) is asked with another seed.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from redraft.backends import BackendSpec, ChatRequest, Completion, resolve
from redraft.backends.cache import cached
from redraft.backends.pricing import load_prices
from redraft.engine import CallSettings
from redraft.engine.prompts import Prompts, templates_of
from redraft.judging._answers import JudgeAnswerError, pair_schema, parse_levels, parse_pair, rubric_schema
from redraft.judging.rubric import Rubric
from redraft.protocols.messages import ChatMessage, Task, Usage

Winner = Literal["a", "b", "tie"]


class CriterionGrade(msgspec.Struct, frozen=True, kw_only=True):
    """The level a judge chose for one criterion, what it scores, and why."""

    criterion: str
    level: str
    score: float
    reason: str


class Judgment(msgspec.Struct, frozen=True, kw_only=True):
    """A judge's grade of one answer by a rubric; ``score`` and ``passed`` are None when ``error`` is set."""

    score: float | None
    passed: bool | None
    criteria: list[CriterionGrade] = []
    model: str = ""
    usage: Usage = Usage()
    error: str | None = None


class PairVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """Which of two answers a judge prefers, asked in both orders: a verdict that changed with the order is a
    tie with ``flipped`` set."""

    winner: Winner
    flipped: bool
    orders: tuple[Winner | None, Winner | None]
    """The verdict in the order (a, b), then in the order (b, a), each by answer; None where the reply was invalid."""
    usage: Usage = Usage()
    model: str = ""
    """The judge's model as its replies named it (what its calls are priced by)."""
    error: str | None = None


_AS_SHOWN: dict[str, Winner] = {"first": "a", "second": "b", "tie": "tie"}
_SWAPPED: dict[str, Winner] = {"first": "b", "second": "a", "tie": "tie"}

JUDGE_SETTINGS = CallSettings(temperature=0.0, max_tokens=800)
"""A judge's default calls: greedy, with room for a reason per criterion."""


@functools.cache
def judge_prompts() -> Prompts:
    """The judge's built-in templates (``judging/prompts.toml``)."""
    return templates_of("redraft.judging")


class Judge:
    """Grades answers by a rubric, or in pairs, through one backend (see the module docstring)."""

    def __init__(self, backend: BackendSpec, rubric: Rubric | None = None, settings: CallSettings = JUDGE_SETTINGS):
        self.spec = backend.spec
        self.rubric = rubric
        self._backend = cached(backend.create(), backend.spec, enabled=settings.cache, payer=settings.payer)
        self._settings = settings
        self._prompts = settings.prompts or judge_prompts()

    def prompt_versions(self) -> dict[str, int]:
        """The versions of the templates this judge renders (written on its card and with its grades)."""
        return self._prompts.versions()

    async def grade(self, task: Task, text: str, *, seed: int = 0, rubric: Rubric | None = None) -> Judgment:
        """``text`` graded by ``rubric`` (default: the judge's own) as an answer to ``task``."""
        rubric = rubric or self.rubric
        if rubric is None:
            raise ValueError("a rubric grade needs a rubric: give the judge one, or pass it")
        user = self._prompts.render("judge_rubric_user", task=task.prompt, rubric=rubric_text(rubric), candidate=text)
        completion = await self._ask("judge_rubric_system", user, seed, rubric_schema(rubric))
        try:
            chosen = parse_levels(completion.text, rubric)
        except JudgeAnswerError as exc:
            return Judgment(score=None, passed=None, model=completion.model, usage=completion.usage, error=str(exc))
        levels = {name: level for name, (level, _) in chosen.items()}
        criteria = [
            CriterionGrade(
                criterion=c.name,
                level=levels[c.name],
                score=rubric.score_of(c, levels[c.name]),
                reason=chosen[c.name][1],
            )
            for c in rubric.criteria
        ]
        score = rubric.score(levels)
        return Judgment(
            score=score,
            passed=rubric.passes(score),
            criteria=criteria,
            model=completion.model,
            usage=completion.usage,
        )

    async def compare(self, task: Task, a: str, b: str, *, seed: int = 0) -> PairVerdict:
        """Which of ``a`` and ``b`` answers ``task`` better, asked in both orders (see the module docstring)."""
        (ab, error_ab, done_ab), (ba, error_ba, done_ba) = await asyncio.gather(
            self._pair(task, a, b, seed), self._pair(task, b, a, seed)
        )
        in_a_b = _AS_SHOWN.get(ab or "")
        in_b_a = _SWAPPED.get(ba or "")
        orders = (in_a_b, in_b_a)
        usage, model = done_ab.usage + done_ba.usage, done_ab.model or done_ba.model
        if in_a_b is None or in_b_a is None:
            error = error_ab or error_ba
            return PairVerdict(winner="tie", flipped=False, orders=orders, usage=usage, model=model, error=error)
        flipped = in_a_b != in_b_a
        winner: Winner = "tie" if flipped else in_a_b
        return PairVerdict(winner=winner, flipped=flipped, orders=orders, usage=usage, model=model)

    async def _pair(self, task: Task, first: str, second: str, seed: int) -> tuple[str | None, str | None, Completion]:
        user = self._prompts.render("judge_pair_user", task=task.prompt, first=first, second=second)
        completion = await self._ask("judge_pair_system", user, seed, pair_schema())
        try:
            return parse_pair(completion.text).winner, None, completion
        except JudgeAnswerError as exc:
            return None, str(exc), completion

    async def _ask(self, system: str, user: str, seed: int, schema: dict[str, Any]) -> Completion:
        messages = [
            ChatMessage(role="system", content=self._prompts.render(system)),
            ChatMessage(role="user", content=user),
        ]
        request = ChatRequest(
            messages=messages,
            max_tokens=self._settings.max_tokens,
            temperature=self._settings.temperature,
            seed=seed,
            json_schema=schema,
        )
        return await self._backend.complete(request)


def judge_of(spec: str, rubric: Rubric | None = None, settings: CallSettings = JUDGE_SETTINGS) -> Judge:
    """A judge on the backend ``spec`` names (any backend: a `UserError` for one that is not)."""
    return Judge(resolve(spec), rubric, settings)


def priced_verdicts(verdicts: Sequence[PairVerdict], prices: str | None = None) -> tuple[Usage, list[str]]:
    """What ``verdicts`` spent, priced by the price table ``prices`` names (`load_prices`: the built-in one when
    None), as the loop's calls are; and the judge's models it does not know (their calls counted at 0 USD)."""
    table = load_prices(prices)
    usage = sum((table.priced(v.model, v.usage) for v in verdicts), Usage())
    return usage, sorted({v.model for v in verdicts if v.usage.calls and not table.known(v.model)})


def rubric_text(rubric: Rubric) -> str:
    """The rubric as the judge reads it: each criterion, its weight and description, then its levels."""
    lines = []
    for criterion in rubric.criteria:
        lines.append(f"- {criterion.name} (weight {criterion.weight:g}): {criterion.description}")
        lines += [f"    - {level.name}: {level.description}" for level in criterion.levels]
    return "\n".join(lines)
