"""The arbiter's loop, in-process with the scripted backend: exact messages and decisions."""

from __future__ import annotations

from itertools import islice

import pytest

from redraft import RunConfig, refine
from redraft.backends.scripted import ScriptedSpec
from redraft.errors import ScriptExhaustedError
from redraft.protocols.messages import (
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Result,
    Task,
)
from redraft.scenarios import get_scenario
from redraft.strategies import agreement, get_strategy, strategy_names
from tests.support.harness import run_task
from tests.support.replies import CRITIQUE, LateLearner, garbage

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 3))
TASK = TASKS[0]
GOLD = int(TASK.gold["answer"])


def kinds(trace: list) -> list[str]:  # type: ignore[type-arg]
    return [type(m).__struct_config__.tag for m in trace]


def decisions(trace: list) -> list[tuple[int, str, str | None]]:  # type: ignore[type-arg]
    return [(m.round, m.action, m.reason) for m in trace if isinstance(m, Decision)]


def test_adversarial_converges_with_the_exact_decision_sequence() -> None:
    trace = run_task(TASK, LateLearner(fix_at=2), max_rounds=5, patience=3)
    assert decisions(trace) == [(0, "continue", None), (1, "continue", None), (2, "stop", "threshold")]
    round_kinds = ["draft_request"] * 2 + ["draft"] * 2 + ["verify_request"] * 2 + ["verification"] * 2
    critiques = ["critique_request"] * 2 + ["critique"] * 2
    # Both samples agree in each round, so both contend and both are critiqued; the
    # last round meets the threshold, so nothing is critiqued there.
    revising_round = [*round_kinds, *critiques, "decision"]
    assert kinds(trace) == ["task", *revising_round, *revising_round, *round_kinds, "decision", "result"]
    result = trace[-1]
    assert isinstance(result, Result)
    assert (result.answer, result.passed, result.score) == (str(GOLD), True, 1.0)
    # Round 0's leader wrote a wrong step: the calculator fails it, the other three checks pass.
    assert (result.initial_passed, result.initial_score, result.rounds) == (False, 0.75, 3)
    assert result.stop_reason == "threshold"
    assert result.usage.calls == 6 + 4  # six drafts, four critiques


def test_revision_carries_best_failed_checks_critique_and_memory() -> None:
    trace = run_task(TASK, LateLearner(fix_at=2), max_rounds=5, patience=3)
    round2 = next(m for m in trace if isinstance(m, DraftRequest) and m.round == 2)
    revision = round2.revision
    assert revision is not None
    assert revision.best_text.endswith(f"Answer: {GOLD + 1}")  # round 0's: round 1 tied, no replacement
    assert [c.name for c in revision.failed_checks] == ["steps"]
    wrong_step = revision.best_text.splitlines()[-2]
    assert revision.failed_checks[0].detail == f"'{wrong_step}' is wrong; recompute it"  # the calculator names it
    # The feedback is a function of the task as a user has it and the text: the gold plays no part.
    task_seen = next(m for m in trace if isinstance(m, Task))
    assert task_seen.gold == {} and str(GOLD) not in task_seen.prompt.split()
    assert revision.issues[0].reason == CRITIQUE["issues"][0]["reason"]
    assert [(a.round, a.answer) for a in revision.memory] == [(0, str(GOLD + 1)), (1, str(GOLD + 2))]


def test_adversarial_that_never_converges_stops_on_no_improvement() -> None:
    trace = run_task(TASK, LateLearner(never=True), max_rounds=10, patience=2)
    assert decisions(trace) == [(0, "continue", None), (1, "continue", None), (2, "stop", "no_improvement")]
    result = trace[-1]
    assert result.passed is False and result.stop_reason == "no_improvement"
    assert result.text.endswith(f"Answer: {GOLD + 1}")  # the best (first) one, not the last


def test_max_rounds_stops_a_task_that_keeps_failing() -> None:
    trace = run_task(TASK, LateLearner(never=True), max_rounds=2, patience=5)
    assert decisions(trace) == [(0, "continue", None), (1, "stop", "max_rounds")]
    # No critique on the final round: nothing would read it.
    assert not [m for m in trace if isinstance(m, CritiqueRequest) and m.draft.round == 1]


@pytest.mark.parametrize("strategy", ["none", "self_consistency"])
def test_single_pass_strategies_stop_after_round_zero(strategy: str) -> None:
    trace = run_task(TASK, LateLearner(fix_at=1), strategy=strategy, samples=3, max_rounds=5)
    assert decisions(trace) == [(0, "stop", "max_rounds")]
    drafts = [m for m in trace if isinstance(m, Draft)]
    assert len(drafts) == (1 if strategy == "none" else 3)
    assert not [m for m in trace if isinstance(m, Critique)]


def test_self_refine_critiques_with_the_self_stance() -> None:
    trace = run_task(TASK, LateLearner(fix_at=1), strategy="self_refine", max_rounds=3)
    requests = [m for m in trace if isinstance(m, CritiqueRequest)]
    assert requests and all(r.stance == "self" for r in requests)
    assert decisions(trace)[-1] == (1, "stop", "threshold")


def test_garbage_model_fails_checks_and_critiques_but_not_the_task() -> None:
    trace = run_task(TASK, garbage, max_rounds=3, patience=5)
    critiques = [m for m in trace if isinstance(m, Critique)]
    assert critiques and all(c.error and "not a valid critique" in c.error and not c.issues for c in critiques)
    result = trace[-1]
    assert result.passed is False and result.error is None
    assert result.stop_reason == "stable"  # the same garbage twice


def test_backend_failure_ends_the_task_with_error_and_keeps_the_trace() -> None:
    trace = run_task(TASK, ["Answer: 1"], samples=1, max_rounds=3)  # one reply, then exhausted
    result = trace[-1]
    assert result.stop_reason == "error"
    assert result.error is not None and ScriptExhaustedError.__name__ in result.error
    assert result.error_type == "ScriptExhaustedError" and result.stop_limit is None
    assert decisions(trace)[-1][1:] == ("stop", "error")


def test_refine_api_returns_result_and_trace() -> None:
    spec = ScriptedSpec(script=LateLearner(fix_at=1))
    refinement = refine(TASK, RunConfig.build(max_rounds=4), backends={"drafter": spec, "critic": spec})
    assert refinement.result.passed and refinement.result.rounds == 2
    assert isinstance(refinement.trace[0], Task)


def test_refine_works_inside_a_running_event_loop_and_refine_async_on_it() -> None:
    import asyncio

    from redraft import refine_async

    spec = ScriptedSpec(script=LateLearner(fix_at=1))
    config = RunConfig.build(max_rounds=4)
    backends = {"drafter": spec, "critic": spec}

    async def in_a_notebook() -> tuple[Result, Result]:  # a loop already runs here, as in Jupyter
        inside = refine(TASK, config, backends=backends)  # type: ignore[arg-type]
        awaited = await refine_async(TASK, config, backends=backends)  # type: ignore[arg-type]
        return inside.result, awaited.result

    inside, awaited = asyncio.run(in_a_notebook())
    assert inside.passed and awaited.passed and inside.text == awaited.text and inside.rounds == awaited.rounds == 2


def test_the_engine_refines_a_task_without_importing_ray() -> None:
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    program = (
        "import sys\n"
        "from redraft.engine import refine\n"
        "from redraft.backends.scripted import ScriptedSpec\n"
        "from redraft.scenarios import get_scenario\n"
        "from tests.support.replies import LateLearner\n"
        "task = next(get_scenario('arithmetic').tasks(seed=0))\n"
        "spec = ScriptedSpec(script=LateLearner(fix_at=1))\n"
        "result = refine(task, backends={'drafter': spec, 'critic': spec}).result\n"
        "print(result.passed, 'ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False"]


def test_agreement_is_the_share_of_equal_answers() -> None:
    from redraft.protocols.messages import Verification

    def v(answer: str | None) -> Verification:
        return Verification(task_id="t", round=0, sample=0, score=0.0, passed=False, answer=answer)

    assert agreement([v("3"), v("3"), v("4"), v(None)]) == [0.5, 0.5, 0.25, 0.0]


def test_registry_lists_the_builtin_strategies() -> None:
    assert {"none", "self_consistency", "self_refine", "adversarial"} <= set(strategy_names())
    assert get_strategy("adversarial").critic_role == "critic"


def test_every_model_call_gets_a_seed_by_one_rule_replayable_and_distinct() -> None:
    script = LateLearner(fix_at=2)
    first = run_task(TASK, script, max_rounds=3, patience=3)
    again = run_task(TASK, script, max_rounds=3, patience=3)
    seeds = [(type(m).__name__, m.seed) for m in first if isinstance(m, DraftRequest | CritiqueRequest)]
    assert seeds == [(type(m).__name__, m.seed) for m in again if isinstance(m, DraftRequest | CritiqueRequest)]
    critique_seeds = [seed for kind, seed in seeds if kind == "CritiqueRequest"]
    draft_seeds = [seed for kind, seed in seeds if kind == "DraftRequest"]
    assert critique_seeds and all(isinstance(s, int) for s in critique_seeds)
    assert len(set(draft_seeds + critique_seeds)) == len(draft_seeds + critique_seeds)  # no two calls share one
