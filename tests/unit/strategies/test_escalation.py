"""Escalation to a stronger model (``--escalate``) in one process, with scripted models priced by a table of the
test's own: a task the drafter's model cannot solve buys the stronger one's calls once its own stop paying, a
task the drafter's revisions fix never does, and a budget in money holds across the batch's shared bank."""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections import Counter

import pytest

from redraft.backends.pricing import Price, PriceTable, default_prices
from redraft.backends.scripted import ScriptedSpec
from redraft.config import RunConfig
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.resolution import Cast, RoleSetup, resolve_run
from redraft.errors import ProtocolError, UserError
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import Draft, DraftRequest, Intent, Message, Task, Usage
from redraft.scenarios._base import SCENARIOS
from redraft.strategies import Escalation, Share, Tally, get_strategy
from redraft.strategies._choice import REACH, Standing, best_value, escalates, plan, reach
from tests.support.harness import wire
from tests.support.simulated import RIGHT
from tests.unit.strategies.test_adaptive import AdaptiveSim, Model, requests, result

PRICES = PriceTable(
    default_prices().prices | {"cheap": Price(input=1.0, output=1.0), "strong": Price(input=10.0, output=10.0)}
)
ESCALATION = Escalation(model="strong", drafter_usd=(1.0, 1.0), escalated_usd=(10.0, 10.0))


@pytest.fixture(autouse=True)
def simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SCENARIOS._entries, AdaptiveSim.name, AdaptiveSim)


def cheap(revised: str = "8") -> Model:
    """The drafter's model: fresh samples say 7; revisions say ``revised`` (each worded anew); ``easy`` is right."""
    return Model(revised=revised)


def strong(answer: str = RIGHT) -> ScriptedSpec:
    counter = itertools.count()
    return ScriptedSpec(script=lambda _: f"strong {next(counter)}: answer {answer}", model="strong")


def hard(i: int) -> Task:
    return Task(task_id=f"h{i}", scenario="adaptive_sim", prompt=f"feedback=localized task={i}")


def easy(i: int) -> Task:
    return Task(task_id=f"e{i}", scenario="adaptive_sim", prompt=f"feedback=localized task={i} easy")


def run_batch(
    tasks: list[Task], cheap: Model, escalate: ScriptedSpec, batch: str, share: Share | None, samples: int = 2
) -> list[list[Message]]:
    setup = RoleSetup(
        scenario="adaptive_sim",
        drafter=ScriptedSpec(cheap, model="cheap"),
        critic=ScriptedSpec(cheap, model="cheap"),
        escalate=escalate,
    )
    settings = ArbiterSettings(
        strategy="adaptive",
        samples=samples,
        convergence=ConvergenceConfig(max_rounds=30, patience=30),
        prices=PRICES,
        share=share,
        batch=batch,
        escalation=ESCALATION,
    )
    arbiter = Arbiter(local_roles(Cast.of(setup, get_strategy("adaptive"))), settings)

    async def every() -> list[list[Message]]:
        return [wire(await arbiter.run(t)) for t in tasks]

    return asyncio.run(every())


def actions(trace: list[Message]) -> list[tuple[int, str]]:
    return [(r.round, r.intent.action) for r in requests(trace) if r.intent is not None]


# ------------------------------------------------------------------ the choice


def test_an_escalation_costs_the_stronger_model_s_price_in_the_drafter_s_calls() -> None:
    assert ESCALATION.ratio(Usage()) == pytest.approx(10.0)
    mixed = Escalation(model="s", drafter_usd=(1.0, 4.0), escalated_usd=(3.0, 40.0))
    assert mixed.ratio(Usage(input_tokens=300, output_tokens=100)) == pytest.approx((900 + 4000) / (300 + 400))
    assert mixed.drafter_cost(Usage(input_tokens=1_000_000, output_tokens=0)) == 1.0


def test_it_is_offered_only_where_the_cheap_actions_are_worth_less_a_call() -> None:
    paying = {("localized", "revise"): Tally(40, 50), ("localized", "fresh"): Tally(5, 50)}
    at_ten = Standing(escalation=10.0)
    assert not escalates("localized", paying, at_ten)
    rng = random.Random(0)
    chosen = {a for _ in range(300) for a in plan(3, 30.0, "localized", paying, at_ten, rng)}
    assert "escalate" not in chosen  # never, whatever the draws
    stuck = {("localized", a): Tally(0, 30) for a in ("fresh", "revise", "critique")}
    stuck[("localized", "escalate")] = Tally(9, 10)
    assert escalates("localized", stuck, at_ten)
    assert plan(2, 9.0, "localized", stuck, at_ten, rng) != ["escalate"]  # 9 calls cannot pay for one
    assert "escalate" in plan(2, 30.0, "localized", stuck, at_ten, rng)
    assert best_value("localized", stuck, at_ten)[1] == "escalate"
    assert best_value("localized", stuck, Standing())[1] != "escalate"  # a run with none never values it
    assert not escalates("localized", stuck, Standing())


def test_a_task_s_cheap_failures_of_every_action_make_it_out_of_reach_geometrically() -> None:
    batch = {("localized", "fresh"): Tally(30, 100), ("localized", "revise"): Tally(50, 100)}
    assert reach("localized", batch, Counter()) == REACH
    one_each = reach("localized", batch, Counter({"fresh": 1, "revise": 1}))
    two_each = reach("localized", batch, Counter({"fresh": 2, "revise": 2}))
    assert two_each < one_each < REACH
    odds = [p / (1 - p) for p in (REACH, one_each, two_each)]
    assert odds[1] / odds[0] == pytest.approx(odds[2] / odds[1])  # each failure, the same factor: geometric
    assert odds[1] / odds[0] == pytest.approx((1 - 31 / 102) * (1 - 51 / 102), rel=0.05)  # the actions' failing odds
    # a task failing its cheap calls escalates after a few, not after each action's own tally has decayed
    assert not escalates("localized", batch, Standing(escalation=15.0, within=reach("localized", batch, Counter())))
    failed = next(
        n
        for n in range(1, 40)
        if escalates(
            "localized", batch, Standing(escalation=15.0, within=reach("localized", batch, Counter({"revise": n})))
        )
    )
    assert failed <= 6


# ------------------------------------------------------------------ the strategy


def test_a_task_only_the_stronger_model_solves_buys_it_after_the_cheap_calls_stop_paying() -> None:
    traces = run_batch([hard(i) for i in range(4)], cheap(), strong(), "solves", Share(1.0, "usd"))
    firsts = []
    for trace in traces:
        final, chosen = result(trace), actions(trace)
        assert final.passed and final.answer == RIGHT
        firsts.append(next(k for k, (_, action) in enumerate(chosen) if action == "escalate"))
        winner = next(
            m for m in trace if isinstance(m, Draft) and (m.round, m.sample) == (final.best_round, final.best_sample)
        )
        assert winner.model == "strong"
        assert final.usage_by_role["drafter"].cost_usd > 0
        escalated = [r for r in requests(trace) if r.intent is not None and r.intent.action == "escalate"]
        assert escalated and all(r.revision is None for r in escalated)  # the stronger model's own sample
    first = actions(traces[0])[: firsts[0]]
    assert {a for _, a in first} >= {"fresh", "revise"} and max(r for r, _ in first) >= 2  # cheap calls first
    assert firsts[-1] < firsts[0]  # what the batch learned: later tasks escalate sooner


def test_tasks_the_cheap_revisions_fix_never_escalate() -> None:
    traces = run_batch([hard(i) for i in range(8)], cheap(revised=RIGHT), strong(), "cheap_pays", Share(1.0, "usd"))
    assert all(result(t).passed for t in traces)
    assert all(a != "escalate" for t in traces for _, a in actions(t))
    assert not any(isinstance(m, Draft) and m.model == "strong" for t in traces for m in t)


def test_a_budget_in_money_holds_over_the_batch_but_for_the_last_call() -> None:
    tasks = [easy(0), easy(1), hard(2), hard(3)]
    budget = 0.001  # per task: a strong call here costs about 0.00025
    traces = run_batch(tasks, cheap(), strong("9"), "money", Share(budget, "usd"))  # nothing ever solves hard ones
    spent = [result(t).usage.cost_usd for t in traces]
    assert [result(t).passed for t in traces] == [True, True, False, False]
    assert all(result(t).stop_reason == "budget" for t in traces[2:])
    dearest = max(PRICES.priced(m.model, m.usage).cost_usd for t in traces for m in t if isinstance(m, Draft))
    assert sum(spent) <= budget * len(tasks) + dearest  # the documented overrun: part of the last call at most
    assert any(a == "escalate" for t in traces[2:] for _, a in actions(t))  # the money did buy escalations
    assert sum(spent[2:]) > 2 * budget  # the hard tasks spent what the easy ones left


def test_an_escalation_asked_of_a_drafter_with_no_stronger_model_is_a_protocol_error() -> None:
    from redraft.engine._model_role import CallSettings
    from redraft.engine.drafter import Drafter

    drafter = Drafter(ScriptedSpec(cheap(), model="cheap"), "adaptive_sim", CallSettings(0.8, 64))
    request = DraftRequest(task=hard(0), round=1, sample=0, seed=1, intent=Intent(action="escalate", state="localized"))
    with pytest.raises(ProtocolError, match="no stronger model"):
        asyncio.run(drafter.draft(request))
    routed = Drafter(ScriptedSpec(cheap(), model="cheap"), "adaptive_sim", CallSettings(0.8, 64), escalate=strong())
    assert asyncio.run(routed.draft(request)).model == "strong"
    plain = msgspec_replace(request, intent=Intent(action="revise", state="localized"))
    assert asyncio.run(routed.draft(plain)).model == "cheap"


def msgspec_replace(request: DraftRequest, **changes: object) -> DraftRequest:
    import msgspec

    return msgspec.structs.replace(request, **changes)


# ------------------------------------------------------------------ the settings


def test_a_money_budget_and_an_escalation_are_refused_in_one_line_where_they_cannot_work() -> None:
    def refused(match: str, **settings: object) -> None:
        with pytest.raises(UserError, match=match) as caught:
            resolve_run(RunConfig.build(scenario="arithmetic", strategy="adaptive", **settings))
        assert "\n" not in str(caught.value)

    refused(
        "the drafter's model mystery-model has no price there: add it with --prices FILE",
        drafter="openai:mystery-model",
        critic="openai:gpt-4o-mini",
        usd_per_task=0.01,
    )
    refused(
        "--escalate buys calls at another model's price, which --calls-per-task cannot weigh",
        escalate="openai:gpt-4o",
        drafter="openai:gpt-4o-mini",
        calls_per_task=4,
    )
    refused("the drafter's model .* costs nothing: give it a price", escalate="openai:gpt-4o", usd_per_task=0.01)
    refused(
        "the escalation's model mystery-model has no price",
        escalate="openai:mystery-model",
        drafter="openai:gpt-4o-mini",
        critic="openai:gpt-4o-mini",
    )
    refused(r"--calls-per-task and --usd-per-task", calls_per_task=4, usd_per_task=0.01)
    with pytest.raises(UserError, match="--escalate is an action of a strategy that chooses its calls"):
        resolve_run(RunConfig.build(scenario="arithmetic", strategy="adversarial", escalate="openai:gpt-4o"))
    run = resolve_run(
        RunConfig.build(
            scenario="arithmetic",
            strategy="adaptive",
            drafter="openai:gpt-4o-mini",
            critic="openai:gpt-4o-mini",
            escalate="openai:gpt-4o",
            usd_per_task=0.01,
        )
    )
    assert run.settings.share == Share(0.01, "usd")
    assert run.settings.escalation is not None and run.settings.escalation.model == "gpt-4o"
    assert run.settings.escalation.ratio(Usage(input_tokens=1, output_tokens=0)) == pytest.approx(2.5 / 0.15)
    assert math.isfinite(run.settings.escalation.ratio(Usage()))


def test_the_report_shows_the_escalations_and_what_they_bought() -> None:
    from redraft.rundir.frames import KnownFrame
    from redraft.rundir.spending import spending, spending_table
    from redraft.views._spending import spending_view

    [trace] = run_batch([hard(0)], cheap(), strong(), "report", Share(1.0, "usd"))
    spent = spending("h0", [KnownFrame(m) for m in trace])
    rows = {(r.state, r.action): r for r in spending_table(spent)}
    bought = rows[("localized", "escalate")]
    assert bought.drafts == sum(a == "escalate" for _, a in actions(trace)) == bought.raised >= 1  # each passed
    assert all(r.raised == 0 for cell, r in rows.items() if cell[1] != "escalate")  # only it raised the best
    view = spending_view([spent])
    assert view is not None and any(row[1] == "escalate" and row[6] == f"{bought.raised:,}" for row in view.rows)
    assert "escalate" in view.counts[0] and view.counts[0]["escalate"] == bought.drafts


def test_a_comparison_gives_the_money_budget_and_the_escalation_to_the_arms_that_spend_them() -> None:
    from pathlib import Path

    from redraft.comparison._arms import Arm
    from redraft.comparison._runner import ComparePlan

    arms = [Arm(name="a", settings={"strategy": "adaptive"}), Arm(name="b", settings={"strategy": "adversarial"})]
    base = RunConfig.build(scenario="arithmetic", usd_per_task=0.01, escalate="openai:gpt-4o", out="x")
    lanes = ComparePlan(base=base, arms=arms, out=Path("x")).lanes()
    given = {lane.arm: (lane.config.experiment.usd_per_task, lane.config.experiment.escalate) for lane in lanes}
    assert given == {"a": (0.01, "openai:gpt-4o"), "b": (None, None), "baseline": (None, None)}
