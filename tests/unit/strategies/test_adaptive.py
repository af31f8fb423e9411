"""The `adaptive` strategy in-process with a scripted model whose fresh samples and revisions are right on
purpose: what it chooses, what it learns across the batch, the bank of calls its tasks share, when a task with
no feedback signal stops, and the ledger that keeps it all once however often a task is redone."""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from redraft import services
from redraft.backends.base import ChatRequest
from redraft.comparison._arms import Arm
from redraft.comparison._runner import ComparePlan
from redraft.config import RunConfig
from redraft.engine.arbiter import ArbiterSettings
from redraft.engine.resolution import resolve_run
from redraft.errors import UserError
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import (
    CheckResult,
    Critique,
    Decision,
    Draft,
    DraftRequest,
    Message,
    Result,
    Task,
    Verification,
)
from redraft.rundir.frames import KnownFrame
from redraft.rundir.spending import spending, spending_table
from redraft.scenarios._base import SCENARIOS
from redraft.strategies import CallOutcome, Ledger, Share, Tally, feedback_state, ledger_name
from redraft.strategies._choice import Standing, batch_posterior, cost, plan, settled, task_chance
from tests.support.harness import run_task, scripted_arbiter, wire
from tests.support.simulated import RIGHT, SimulatedAnswers


class AdaptiveSim(SimulatedAnswers):
    """Tasks whose prompt says the feedback they get (``feedback=localized|score|none``); right is 42."""

    name = "adaptive_sim"

    def check(self, task: Task, text: str) -> list[CheckResult]:
        kind = re.search(r"feedback=(\w+)", task.prompt)[1]  # type: ignore[index]
        if kind == "none":  # the check cannot tell answers apart
            return [CheckResult(name="format", passed=False, score=0.0)]
        if self.answer(text) == RIGHT:
            return [CheckResult(name="example", passed=True, score=1.0, detail="every example passes")]
        return [CheckResult(name="example", passed=False, score=0.5, detail="example 3 fails" * (kind != "score"))]


@pytest.fixture(autouse=True)
def simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario, registered for this module's tests alone (other tests list the registered ones)."""
    monkeypatch.setitem(SCENARIOS._entries, AdaptiveSim.name, AdaptiveSim)


@dataclass
class Model:
    """Fresh samples answer from ``fresh`` in turn (then its last, forever); revisions answer ``revised``; a
    task whose prompt says ``easy`` is right at once. Every text is distinct, so no leader repeats another."""

    fresh: list[str] = field(default_factory=lambda: ["7"])
    revised: str = RIGHT
    calls: Iterator[int] = field(default_factory=itertools.count)
    drafts: int = 0

    def __call__(self, request: ChatRequest) -> str:
        n = next(self.calls)
        if request.json_schema is not None:  # the critic
            return '{"issues": [{"severity": "critical", "quote": "answer", "reason": "wrong", "fix": "redo"}]}'
        user = request.messages[-1].content
        if "easy" in user:
            answer = RIGHT
        elif "Your best answer so far" in user:
            answer = self.revised
        else:
            answer = self.fresh[min(self.drafts, len(self.fresh) - 1)]
            self.drafts += 1
        return f"call {n}: answer {answer}"


def task(i: int, feedback: str = "localized", *, easy: bool = False) -> Task:
    prompt = f"feedback={feedback} task={i}" + (" easy" if easy else "")
    return Task(task_id=f"t{i}", scenario="adaptive_sim", prompt=prompt)


def requests(trace: list[Message]) -> list[DraftRequest]:
    return [m for m in trace if isinstance(m, DraftRequest)]


def result(trace: list[Message]) -> Result:
    last = trace[-1]
    assert isinstance(last, Result)
    return last


def run_batch(
    tasks: list[Task], model: Model, batch: str, *, samples: int = 1, share: Share | None = None
) -> list[list[Message]]:
    """``tasks`` one after another through one arbiter of the batch ``batch``."""
    convergence = ConvergenceConfig(max_rounds=20, patience=20)
    settings = ArbiterSettings(strategy="adaptive", samples=samples, convergence=convergence, batch=batch, share=share)
    arbiter = scripted_arbiter(model, settings, scenario="adaptive_sim")

    async def every() -> list[list[Message]]:
        return [wire(await arbiter.run(t)) for t in tasks]

    return asyncio.run(every())


def ledger(batch: str) -> Ledger:
    found = services.current().shared(Ledger, ledger_name(batch), per_node=False)
    assert isinstance(found, Ledger)
    return found


# ------------------------------------------------------------------ the rules


def test_the_feedback_state_is_what_the_best_candidate_offers_a_revision() -> None:
    def verification(score: float, detail: str = "") -> Verification:
        check = CheckResult(name="c", passed=score >= 1, score=score, detail=detail)
        return Verification(task_id="t", round=0, sample=0, checks=[check], score=score, passed=score >= 1)

    assert feedback_state(None) == "first"
    assert feedback_state(verification(0.8)) == "near"
    assert feedback_state(verification(0.5, "example 3 fails")) == "localized"
    assert feedback_state(verification(0.0, "  ")) == "none"  # blank detail says nothing
    assert feedback_state(verification(0.5)) == "score"


def test_the_batch_sets_the_dearer_actions_priors_from_what_fresh_samples_achieved() -> None:
    assert batch_posterior("localized", "revise", {}) == pytest.approx((2 / 3, 4 / 3))  # 2/3 of fresh's even odds
    batch = {("localized", "fresh"): Tally(wins=11, tries=18)}  # fresh: 12/20 = 0.6
    a, b = batch_posterior("localized", "critique", batch)
    assert a / (a + b) == pytest.approx(0.3) and a + b == pytest.approx(2.0)  # half fresh's rate, weighing 2 calls
    assert batch_posterior("score", "revise", batch) == pytest.approx((0.8, 1.2))  # no fresh there yet: pooled
    never = {("localized", "fresh"): Tally(wins=0, tries=98)}
    assert batch_posterior("localized", "revise", never)[0] == 0.5  # half a win at least: an untried action is tried
    batch[("localized", "revise")] = Tally(wins=400, tries=500)
    a, b = batch_posterior("localized", "revise", batch)
    assert (a, b) == pytest.approx((0.8 + 40, 1.2 + 10))  # 500 calls weigh as 50: the same odds, less certainty


def test_a_task_s_own_calls_move_the_batch_s_view_of_it() -> None:
    assert task_chance(0.5, Tally()) == 0.5
    assert task_chance(0.5, Tally(0, 8)) == 0.25  # the batch's rate weighs as eight calls
    assert task_chance(0.1, Tally(4, 8)) == pytest.approx(4.8 / 16)


def test_the_plan_follows_what_paid_and_stays_within_the_calls() -> None:
    rng = random.Random(0)
    batch = {("localized", "revise"): Tally(45, 50), ("localized", "fresh"): Tally(2, 50)}
    chosen = Counter(a for _ in range(200) for a in plan(2, 2.0, "localized", batch, Standing(), rng))
    assert chosen["revise"] >= 380 and sum(chosen.values()) == 400
    assert plan(3, 1.5, "localized", batch, Standing(), rng) == ["revise"]  # one call affordable
    critiqued = {
        ("score", "critique"): Tally(50, 50),
        ("score", "fresh"): Tally(0, 50),
        ("score", "revise"): Tally(0, 50),
    }
    assert plan(3, 1.0, "score", critiqued, Standing(), rng) != ["critique"]  # a critique and its revision cost 2
    assert plan(3, 4.0, "score", critiqued, Standing(), rng) == ["critique"] * 3  # one critique serves every revision


def test_in_tokens_or_money_an_action_is_weighed_at_what_the_task_paid_for_it() -> None:
    rng = random.Random(0)
    even = {("localized", "revise"): Tally(30, 50), ("localized", "fresh"): Tally(25, 50)}
    assert cost("revise") == cost("fresh") == 1.0 and cost("critique") == 2.0
    dear = Standing(prices={"fresh": 1.0, "revise": 3.0, "critique": 3.0})
    assert cost("revise", dear) == 3.0 and cost("critique", dear) == 4.0 and cost("critique", dear, True) == 3.0
    cheap_first = Counter(a for _ in range(200) for a in plan(1, 10.0, "localized", even, Standing(), rng))
    priced = Counter(a for _ in range(200) for a in plan(1, 10.0, "localized", even, dear, rng))
    assert cheap_first["revise"] > cheap_first["fresh"]  # at one call each, the revision pays more
    assert priced["fresh"] > 150  # at three times the price, it does not
    assert plan(3, 3.5, "localized", even, dear, rng).count("revise") <= 1  # and the plan stays within the budget


def test_an_answer_is_settled_when_its_majority_is_near_certain() -> None:
    assert settled(Counter()) is None
    assert settled(Counter({"7": 2})) is None  # 7/8
    assert settled(Counter({"7": 3, "5": 1})) is None  # 26/32
    assert settled(Counter({"7": 4})) == pytest.approx(31 / 32)
    assert settled(Counter({"7": 7, "5": 1})) == pytest.approx(1 - 10 / 512)


def test_the_ledger_counts_a_redone_call_once_and_lends_a_loan_once() -> None:
    book = Ledger()
    book.record([CallOutcome("t/1/0", "localized", "revise", False)])
    table = book.record(
        [CallOutcome("t/1/0", "localized", "revise", True), CallOutcome("u/1/0", "none", "fresh", False)]
    )
    assert table == {("localized", "revise"): Tally(1, 1), ("none", "fresh"): Tally(0, 1)}
    book.settle("a", 3.0)
    book.settle("a", 2.0)  # a task redone settles once, with its last figure
    assert book.balance() == 2.0
    assert book.borrow("b/2", 5.0) == 2.0 and book.balance() == 0.0
    assert book.borrow("b/2", 5.0) == 2.0 and book.balance() == 0.0  # the same loan again: nothing more lent
    assert book.borrow("b/3", 1.0) == 0.0
    primed = Ledger()
    primed.prime([CallOutcome("t/1/0", "near", "fresh", True)], {"a": 1.5, "c": -0.5})
    assert primed.table() == {("near", "fresh"): Tally(1, 1)} and primed.balance() == 1.0


# ------------------------------------------------------------------ the strategy


def test_revisions_win_where_they_pay_and_every_call_says_why() -> None:
    model = Model(fresh=["7"])
    [trace] = run_batch([task(0)], model, "why", samples=2)
    sent = requests(trace)
    assert [(r.round, r.intent.action, r.intent.state) for r in sent[:2] if r.intent] == [(0, "fresh", "first")] * 2
    later = sent[2:]
    assert later and all(r.intent is not None and r.intent.state == "localized" for r in later)
    assert all(r.intent.best_score == 0.5 for r in later if r.intent)
    assert all((r.revision is None) == (r.intent.action == "fresh") for r in later if r.intent)
    final = result(trace)
    assert final.passed and final.answer == RIGHT and final.stop_reason == "threshold"
    winner = next(r for r in sent if (r.round, r.sample) == (final.best_round, final.best_sample))
    assert winner.intent is not None and winner.intent.action in ("revise", "critique")
    critiques = sum(isinstance(m, Critique) for m in trace)
    assert final.usage.calls == len(sent) + critiques  # every call, critiques included, is charged


def test_what_the_batch_learns_steers_its_later_tasks() -> None:
    traces = run_batch([task(i) for i in range(16)], Model(fresh=["7"]), "learns", samples=2)
    assert all(result(t).passed for t in traces)
    learned = ledger("learns").table()
    assert learned[("localized", "revise")].wins == learned[("localized", "revise")].tries > 0
    assert learned.get(("localized", "fresh"), Tally()).wins == 0
    late = [r.intent.action for t in traces[-6:] for r in requests(t) if r.intent and r.round == 1]
    assert late.count("fresh") <= 1 and len(late) == 12  # what paid, nearly always


def test_tasks_that_pass_early_leave_their_calls_to_one_still_failing() -> None:
    model = Model(fresh=["7"], revised="8")  # the hard task is never right
    tasks = [task(0, easy=True), task(1, easy=True), task(2)]
    traces = run_batch(tasks, model, "bank", share=Share(3.0))
    easy, hard = [result(t) for t in traces[:2]], result(traces[2])
    assert [r.usage.calls for r in easy] == [1, 1] and all(r.passed for r in easy)
    assert hard.usage.calls == 3 + 2 + 2  # its own 3 and the 2 each easy task left
    assert hard.stop_reason == "budget" and not hard.passed
    assert ledger("bank").balance() == 0.0


def test_a_budget_in_tokens_is_shared_as_one_in_calls() -> None:
    model = Model(fresh=["7"], revised="8")
    tasks = [task(0, easy=True), task(1, easy=True), task(2)]
    traces = run_batch(tasks, model, "tokens", share=Share(300.0, "tokens"))
    easy, hard = [result(t) for t in traces[:2]], result(traces[2])
    assert all(r.passed and r.usage.calls == 1 for r in easy)
    left = sum(300 - r.usage.total_tokens for r in easy)
    assert left > 0 and hard.stop_reason == "budget" and not hard.passed
    assert "300 tokens per task is spent" in [m for m in traces[2] if isinstance(m, Decision)][-1].detail
    per_call = hard.usage.total_tokens / hard.usage.calls
    unspent = ledger("tokens").balance()  # what the batch did not spend, less than one more call of the hard task's
    assert unspent == pytest.approx(300 * 3 - sum(result(t).usage.total_tokens for t in traces))
    dearest = max(m.usage.total_tokens for m in traces[2] if isinstance(m, Draft))
    assert -dearest < unspent < per_call and hard.usage.calls > 4  # the last round overran by part of a call at most


def test_with_no_feedback_signal_it_samples_until_the_majority_is_settled() -> None:
    model = Model(fresh=["5", "7"])  # the first sample says 5, every later one 7
    [trace] = run_batch([task(0, "none")], model, "settles", samples=2)
    final = result(trace)
    assert {r.intent.action for r in requests(trace) if r.intent} == {"fresh"}
    assert final.stop_reason == "stable" and final.rounds == 4 and final.usage.calls == 8
    assert final.answer == "7"  # the majority over every round, though round 0's leader said 5
    decision = [m for m in trace if isinstance(m, Decision)][-1]
    assert "its answer is settled" in decision.detail


def test_the_run_dir_shows_how_the_calls_were_spent() -> None:
    trace = run_task(task(0), Model(fresh=["7"]), strategy="adaptive", samples=2, max_rounds=6, patience=6)
    spent = spending("t0", [KnownFrame(m) for m in trace])
    sent = requests(trace)
    assert len([s for s in spent if s.call == "draft"]) == len(sent)
    assert len([s for s in spent if s.call == "critique"]) == sum(isinstance(m, Critique) for m in trace)
    rows = spending_table(spent)
    assert rows[0].state == "first" and rows[0].drafts == 2 and rows[0].judged == 0
    last = result(trace).rounds - 1
    revised = [r for r in sent if r.intent and r.intent.action != "fresh"]
    assert revised and all(r.round == last for r in revised)  # the first revision was right, and ended it
    assert sum(r.raised for r in rows) == len(revised)  # each raised the best; no fresh sample did


def test_calls_per_task_belongs_to_the_strategy_that_spends_it() -> None:
    with pytest.raises(UserError, match="--calls-per-task is the budget of a strategy that chooses its calls"):
        resolve_run(RunConfig.build(scenario="arithmetic", strategy="adversarial", calls_per_task=4))
    with pytest.raises(UserError, match="--calls-per-task"):
        RunConfig.build(scenario="arithmetic", strategy="adaptive", calls_per_task=0.5).validate()
    with pytest.raises(UserError, match="--tokens-per-task is the budget of a strategy that chooses its calls"):
        resolve_run(RunConfig.build(scenario="arithmetic", strategy="adversarial", tokens_per_task=4000))
    with pytest.raises(UserError, match=r"one of them, not --calls-per-task and --tokens-per-task"):
        resolve_run(RunConfig.build(scenario="arithmetic", strategy="adaptive", calls_per_task=4, tokens_per_task=4000))
    with pytest.raises(UserError, match="--tokens-per-task 100 cannot pay for one draft of up to --max-tokens 128"):
        resolve_run(RunConfig.build(scenario="arithmetic", strategy="adaptive", tokens_per_task=100))
    arms = [Arm(name="a", settings={"strategy": "adaptive"}), Arm(name="b", settings={"strategy": "adversarial"})]
    base = RunConfig.build(scenario="arithmetic", calls_per_task=4, out="x")
    lanes = ComparePlan(base=base, arms=arms, out=Path("x")).lanes()
    budgets = {lane.arm: lane.config.experiment.calls_per_task for lane in lanes}
    assert budgets == {"a": 4.0, "b": None, "baseline": None}
    base = RunConfig.build(scenario="arithmetic", tokens_per_task=4000, out="x")
    lanes = ComparePlan(base=base, arms=arms, out=Path("x")).lanes()
    in_tokens = {lane.arm: lane.config.experiment.tokens_per_task for lane in lanes}
    assert in_tokens == {"a": 4000, "b": None, "baseline": None}
