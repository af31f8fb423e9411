"""The judge as a run's grader: a task's grade is its rubric score, the judge's calls are the ``judge``'s usage,
a misbehaving judge costs only the grade, and nothing the judge writes reaches a role of the loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from redraft import RunConfig, refine
from redraft.backends import ChatRequest, ScriptedSpec, resolve
from redraft.engine._refine import local_roles, refine_trace
from redraft.engine.arbiter import Arbiter
from redraft.engine.grader import Grader, grade_request
from redraft.engine.pools import Member, Outcome, Request, Roles
from redraft.engine.prompts import fenced
from redraft.engine.resolution import resolve_run, with_check
from redraft.errors import UserError
from redraft.judging.grading import JudgeGrader
from redraft.judging.rubric import rubric_of
from redraft.protocols.messages import (
    CandidateText,
    Draft,
    Grade,
    GradeRequest,
    Result,
    Task,
    Usage,
    Verification,
    encode,
)
from tests.support import judges
from tests.support.fake_llm_servers import FakeLLMServer

TASK = Task(task_id="q1", scenario="check", prompt="What is 6 times 7?")
MARKER = "JUDGES-OWN-REASON-7f3a"
"""A reason only the judge writes: it must never reach a role of the loop."""


def says_42(text: str, data: Any) -> bool:
    return "42" in text


def judging(request: ChatRequest) -> str:
    """A judge that passes an answer holding CORRECT, with a reason no role of the loop may ever read."""
    criteria = judges._criteria(request)
    level = "good" if "CORRECT" in fenced(request.messages[-1].content)[2] else "bad"
    return json.dumps({"criteria": [{"criterion": c, "level": level, "reason": MARKER} for c in criteria]})


@pytest.fixture
def rubric(tmp_path: Path) -> str:
    path = tmp_path / "test.json"
    path.write_text(json.dumps(judges.RUBRIC))
    return str(path)


def refined(rubric: str, draft: str, judge: ScriptedSpec, **settings: Any) -> Result:
    drafter = ScriptedSpec(script=lambda request: draft, spec="scripted:drafter")
    config = RunConfig.build(samples=1, max_rounds=1, rubric=rubric, **settings)
    done = refine(TASK, config, check=says_42, backends={"drafter": drafter, "critic": drafter, "judge": judge})
    return done.result


def test_the_grade_is_the_judge_s_rubric_score_and_its_calls_are_the_judge_s(rubric: str) -> None:
    judge = ScriptedSpec(script=judging, spec="scripted:judge", model="gpt-4o-mini")  # priced as gpt-4o-mini
    good = refined(rubric, "6 times 7 is 42. CORRECT", judge)
    assert (good.grade, good.graded_pass) == (1.0, True)
    assert good.usage_by_role["judge"].calls == 1 and good.usage_by_role["judge"].cost_usd > 0
    assert good.usage.calls == good.usage_by_role["drafter"].calls + 1  # the task's usage holds the judge's
    wrong = refined(rubric, "6 times 7 is 42.", judge)
    assert (wrong.grade, wrong.graded_pass) == (0.0, False)
    assert wrong.passed  # the loop's feedback passed it: the grade is the judge's, not the feedback's


def test_repeated_judgments_are_kept_and_the_grade_is_their_mean(rubric: str) -> None:
    def split(request: ChatRequest) -> str:  # passes it on even seeds only
        level = "good" if request.seed % 2 == 0 else "bad"
        return json.dumps(
            {"criteria": [{"criterion": c, "level": level, "reason": "r"} for c in judges._criteria(request)]}
        )

    judge = ScriptedSpec(script=split, spec="scripted:judge")
    result = refined(rubric, "42", judge, judge_repeats=3)
    assert result.grade == pytest.approx(2 / 3) and result.graded_pass is False  # below the threshold of 0.7
    assert result.usage_by_role["judge"].calls == 3


def test_the_judge_grades_the_final_answer_and_round_0_s_leader_only() -> None:
    loop = [
        message
        for r in (0, 1)
        for s in (0, 1)
        for message in (
            Draft(task_id="q1", round=r, sample=s, text=f"text {r}/{s}"),
            Verification(task_id="q1", round=r, sample=s, score=0.0, passed=False),
        )
    ]
    result = Result(
        task_id="q1",
        scenario="check",
        answer=None,
        text="text 1/0",
        score=0.0,
        passed=False,
        initial_score=0.0,
        initial_passed=False,
        rounds=2,
        stop_reason="max_rounds",
        usage=Usage(),
        wall_s=0.0,
        best_round=1,
        best_sample=0,
        initial_sample=1,
    )
    request = grade_request(Grader("arithmetic").scenario, TASK, [TASK, *loop, result], judged=True)
    assert request is not None and sorted((c.round, c.sample) for c in request.candidates) == [(0, 1), (1, 0)]
    assert grade_request(Grader("arithmetic").scenario, TASK, [TASK, *loop, result]) is None  # no gold, no judge


# ---------------------------------------------------------------- a judge that misbehaves costs only the grade


def broken_grader(script: Any, **kwargs: Any) -> JudgeGrader:
    return JudgeGrader(ScriptedSpec(script=script, spec="scripted:judge", **kwargs), rubric_of(judges.RUBRIC))


REQUEST = GradeRequest(task=TASK, candidates=[CandidateText(round=0, sample=0, text="42")])


def test_a_judge_answering_garbage_leaves_the_grade_missing_with_its_reason() -> None:
    grade = asyncio.run(broken_grader(judges.broken).grade(REQUEST))
    assert grade.grades == [] and grade.error is not None
    assert grade.error.startswith("the judge answered no valid grade:") and grade.usage.calls == 1


def test_a_judge_whose_server_answers_500_leaves_the_grade_missing_with_its_reason() -> None:
    with FakeLLMServer() as server:  # the real client over HTTP, its retries spent on a server that is down
        server.fail_status = 500
        grader = JudgeGrader(resolve(f"openai-compatible:m@{server.openai_base_url}"), rubric_of(judges.RUBRIC))
        grade = asyncio.run(grader.grade(REQUEST))
    assert grade.grades == [] and grade.error is not None and grade.error.startswith("the judge failed:")
    assert "500" in grade.error and "\n" not in grade.error


def test_a_judge_that_hangs_leaves_the_grade_missing_at_its_deadline() -> None:
    spec = ScriptedSpec(script=judging, spec="scripted:judge", delay_s=60.0)
    grader = JudgeGrader(spec, rubric_of(judges.RUBRIC), deadline_s=0.05)
    grade = asyncio.run(grader.grade(REQUEST))
    assert grade.grades == [] and grade.error == "the judge did not answer within 0.05 s"


def test_a_task_whose_judge_failed_is_kept_graded_as_failed_with_why(rubric: str) -> None:
    result = refined(rubric, "6 times 7 is 42. CORRECT", ScriptedSpec(script=judges.broken, spec="scripted:judge"))
    assert result.text == "6 times 7 is 42. CORRECT" and result.passed  # the loop's result stands
    assert (result.grade, result.graded_pass) == (0.0, False)  # in the graded rate, never silently out of it
    assert result.grade_error == "ModelError"  # and counted by why


# ---------------------------------------------------------------- settings refused in one line


def test_a_rubric_without_a_judge_is_refused(rubric: str) -> None:
    with pytest.raises(UserError, match="--rubric is the judge's: give --judge MODEL"):
        resolve_run(RunConfig.build(scenario="arithmetic", rubric=rubric))


def test_a_judge_without_a_rubric_on_a_scenario_without_one_is_refused() -> None:
    with pytest.raises(UserError, match="scenario 'arithmetic' has none of its own: give --rubric FILE"):
        resolve_run(RunConfig.build(scenario="arithmetic", judge="scripted:tests.support.judges:faithful"))


def test_a_judge_without_a_rubric_file_grades_by_the_scenario_s_own() -> None:
    faithful = "scripted:tests.support.judges:faithful"
    for name in ("cited_answer", "incident"):
        judge = resolve_run(RunConfig.build(scenario=name, judge=faithful, max_tokens=1024)).setup.judge
        assert judge is not None and judge.rubric == name and judge.prompt_chars > 0


def test_a_rubric_that_is_not_one_is_refused_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("threshold = 3\n")
    with pytest.raises(UserError, match=f"{bad}") as raised:
        resolve_run(
            RunConfig.build(scenario="arithmetic", judge="scripted:tests.support.judges:faithful", rubric=str(bad))
        )
    assert "\n" not in str(raised.value)


def test_a_judge_on_the_drafter_s_model_is_allowed_and_named_self_judged(rubric: str) -> None:
    faithful = "scripted:tests.support.judges:faithful"
    same = resolve_run(RunConfig.build(scenario="arithmetic", model=faithful, judge=faithful, rubric=rubric))
    other = resolve_run(RunConfig.build(scenario="arithmetic", judge=faithful, rubric=rubric))
    assert same.setup.judge is not None and same.setup.judge.self_judged
    assert other.setup.judge is not None and not other.setup.judge.self_judged
    assert (other.setup.judge.rubric, other.setup.judge.spec) == ("test", faithful)


def test_a_judge_and_its_rubric_s_content_enter_the_run_s_identity(rubric: str) -> None:
    faithful = "scripted:tests.support.judges:faithful"
    judged = resolve_run(RunConfig.build(scenario="arithmetic", judge=faithful, rubric=rubric))
    assert judged.identity["judge"] == faithful and "sha256" in judged.identity["rubric"]
    again = RunConfig.build(scenario="arithmetic", judge=faithful, rubric=rubric, judge_repeats=2)
    assert resolve_run(again).fingerprint != judged.fingerprint
    Path(rubric).write_text(json.dumps(judges.RUBRIC | {"threshold": 0.9}))  # the same file, another rubric
    assert resolve_run(RunConfig.build(scenario="arithmetic", judge=faithful, rubric=rubric)).fingerprint != (
        judged.fingerprint
    )


# ---------------------------------------------------------------- the held-out rule


class Recording:
    """A role member that keeps every request frame it receives."""

    def __init__(self, inner: Member, received: list[bytes]) -> None:
        self.inner, self.received = inner, received

    async def serve_many(self, requests: list[Request]) -> list[Outcome]:
        self.received.extend(encode(r) for r in requests)
        return await self.inner.serve_many(requests)

    async def answers(self, within_s: float) -> bool:
        return True


def test_nothing_the_judge_writes_reaches_a_role_of_the_loop(rubric: str) -> None:
    prompts: list[str] = []

    def loop_model(request: ChatRequest) -> str:
        prompts.extend(m.content for m in request.messages)
        return "6 times 7 is 41."  # wrong, so the loop revises: every later round could carry what it was told

    spec = ScriptedSpec(script=loop_model, spec="scripted:loop")
    judge = ScriptedSpec(script=judging, spec="scripted:judge")
    config = with_check(RunConfig.build(samples=2, max_rounds=3, rubric=rubric, strategy="adversarial"), says_42)
    task = Task(task_id="q1", scenario=config.experiment.scenario, prompt="What is 6 times 7?")
    run = resolve_run(config, backends={"drafter": spec, "critic": spec, "judge": judge}, task=task)
    received: list[bytes] = []
    roles = local_roles(run.cast)
    recorded = Roles.of({p.role: [Recording(m, received) for m in p.members if m is not None] for p in roles.pools()})
    cls, args, kwargs = run.cast.grader
    trace = asyncio.run(
        refine_trace(Arbiter(recorded, run.settings), Grader(run.setup.scenario), task, judge=cls(*args, **kwargs))
    )
    grade = next(m for m in trace if isinstance(m, Grade))
    assert MARKER in grade.grades[0].detail  # the judge did write it, into the record
    assert isinstance(trace[-1], Result) and trace[-1].rounds > 1  # the loop went on after its first round
    assert trace[-1].usage_by_role["judge"].calls == 1  # one distinct answer judged once, counted with no price table
    frames = "\n".join(json.dumps(msgpack.unpackb(r), default=str) for r in received)
    assert received and MARKER not in frames
    assert prompts and not [p for p in prompts if MARKER in p]


# ---------------------------------------------------------------- the command line and the end table


def test_grade_rubric_file_is_the_judge_s_rubric_and_naming_it_twice_is_refused() -> None:
    from redraft.cli import _judged_grade

    given: dict[str, Any] = {}
    assert _judged_grade("rubric:summary.toml", given) is None and given == {"rubric": "summary.toml"}
    assert _judged_grade("grades:exact", {}) == "grades:exact"  # a user's grade function, as it was
    with pytest.raises(UserError, match="name the judge's rubric twice"):
        _judged_grade("rubric:a.toml", {"rubric": "b.toml"})


def test_the_end_table_names_the_judge_and_says_self_judged() -> None:
    from redraft.rundir.summary import Summary
    from redraft.views.summary_table import graded_by, summary_rows

    other = {"judge": "openai:gpt-4o", "drafter": "local", "rubric": "rubrics/summary.toml", "judge_repeats": 3}
    assert graded_by(other) == "judge openai:gpt-4o by summary, the mean of 3 judgments"
    same = graded_by(other | {"drafter": "openai:gpt-4o", "judge_repeats": 1})
    assert same == "judge openai:gpt-4o by summary; SELF-JUDGED: the judge is the drafter's own model"
    assert graded_by({"judge": None}) is None
    rows = dict(summary_rows(Summary(tasks=2), breakdowns=False, judge=same))
    assert rows["graded by"] == same


# ---------------------------------------------------------------- the judge's own prompts-file entries


def test_a_prompts_file_may_give_the_judge_s_own_entries_and_only_to_a_run_with_a_judge(
    rubric: str, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.toml"
    strictly = "You grade strictly. Reply only with JSON, one entry per criterion."
    prompts.write_text(f'[judge_rubric_system]\nversion = 3\ntext = "{strictly}"\n')
    seen: list[str] = []

    def strict(request: ChatRequest) -> str:
        seen.append(request.messages[0].content)
        return judging(request)

    result = refined(rubric, "42 CORRECT", ScriptedSpec(script=strict, spec="scripted:judge"), prompts=str(prompts))
    assert seen == [strictly] and result.graded_pass
    faithful = "scripted:tests.support.judges:faithful"
    judged = resolve_run(RunConfig.build(scenario="arithmetic", judge=faithful, rubric=rubric, prompts=str(prompts)))
    assert judged.setup.judge is not None and judged.setup.judge.prompts["judge_rubric_system"] == 3
    assert judged.identity["prompts"]["judge_rubric_system"] == 3  # the judge's versions enter the fingerprint
    with pytest.raises(UserError, match="judge_rubric_system"):  # no judge, no judge's entries
        resolve_run(RunConfig.build(scenario="arithmetic", prompts=str(prompts)))


def test_the_estimate_prices_the_judge_s_calls_after_the_loop(rubric: str) -> None:
    from redraft import estimate

    model = ScriptedSpec(script=lambda request: "", model="gpt-4o-mini")
    judge = ScriptedSpec(script=judging, spec="scripted:judge", model="gpt-4o")  # dearer than the loop's model
    config = RunConfig.build(scenario="arithmetic", limit=4, rubric=rubric, judge_repeats=3)
    made = estimate(config, backends={"drafter": model, "critic": model, "judge": judge})
    worst, first = made.worst.by_role["judge"], made.first_pass.by_role["judge"]
    assert first.calls == 4 * 3  # a task that passes its first round has one answer to grade, judged 3 times
    assert 4 * 3 < worst.calls <= 4 * 3 * 2  # failing tasks: the final answer and round 0's leader, when they differ
    assert worst.input_tokens > first.input_tokens and worst.cost_usd > first.cost_usd > 0
    assert made.models["judge"] == "gpt-4o"
    assert [line for line in made.assumptions if line.startswith("judge: 3 call(s) per graded answer")]
