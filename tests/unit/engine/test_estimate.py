"""The pre-flight estimate: its worst case is what the real loop spends when the model never passes and always
answers at its limit; worst case, expected and first pass are ordered; a resume's expected cost is what its
finished tasks really cost; a large run is a sample scaled up; a batch budget bounds the adaptive strategy."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from itertools import islice
from pathlib import Path

import pytest

import redraft
from redraft import RunConfig
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._costing import CHARS_PER_TOKEN, MESSAGE_TOKENS, CostingBackend, prompt_tokens
from redraft.engine._refine import refine_trace
from redraft.engine.estimate import Estimate, Spend
from redraft.engine.grader import Grader
from redraft.engine.resolution import arbiter_settings
from redraft.errors import UserError
from redraft.protocols.messages import ChatMessage, Result, Usage, decode_as, encode
from redraft.rundir import RunStore
from redraft.scenarios import get_scenario
from tests.support.harness import scripted_arbiter
from tests.support.plan_scripts import ask_of, step, write_output
from tests.support.replies import CRITIQUE, LateLearner, request_kind
from tests.support.resolved import manifest_for

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
STRATEGIES = [
    "adversarial",
    "self_refine",
    "debate",
    "verifier_only",
    "cove",
    "stepwise",
    "best_of_n",
    "self_consistency",
    "none",
]


def never_passes(request: ChatRequest) -> str:
    """A model that always fails the feedback and answers at its limit: ``max_tokens`` words on one line (so
    no stage check passes either), random words (so no leader repeats an earlier one); five questions a plan."""
    kind = request_kind(request)
    if kind == "critique":
        return json.dumps(CRITIQUE)
    if kind == "questions":
        return json.dumps({"questions": [f"Question {k}?" for k in range(5)]})
    rng = random.Random(f"{request.seed}/{request.messages[-1].content}")
    return " ".join(rng.choices(WORDS, k=request.max_tokens))


def priced(script: object) -> ScriptedSpec:
    """A scripted model whose calls are priced as gpt-4o-mini's."""
    return ScriptedSpec(script=script, model="gpt-4o-mini")  # type: ignore[arg-type]


def real_spend(config: RunConfig, model: ScriptedSpec) -> Spend:
    """What the real loop, in this process, spends on the config's tasks."""
    tasks = islice(get_scenario(config.experiment.scenario).tasks(seed=0), config.runtime.limit)
    spend = Spend()
    for task in tasks:
        done = redraft.refine(task, config, backends={"drafter": model, "critic": model})
        spend = spend + Spend(dict(done.result.usage_by_role))
    return spend


def loop_config(strategy: str, **settings: object) -> RunConfig:
    # patience as long as the cycle: a real model's constant failing score would otherwise stop it early
    base = {"scenario": "arithmetic", "strategy": strategy, "samples": 2, "max_rounds": 3, "patience": 3}
    return RunConfig.build(**(base | {"limit": 3, "max_tokens": 24} | settings))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_worst_case_is_what_the_real_loop_spends_when_nothing_ever_passes(strategy: str) -> None:
    config = loop_config(strategy)
    model = priced(never_passes)
    made = redraft.estimate(config, backends={"drafter": model, "critic": model})
    real = real_spend(config, model)
    assert {role: u.calls for role, u in made.worst.by_role.items()} == {
        role: u.calls for role, u in real.by_role.items()
    }
    # Every drafter answer (drafts, stages, reflections) is as long as its max tokens, in both.
    assert made.worst.by_role["drafter"].output_tokens == real.by_role["drafter"].output_tokens
    assert made.worst.total.calls > made.first_pass.total.calls or strategy in ("none", "self_consistency", "best_of_n")


def plan_never_verifying(decision: str) -> object:
    """A plan of two steps whose programs always fail, and this decision every time one is asked."""

    def reply(request: ChatRequest) -> str:
        kind = ask_of(request)
        if kind == "plan":
            return json.dumps({"steps": [step("read", [], "a.csv", [], {}), write_output("a.csv")]})
        if kind == "step":
            return "```python\nraise SystemExit(1)\n```"
        return json.dumps({"action": decision, "redo": 1, "reason": "again"})

    return reply


def test_a_plans_worst_case_is_what_the_real_loop_spends_when_no_step_ever_verifies() -> None:
    config = loop_config("plan_execute", scenario="pipeline", limit=2, max_rounds=2, max_tokens=64)
    going_on = priced(plan_never_verifying("continue"))
    made = redraft.estimate(config, backends={"drafter": going_on, "critic": going_on})
    assert made.samples == 1
    assert made.worst.total.calls == real_spend(config, going_on).total.calls
    retrying = priced(plan_never_verifying("retry"))  # retries stall sooner than going on: under the worst case
    assert real_spend(config, retrying).total.calls < made.worst.total.calls
    assert made.first_pass.total.calls == 2 * (1 + 5 + 4)  # a plan of 5 steps, each verified, 4 decisions between


def test_patience_does_not_end_the_worst_case_before_the_cycle_limit() -> None:
    """A model may improve a little every round: the worst case runs to --max-rounds whatever --patience says."""
    model = priced(never_passes)
    config = loop_config("adversarial", max_rounds=5, patience=1)
    impatient = redraft.estimate(config, backends={"drafter": model, "critic": model})
    patient = real_spend(loop_config("adversarial", max_rounds=5, patience=5), model)
    assert impatient.worst.total.calls == patient.total.calls == 3 * (5 * 2 + 4 * 2)
    assert real_spend(loop_config("adversarial", max_rounds=5, patience=1), model).total.calls < patient.total.calls


def test_a_model_that_passes_at_once_costs_what_the_first_pass_case_says_in_calls() -> None:
    config = loop_config("adversarial")
    model = priced(LateLearner(fix_at=0))
    made = redraft.estimate(config, backends={"drafter": model, "critic": model})
    assert made.first_pass.total.calls == real_spend(config, model).total.calls == 3 * 2  # K drafts, no critique


@pytest.mark.parametrize(
    "settings",
    [
        {"strategy": "adversarial"},
        {"strategy": "debate", "max_rounds": 4},
        {"strategy": "stepwise", "samples": 1},
        {"strategy": "verifier_only", "task_budget_tokens": 3000},
        {"strategy": "adaptive", "calls_per_task": 5},
        {"strategy": "self_refine", "patch": True},
    ],
    ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()),
)
def test_worst_case_expected_and_first_pass_are_ordered(settings: dict[str, object]) -> None:
    model = priced(never_passes)
    made = redraft.estimate(loop_config(**settings), backends={"drafter": model, "critic": model})  # type: ignore[arg-type]
    figures = ("calls", "input_tokens", "output_tokens", "cost_usd")
    worst, expected, first = made.worst.total, made.expected.total, made.first_pass.total
    for figure in figures:
        assert getattr(worst, figure) >= getattr(expected, figure) >= getattr(first, figure) > 0, figure
    assert worst.cost_usd > first.cost_usd  # a failing task runs more than one round, or longer answers


def test_an_adaptive_batch_budget_bounds_the_worst_case() -> None:
    model = priced(never_passes)
    config = loop_config("adaptive", samples=4, max_rounds=10, patience=10, calls_per_task=6, limit=8)
    made = redraft.estimate(config, backends={"drafter": model, "critic": model})
    assert made.worst.total.calls <= 6 * 8
    unbounded = redraft.estimate(config.replace(calls_per_task=None), backends={"drafter": model, "critic": model})
    assert unbounded.worst.total.calls > 6 * 8  # the budget, not the cycle limit, is what bounded it


def test_a_large_run_is_estimated_from_a_seeded_sample_scaled_up() -> None:
    model = priced(never_passes)
    config = RunConfig.build(scenario="arithmetic", limit=30, samples=1, max_rounds=2)
    whole = redraft.estimate(config, backends={"drafter": model, "critic": model})
    from redraft.engine.estimate import estimate_tasks
    from redraft.engine.resolution import resolve_run

    run = resolve_run(config, backends={"drafter": model, "critic": model})
    tasks = list(islice(get_scenario("arithmetic").tasks(seed=0), 30))
    sampled = estimate_tasks(run, iter(tasks), sample=10)
    again = estimate_tasks(run, iter(tasks), sample=10)
    assert (sampled.tasks, sampled.simulated, whole.simulated) == (30, 10, 30)
    assert sampled == again  # seeded: the same sample, the same figures
    assert sampled.worst.total.calls == whole.worst.total.calls  # every task makes the same calls here
    assert sampled.worst.total.input_tokens == pytest.approx(whole.worst.total.input_tokens, rel=0.05)
    assert "a seeded sample of 10 of the 30 tasks" in " ".join(sampled.assumptions)


def write_run(out: Path, config: RunConfig, tasks: int) -> list[Result]:
    """A run directory holding ``tasks`` finished tasks of ``config``, written by the real loop (no Ray)."""
    store = RunStore.open(out, manifest_for(config, out.name))
    model = LateLearner(fix_at=1)
    arbiter = scripted_arbiter(model, arbiter_settings(config), model="gpt-4o-mini")
    results = []
    for task in islice(get_scenario("arithmetic").tasks(seed=0), tasks):
        trace = asyncio.run(refine_trace(arbiter, Grader("arithmetic"), task))
        result = decode_as(encode(trace[-1]), Result)
        store.append([encode(m) for m in trace], result)
        results.append(result)
    store.finish(wall_s=1.0)
    return results


def test_a_resume_expects_the_mean_real_cost_of_its_finished_tasks(tmp_path: Path) -> None:
    config = RunConfig.build(scenario="arithmetic", limit=10, samples=2, out=str(tmp_path / "run"))
    finished = write_run(tmp_path / "run", config, 4)
    before = {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()}
    model = priced(never_passes)
    made = redraft.estimate(config, backends={"drafter": model, "critic": model})
    spent = sum((r.usage for r in finished), Usage())
    assert (made.tasks, made.done, made.simulated) == (6, 4, 6)
    assert made.spent.calls == spent.calls and made.spent.cost_usd == pytest.approx(spent.cost_usd)
    assert made.expected.total.calls == round(spent.calls / 4 * 6)
    assert made.expected.total.cost_usd == pytest.approx(spent.cost_usd / 4 * 6)
    assert "the mean real cost of the 4 tasks the run directory holds, times the 6 left" in made.assumptions[2]
    with pytest.raises(UserError, match="holds a run with another configuration"):
        redraft.estimate(config.replace(samples=3), backends={"drafter": model, "critic": model})
    assert {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()} == before  # read, not written


def test_a_dry_run_config_is_refused_by_run_which_would_start_everything() -> None:
    with pytest.raises(UserError, match="a dry run starts nothing"):
        redraft.run(RunConfig.build(dry_run=True, limit=1))


def test_the_costing_model_counts_a_prompt_and_charges_its_answer_in_full() -> None:
    messages = [ChatMessage(role="system", content="x" * 10), ChatMessage(role="user", content="y" * 8)]
    assert prompt_tokens(messages) == 3 + 2 + 2 * MESSAGE_TOKENS
    done = asyncio.run(CostingBackend("gpt-4o-mini", 0.5).complete(ChatRequest(messages=messages, max_tokens=100)))
    assert done.usage == Usage(input_tokens=prompt_tokens(messages), output_tokens=50, calls=1)
    assert len(done.text) == 50 * CHARS_PER_TOKEN and done.model == "gpt-4o-mini"


def test_an_estimate_says_which_run_budgets_its_worst_case_is_over() -> None:
    made = Estimate(
        tasks=10,
        simulated=10,
        first_pass=Spend({"drafter": Usage(calls=10, cost_usd=0.1)}),
        expected=Spend({"drafter": Usage(calls=20, cost_usd=0.5)}),
        worst=Spend({"drafter": Usage(calls=40, input_tokens=900, output_tokens=100, cost_usd=2.0)}),
        models={"drafter": "gpt-4o-mini"},
    )
    over = made.over_budget(RunConfig.build(budget_usd=1.0, budget_calls=40, budget_tokens=999).budgets)
    assert over == [
        "the worst case, $2.00, is over --budget-usd 1: the budget stops the run after about 5 of its 10 tasks "
        "if they all cost the worst case",
        "the worst case, 1,000 tokens, is over --budget-tokens 999: the budget stops the run after about 9 of its "
        "10 tasks if they all cost the worst case",
    ]
    assert made.over_budget(RunConfig.build(budget_usd=2.0).budgets) == []  # at the budget is not over it
    resumed = dataclasses.replace(made, done=3, spent=Usage(calls=12, cost_usd=1.5))
    assert resumed.over_budget(RunConfig.build(budget_usd=2.0).budgets) == [
        "the worst case, $2.00, is over --budget-usd 2 ($0.5000 of it left): the budget stops the run after about "
        "2 of its 10 tasks if they all cost the worst case"  # the expected $0.50 is not over the $0.50 left
    ]
    assert resumed.over_budget(RunConfig.build(budget_calls=12).budgets) == [
        "--budget-calls 12 is spent already (12 calls by the tasks done): the run will start none"
    ]
    assert dataclasses.replace(made, tasks=0).over_budget(RunConfig.build(budget_usd=0.1).budgets) == []
    assert "(the expected $0.5000 is over it too)" in made.over_budget(RunConfig.build(budget_usd=0.4).budgets)[0]


def test_a_batch_run_is_estimated_at_the_batch_price(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    online = RunConfig.build(scenario="arithmetic", model="openai:gpt-4o-mini", limit=4, samples=2, max_rounds=2)
    made, batched = redraft.estimate(online), redraft.estimate(online.replace(batch=True))
    assert batched.worst.total.calls == made.worst.total.calls == batched.worst.total.batch_calls > 0
    assert made.worst.total.cost_usd > 0
    assert batched.worst.total.cost_usd == pytest.approx(made.worst.total.cost_usd / 2)
    assert batched.expected.total.cost_usd == pytest.approx(made.expected.total.cost_usd / 2)


@pytest.mark.parametrize("model", ["anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini"])
def test_the_provider_s_prompt_cache_is_simulated_and_its_hit_rate_stated(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redraft.engine import _costing

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    config = RunConfig.build(scenario="incident", model=model, limit=3, samples=2, max_rounds=3, patience=3)
    cached = redraft.estimate(config)
    monkeypatch.setattr(_costing.PromptCaching, "of", classmethod(lambda cls, spec, cold=False: None))
    uncached = redraft.estimate(config)
    expected, worst = cached.expected.total, cached.worst.total
    assert (
        expected.calls == uncached.expected.total.calls
        and expected.input_tokens == uncached.expected.total.input_tokens
    )
    assert 0 < expected.cached_tokens < expected.input_tokens  # the incident's logs make a long stable prefix
    assert worst.cached_tokens == 0  # the worst case reads nothing back
    assert expected.cost_usd < uncached.expected.total.cost_usd
    anthropic = model.startswith("anthropic")
    assert (worst.cache_write_tokens > 0) == anthropic  # Anthropic writes at every breakpoint, OpenAI never
    assert (worst.cost_usd > uncached.worst.total.cost_usd) == anthropic  # its writes cost more than input
    rate = round(100 * expected.cached_tokens / expected.input_tokens)
    [line] = [a for a in cached.assumptions if a.startswith("prompt cache:")]
    assert f"a {rate}% hit rate expected" in line
    [plain] = [a for a in uncached.assumptions if a.startswith("prompt cache:")]
    assert plain.startswith("prompt cache: a 0% hit rate, every input token at its full price")


def test_a_prefix_below_the_provider_s_minimum_is_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    config = RunConfig.build(scenario="arithmetic", model="anthropic:claude-sonnet-4-5", limit=3, max_rounds=2)
    made = redraft.estimate(config)
    assert made.expected.total.cached_tokens == made.worst.total.cache_write_tokens == 0  # arithmetic is short
