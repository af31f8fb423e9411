"""Every strategy, in-process with the scripted backend: the exact messages and decisions of a task
that converges and of one that does not; stepwise stages; patch revisions."""

from __future__ import annotations

import dataclasses
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec
import pytest

from redraft.engine.prompts import fenced
from redraft.protocols.messages import (
    CheckResult,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Message,
    Reflection,
    Result,
    Verification,
    VerifyRequest,
)
from redraft.scenarios import get_scenario, scenario
from redraft.scenarios.builtin.arithmetic import Arithmetic
from redraft.strategies import get_strategy, strategy_names
from tests.support.harness import run_task
from tests.support.paths import DOCS
from tests.support.replies import CRITIQUE, PLAN, SKEPTIC_CRITIQUE, Tutor, worked

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 2))
TASK = TASKS[0]
GOLD = int(TASK.gold["answer"])
K = 2


@scenario("staged_arithmetic")
class StagedArithmetic(Arithmetic):
    """Arithmetic with stages of its own: a plan, the working, the answer; each intermediate one checked."""

    name = "staged_arithmetic"

    def stages(self) -> list[Any]:
        from redraft.scenarios import Stage

        return [Stage("plan", "List the steps."), Stage("work", "Do each step."), Stage("answer", "Give the answer.")]

    def check_stage(self, task: Any, stage: str, text: str) -> list[CheckResult]:
        ok = len(text.splitlines()) >= 2
        detail = "two steps" if ok else f"the {stage} needs one line per step"
        return [CheckResult(name=f"{stage}_steps", passed=ok, score=float(ok), detail=detail)]


def kinds(trace: list[Message]) -> list[str]:
    return [str(type(m).__struct_config__.tag) for m in trace]


def decisions(trace: list[Message]) -> list[tuple[int, str, str | None]]:
    return [(m.round, m.action, m.reason) for m in trace if isinstance(m, Decision)]


def result(trace: list[Message]) -> Result:
    last = trace[-1]
    assert isinstance(last, Result)
    return last


def sampled(k: int = K) -> list[str]:
    """The frames of drafting and verifying k candidates."""
    return ["draft_request"] * k + ["draft"] * k + ["verify_request"] * k + ["verification"] * k


def critiqued(k: int = K) -> list[str]:
    return ["critique_request"] * k + ["critique"] * k


# Per strategy: the frames of a round that gets feedback, then of a round that gets none
# (the last one, or one whose leader met the threshold). Both samples answer alike, so both
# contend for first place and both are critiqued.
ROUNDS: dict[str, tuple[list[str], list[str]]] = {
    "self_refine": ([*sampled(), *critiqued(), "decision"], [*sampled(), "decision"]),
    "adversarial": ([*sampled(), *critiqued(), "decision"], [*sampled(), "decision"]),
    "debate": (
        [*sampled(), *(["critique_request"] * 2 * K), *(["critique"] * 2 * K), "decision"],
        [*sampled(), "decision"],
    ),
    "verifier_only": ([*sampled(), "reflect_request", "reflection", "decision"], [*sampled(), "decision"]),
    "cove": ([*sampled(), "verify_request", "verification", "decision"], [*sampled(), "decision"]),
    "stepwise": ([*sampled(), "decision"], [*sampled(), "decision"]),
}
# stepwise drafts and checks its intermediate stages (outline, draft) once, before round 0's answer.
STAGES_ONCE = [*sampled(), *sampled()]


def expected(strategy: str, rounds: int) -> list[str]:
    feedback, last = ROUNDS[strategy]
    frames = ["task", *(STAGES_ONCE if strategy == "stepwise" else [])]
    frames += feedback * (rounds - 1) + last
    return [*frames, "result"]


def test_every_builtin_strategy_is_registered_and_documented() -> None:
    assert set(strategy_names()) >= {*ROUNDS, "none", "self_consistency", "best_of_n"}
    for name in strategy_names():
        doc = (type(get_strategy(name)).__doc__ or "").strip()
        assert doc and len(doc.splitlines()[0]) <= 110, name


@pytest.mark.parametrize("strategy", sorted(ROUNDS))
def test_a_task_that_converges(strategy: str) -> None:
    trace = run_task(TASK, Tutor.for_tasks(TASKS, fix_at=1), strategy=strategy, samples=K, max_rounds=4, patience=3)
    assert decisions(trace) == [(0, "continue", None), (1, "stop", "threshold")]
    assert kinds(trace) == expected(strategy, rounds=2)
    final = result(trace)
    assert (final.answer, final.passed, final.initial_passed, final.rounds) == (str(GOLD), True, False, 2)
    assert final.usage.calls == sum(1 for m in trace if isinstance(m, Draft | Critique | Reflection)) + sum(
        m.usage.calls for m in trace if isinstance(m, Verification)
    )


@pytest.mark.parametrize("strategy", sorted(ROUNDS))
def test_a_task_that_does_not_converge(strategy: str) -> None:
    trace = run_task(TASK, Tutor.for_tasks(TASKS, never=True), strategy=strategy, samples=K, max_rounds=3, patience=5)
    assert decisions(trace) == [(0, "continue", None), (1, "continue", None), (2, "stop", "max_rounds")]
    assert kinds(trace) == expected(strategy, rounds=3)
    final = result(trace)
    assert final.passed is False and final.stop_reason == "max_rounds"
    assert final.answer == str(GOLD + 1)  # the first of equally wrong leaders is kept, not the last


@pytest.mark.parametrize("strategy", ["none", "self_consistency", "best_of_n"])
def test_single_pass_strategies(strategy: str) -> None:
    for policy, passed in ((Tutor.for_tasks(TASKS, fix_at=0), True), (Tutor.for_tasks(TASKS, never=True), False)):
        trace = run_task(TASK, policy, strategy=strategy, samples=K, max_rounds=5)
        k = 1 if strategy == "none" else K
        assert kinds(trace) == ["task", *sampled(k), "decision", "result"]
        assert decisions(trace) == [(0, "stop", "threshold" if passed else "max_rounds")]
        assert result(trace).passed is passed


def _pick(strategy: str, offsets: list[int]) -> int:
    """Which sample the strategy keeps when its K samples' worked solutions are off by ``offsets`` (0: right)."""
    trace = run_task(TASK, [worked(TASK.prompt, off) for off in offsets], strategy=strategy, samples=len(offsets))
    [decision] = [m for m in trace if isinstance(m, Decision)]
    return decision.best_sample


def test_best_of_n_picks_by_the_verifier_alone_and_self_consistency_by_majority_on_ties() -> None:
    wrong, other = 3, 5
    assert _pick("best_of_n", [wrong, 0, 7]) == 1  # evidence first, for both: the only step-checked solution
    assert _pick("self_consistency", [wrong, 0, 7]) == 1
    assert _pick("best_of_n", [other, wrong, wrong]) == 0  # all fail alike: best_of_n keeps the first
    assert _pick("self_consistency", [other, wrong, wrong]) == 1  # the majority answer


def test_debate_critics_each_see_the_others_last_critique() -> None:
    trace = run_task(TASK, Tutor.for_tasks(TASKS, never=True), strategy="debate", samples=K, max_rounds=3, patience=5)
    requests = [m for m in trace if isinstance(m, CritiqueRequest)]
    assert [(r.draft.round, r.stance) for r in requests] == [
        (0, "adversarial"),
        (0, "adversarial"),
        (0, "skeptic"),
        (0, "skeptic"),
        (1, "adversarial"),
        (1, "adversarial"),
        (1, "skeptic"),
        (1, "skeptic"),
    ]
    assert all(r.opponent == [] for r in requests[:4])
    adversarial_reason, skeptic_reason = CRITIQUE["issues"][0]["reason"], SKEPTIC_CRITIQUE["issues"][0]["reason"]
    assert [i.reason for i in requests[4].opponent] == [skeptic_reason]  # adversarial sees the skeptic's
    assert [i.reason for i in requests[6].opponent] == [adversarial_reason]
    # The arbiter weighs both: the revision carries both critics' issues.
    round1 = next(m for m in trace if isinstance(m, DraftRequest) and m.round == 1)
    assert round1.revision is not None
    assert {i.reason for i in round1.revision.issues} == {adversarial_reason, skeptic_reason}
    assert {c.stance for c in trace if isinstance(c, Critique)} == {"adversarial", "skeptic"}


def test_verifier_only_keeps_reflections_in_the_memory() -> None:
    trace = run_task(
        TASK, Tutor.for_tasks(TASKS, never=True), strategy="verifier_only", samples=K, max_rounds=3, patience=5
    )
    assert not [m for m in trace if isinstance(m, CritiqueRequest)]  # no critic at all
    round2 = next(m for m in trace if isinstance(m, DraftRequest) and m.round == 2)
    assert round2.revision is not None
    memory = round2.revision.memory
    assert [a.round for a in memory] == [0, 1]
    assert all(a.reflection.startswith("I applied a change twice") for a in memory)
    assert [c.name for c in round2.revision.failed_checks] == ["steps"]  # the calculator's evidence
    assert result(trace).usage_by_role["drafter"].calls == 3 * K + 2  # drafts and two reflections


def test_cove_questions_are_answered_without_the_candidate_and_reach_the_revision() -> None:
    policy = Tutor.for_tasks(TASKS, fix_at=1)
    verifier_calls: list[Any] = []

    def recording(request: Any) -> str:
        verifier_calls.append(request)
        return policy(request)

    trace = run_task(TASK, policy, strategy="cove", samples=K, verifier=recording, max_rounds=3)
    questioned = [m for m in trace if isinstance(m, VerifyRequest) and m.questions]
    assert [(q.draft.round, q.questions) for q in questioned] == [(0, 3)]
    [verification] = [m for m in trace if isinstance(m, Verification) and m.questions]
    assert [q.answer for q in verification.questions] == [f"It is {GOLD}."] * 2
    assert verification.usage.calls == 3  # the plan and two answers, on the verifier's own backend
    answers = [r for r in verifier_calls if r.json_schema is None]
    asked = [fenced(r.messages[-1].content)[-1] for r in answers]
    assert asked == [q.question for q in verification.questions]  # one call per question
    leader_text = questioned[0].draft.text
    assert all(leader_text not in m.content for r in answers for m in r.messages)  # factored: never the candidate
    round1 = next(m for m in trace if isinstance(m, DraftRequest) and m.round == 1)
    assert round1.revision is not None and round1.revision.questions == verification.questions
    assert result(trace).usage_by_role["verifier"].calls == 3


def test_stepwise_redoes_only_the_stage_that_failed() -> None:
    policy = Tutor.for_tasks(TASKS, fix_at=0, fail_stages=("work",))
    staged = msgspec.structs.replace(TASK, scenario="staged_arithmetic")
    trace = run_task(staged, policy, strategy="stepwise", samples=K, max_rounds=3)
    stage_drafts = [(m.stage, m.revision is not None) for m in trace if isinstance(m, DraftRequest) and m.sample == 0]
    stages = [(s.name if s else None, retry) for s, retry in stage_drafts]
    # plan once; work fails, is redrafted in place with its failed check; the answer builds on both.
    assert stages == [("plan", False), ("work", False), ("work", True), ("answer", False)]
    checks = [(m.stage, m.passed) for m in trace if isinstance(m, Verification) and m.sample == 0]
    assert checks == [("plan", True), ("work", False), ("work", True), (None, True)]
    retry = [m for m in trace if isinstance(m, DraftRequest) and m.stage and m.stage.name == "work" and m.revision]
    assert retry[0].revision is not None
    assert [c.detail for c in retry[0].revision.failed_checks] == ["the work needs one line per step"]
    answer = next(m for m in trace if isinstance(m, DraftRequest) and m.stage and m.stage.name == "answer")
    assert answer.stage is not None and answer.stage.previous == "\n".join(PLAN)  # the verified work
    assert (answer.stage.index, answer.stage.total) == (2, 3)
    assert decisions(trace) == [(0, "stop", "threshold")]


def test_stepwise_revises_only_the_last_stage_in_later_rounds() -> None:
    trace = run_task(TASK, Tutor.for_tasks(TASKS, fix_at=2), strategy="stepwise", samples=K, max_rounds=4, patience=3)
    names = [m.stage.name for m in trace if isinstance(m, DraftRequest) and m.sample == 0 and m.stage]
    assert names == ["outline", "draft", "polish", "polish", "polish"]
    assert decisions(trace)[-1] == (2, "stop", "threshold")


def test_patch_revisions_apply_minimal_edits() -> None:
    trace = run_task(
        TASK, Tutor.for_tasks(TASKS, fix_at=1), strategy="adversarial", samples=K, patch=True, max_rounds=3
    )
    round0, round1 = ([m for m in trace if isinstance(m, Draft) and m.round == r] for r in (0, 1))
    assert all(d.edits_applied == 0 for d in round0)
    requests = [m for m in trace if isinstance(m, DraftRequest) and m.round == 1]
    assert {r.mode for r in requests} == {"patch"} and requests[0].revision is not None
    best = requests[0].revision.best_text
    right = worked(TASK.prompt).splitlines()
    for draft in round1:  # the best so far with only its wrong last step and its answer line changed
        assert draft.edits_applied == 1 and draft.edit_errors == []
        assert draft.text.splitlines() == best.splitlines()[:-2] + right[-2:]
        assert best.splitlines()[-1] == f"Answer: {GOLD + 1}"
    assert result(trace).passed


def test_an_edit_that_does_not_apply_is_fed_back() -> None:
    policy = Tutor.for_tasks(TASKS, never=True, bad_edit=True)
    trace = run_task(TASK, policy, strategy="adversarial", samples=K, patch=True, max_rounds=3, patience=5)
    round1 = [m for m in trace if isinstance(m, Draft) and m.round == 1]
    refused = "edit 2 did not apply: its SEARCH text 'Answer: nowhere' is not in the answer; copy the exact text"
    assert all(d.edits_applied == 1 and d.edit_errors == [refused] for d in round1)
    round2 = next(m for m in trace if isinstance(m, DraftRequest) and m.round == 2)
    assert round2.revision is not None
    assert CheckResult(name="edit", passed=False, score=0.0, detail=refused) in round2.revision.failed_checks


def test_the_documented_strategy_example_registers_and_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from redraft.strategies import STRATEGIES

    STRATEGIES.names()  # loaded before copying, so that the copy put back is whole
    monkeypatch.setattr(STRATEGIES, "_entries", dict(STRATEGIES._entries))  # keep the registration local
    page = DOCS / "guides" / "extending.md"
    blocks = page.read_text().split("```python\n")[1:]
    block = next(b for b in blocks if '@strategy("lazy_critic")' in b).split("```")[0]
    exec(compile(block, str(page), "exec"), {})
    assert "lazy_critic" in strategy_names()
    trace = run_task(
        TASK, Tutor.for_tasks(TASKS, never=True), strategy="lazy_critic", samples=K, max_rounds=4, patience=5
    )
    assert [m.draft.round for m in trace if isinstance(m, CritiqueRequest)] == [0, 2]  # the leader, even rounds
    assert decisions(trace)[-1] == (3, "stop", "max_rounds")


def test_prompt_versions_are_part_of_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    from redraft import RunConfig
    from redraft.engine import prompts
    from redraft.rundir import fingerprint
    from tests.support.resolved import identity

    versions = prompts.prompt_versions()
    assert {"critic_adversarial", "critic_skeptic", "revise_patch", "cove_plan", "reflect_system"} <= set(versions)
    assert all(isinstance(v, int) and v >= 1 for v in versions.values())
    config = RunConfig.build()
    before = fingerprint(identity(config))
    left_out = {"tune_system", "tune_user"}  # the tune's proposer's: a run never sends them
    assert identity(config)["prompts"] == {name: v for name, v in versions.items() if name not in left_out}
    entry = prompts.built_in().templates["critic_adversarial"]
    changed = dataclasses.replace(entry, version=entry.version + 1)
    monkeypatch.setitem(prompts.built_in().templates, "critic_adversarial", changed)
    assert fingerprint(identity(config)) != before


def test_a_patch_with_no_edit_that_applies_is_a_failed_revision_not_convergence() -> None:
    trace = run_task(
        TASK,
        Tutor.for_tasks(TASKS, no_edits=True),
        strategy="adversarial",
        samples=K,
        patch=True,
        max_rounds=3,
        patience=5,
    )
    # The candidate comes back unchanged, but the task is not judged stable: the refusal is fed back.
    assert decisions(trace) == [(0, "continue", None), (1, "continue", None), (2, "stop", "max_rounds")]
    round1 = [m for m in trace if isinstance(m, Draft) and m.round == 1]
    refusal = "the reply had no SEARCH/REPLACE edit block; the answer was left unchanged"
    assert all(d.edits_applied == 0 and d.edit_errors == [refusal] for d in round1)
    round2 = next(m for m in trace if isinstance(m, DraftRequest) and m.round == 2)
    assert round2.revision is not None
    assert CheckResult(name="edit", passed=False, score=0.0, detail=refusal) in round2.revision.failed_checks


def test_a_task_cut_by_its_timeout_keeps_the_best_of_its_finished_rounds() -> None:
    # Each call takes 1 s: round 0 (draft, critique) ends at 2 s, round 1's draft would end at 3 s.
    policy = Tutor.for_tasks(TASKS, never=True)
    trace = run_task(TASK, policy, strategy="adversarial", samples=1, delay_s=1.0, timeout_s=2.5, max_rounds=5)
    assert decisions(trace) == [(0, "continue", None), (1, "stop", "budget")]
    final = result(trace)
    assert (final.stop_reason, final.rounds, final.answer) == ("budget", 1, str(GOLD + 1))  # round 0's leader
    assert final.usage.calls == 2  # the cut call never answered, so it is not counted
    assert [m for m in trace if isinstance(m, Decision)][-1].detail == "task timeout after 2.5 s"


def test_a_changed_system_prompt_enters_the_fingerprint(tmp_path: Path) -> None:
    from redraft import RunConfig
    from redraft.rundir import fingerprint
    from tests.support.resolved import identity

    plain = RunConfig.build()
    assert identity(plain)["prompts"]["draft_system"] == 1 and identity(plain)["prompt_overrides"] == {}
    changed = tmp_path / "system.toml"
    changed.write_text('[draft_system]\nversion = 2\ntext = """$instructions\nBe brief."""\n', encoding="utf-8")
    ruled = RunConfig.build(prompts=str(changed))
    assert identity(ruled)["prompts"]["draft_system"] == 2 and "draft_system" in identity(ruled)["prompt_overrides"]
    assert fingerprint(identity(ruled)) != fingerprint(identity(plain))


def test_a_strategy_registered_without_the_contract_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from redraft.errors import UserError
    from redraft.strategies import STRATEGIES, get_strategy, strategy

    STRATEGIES.names()
    monkeypatch.setattr(STRATEGIES, "_entries", dict(STRATEGIES._entries))

    @strategy("duck_typed")
    class DuckTyped:  # run_round and the flags, but not a Strategy: nothing checks what it declares
        revises = False

        async def run_round(self, ctx: object) -> None: ...

    with pytest.raises(UserError, match=r"strategy 'duck_typed' made a DuckTyped, not a redraft\.strategies\.Strategy"):
        get_strategy("duck_typed")
