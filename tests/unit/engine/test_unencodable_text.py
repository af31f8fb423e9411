"""Text no frame can carry (lone surrogates) never ends a task nor takes it out of the graded rate.

Each place text enters is fed it, in every scenario: a model's reply (raw, through the scripted backend and a
real backend over HTTP on 127.0.0.1), what a scenario parses out of an answer (JSON and Python escapes), a
candidate's exception message from the real sandbox subprocess, a user's check and grade (their details and
what they raise). Every task must keep its grade, every frame of its trace must encode, and a grade that
cannot be made is a graded failure, counted by why. The runs on Ray are tests/integration/test_unencodable_on_ray.py.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import pytest

from redraft import RunConfig, Task, refine
from redraft.backends.base import ChatRequest, PlainReplies
from redraft.backends.scripted import ScriptedBackend, ScriptedSpec
from redraft.engine.grader import Grader, failed_grade, graded
from redraft.engine.prompts import fenced
from redraft.errors import CheckError, describe
from redraft.plaintext import REPLACEMENT, plain_text
from redraft.protocols.messages import (
    CandidateText,
    ChatMessage,
    CheckResult,
    Critique,
    Draft,
    Grade,
    GradeRequest,
    Message,
    Result,
    Usage,
    Verification,
    encode,
)
from redraft.rundir.summary import summarize
from redraft.scenarios import get_scenario
from redraft.views.summary_table import summary_rows
from tests.support import unencodable
from tests.support.replies import worked

SCENARIOS = [
    "arithmetic",
    "humaneval",
    "json_extract",
    "sql",
    "pipeline",
    "constrained_writing",
    "incident",
    "cited_answer",
]


def reasoning_gym_installed() -> bool:
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        return False
    return True


if reasoning_gym_installed():
    SCENARIOS.append("reasoning_gym:basic_arithmetic")


def encodes_whole(trace: list[Message]) -> None:
    """Every frame of ``trace`` is one a run directory can hold."""
    for message in trace:
        encode(message)


def first_task(scenario: str) -> Task:
    return next(iter(get_scenario(scenario).tasks(seed=0)))


def config_for(scenario: str, rounds: int = 2) -> RunConfig:
    return RunConfig.build(scenario=scenario, strategy="adversarial", samples=1, max_rounds=rounds, max_tokens=2048)


# ---------------------------------------------------------------- the one rule


def test_plain_text_replaces_each_lone_surrogate_and_keeps_everything_else() -> None:
    assert plain_text("a\ud800b\udfffc") == f"a{REPLACEMENT}b{REPLACEMENT}c"
    assert plain_text("\ud83d\ude00") == REPLACEMENT * 2  # a pair split in a str is two lone halves to UTF-8
    text = "caf\u00e9 \U0001f600 \\ud800"  # real characters, and an escape that is only six characters
    assert plain_text(text) is text


# ---------------------------------------------------------------- every scenario, every way text enters


@pytest.mark.timeout(300)
@pytest.mark.parametrize("raw", [True, False], ids=["raw-reply", "escaped-in-answer"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_reply_carrying_unencodable_text_keeps_its_task_graded(scenario: str, raw: bool) -> None:
    """Raw: the model's reply holds lone surrogates (the backend entry). Escaped: only the scenario's own parsing,
    sandbox or database makes them (a JSON value or key, an exception a candidate's function raises)."""
    task = first_task(scenario)
    reply = functools.partial(unencodable.reply_for, scenario.split(":")[0], raw=raw)
    spec = ScriptedSpec(script=reply, spec="scripted:unencodable")
    done = refine(task, config_for(scenario), backends={"drafter": spec, "critic": spec})
    result = done.result
    assert result.error is None, result.error
    paid = sum(m.usage.calls for m in done.trace if isinstance(m, Draft | Critique))
    assert paid >= 1 and result.usage.calls == paid  # every call it made, counted
    gradable = bool(task.gold) or get_scenario(scenario).feedback_is_grade  # cited_answer: a judge's only
    assert (result.graded_pass is not None) == gradable
    assert result.graded_pass in (False, None) and result.grade_error is None  # a wrong answer, graded as such
    encodes_whole(done.trace)


@pytest.mark.timeout(300)
def test_a_right_answer_with_a_lone_surrogate_in_its_reply_still_passes() -> None:
    spec = ScriptedSpec(script=unencodable.right_arithmetic, spec="scripted:unencodable")
    done = refine(first_task("arithmetic"), config_for("arithmetic"), backends={"drafter": spec, "critic": spec})
    assert done.result.error is None and done.result.graded_pass is True and done.result.passed
    assert REPLACEMENT in done.result.text  # the character is replaced, the answer kept
    encodes_whole(done.trace)


@pytest.mark.timeout(300)
def test_humaneval_grades_a_candidate_whose_exception_message_is_unencodable_as_failed() -> None:
    """The measured break: a function raising ``ValueError("\\ud800")`` in the real sandbox subprocess made its grade
    unencodable. Now its grade is made (a failure, the message plain), and a right answer beside it passes."""
    spec = ScriptedSpec(script=unencodable.humaneval_half_raising, spec="scripted:unencodable")
    tasks = list(get_scenario("humaneval").tasks(seed=0))[:2]  # HumanEval/0 right, HumanEval/1 raising
    outcomes = [refine(t, config_for("humaneval", rounds=1), backends={"drafter": spec, "critic": spec}) for t in tasks]
    assert [o.result.graded_pass for o in outcomes] == [True, False]
    assert all(o.result.error is None and o.result.grade_error is None for o in outcomes)
    for outcome in outcomes:
        encodes_whole(outcome.trace)
    grade = next(m for m in outcomes[1].trace if isinstance(m, Grade))
    assert grade.error is None and REPLACEMENT in grade.grades[0].detail and "ValueError" in grade.grades[0].detail
    checks = next(m for m in outcomes[1].trace if isinstance(m, Verification)).checks
    assert checks and all(REPLACEMENT in c.detail for c in checks if not c.passed)  # the feedback's words too


def test_the_grader_s_reply_for_a_raising_humaneval_candidate_encodes() -> None:
    task = first_task("humaneval")
    text = f"```python\ndef has_close_elements(numbers, threshold):\n    {unencodable.RAISES}\n```"
    request = GradeRequest(task=task, candidates=[CandidateText(round=0, sample=0, text=text)])
    grade = Grader("humaneval").grade_here(request)
    encode(grade)
    assert grade.error is None and [g.passed for g in grade.grades] == [False]


# ---------------------------------------------------------------- a real backend over HTTP on 127.0.0.1


def _right_over_http(body: dict[str, Any]) -> str:
    if "response_format" in body:  # a critique
        return unencodable.critique(ChatRequest(messages=[ChatMessage(role="user", content="")]))
    return f"{worked(fenced(body['messages'][-1]['content'])[0])}\n{unencodable.RAW}"


@pytest.mark.timeout(300)
def test_a_reply_over_http_with_lone_surrogates_keeps_its_task_graded_and_paid(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.fake_llm_servers import FakeLLMServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
    with FakeLLMServer() as server:
        server.reply_for = _right_over_http  # the server sends each lone surrogate as its JSON escape
        model = f"openai-compatible:fake-model-1@{server.openai_base_url}"
        config = config_for("arithmetic").replace(drafter=model, critic=model, cache=False)
        done = refine(first_task("arithmetic"), config)
    result = done.result
    assert result.error is None and result.graded_pass is True
    assert result.usage.calls == 1 and result.usage.input_tokens == server.input_tokens  # the call it paid for
    encodes_whole(done.trace)


# ---------------------------------------------------------------- a user's check and grade


def _check_with_unencodable_words(text: str, data: Any) -> tuple[float, str]:
    return (1.0 if "7" in text else 0.0), f"saw {unencodable.RAW} in it"


def _grade_that_raises(text: str, data: Any) -> tuple[float, str]:
    raise ValueError(f"cannot grade {unencodable.RAW}")


def _grade_with_unencodable_words(text: str, data: Any) -> tuple[float, str]:
    return 0.0, f"wrong {unencodable.RAW}"


TASK = Task(task_id="t", scenario="", prompt="What is 3 + 4?", reference={"answer": "7"}, gold={"answer": "7"})


def _refined(**functions: Any) -> Any:
    spec = ScriptedSpec(script=["Answer: 7", "Answer: 7"], spec="scripted:seven")
    config = RunConfig.build(samples=1, max_rounds=1, strategy="none")
    return refine(TASK, config, backends={"drafter": spec, "critic": spec}, **functions)


def test_a_user_check_s_unencodable_words_are_made_plain() -> None:
    done = _refined(check=_check_with_unencodable_words, grade=_grade_with_unencodable_words)
    assert done.result.error is None and done.result.passed and done.result.graded_pass is False
    encodes_whole(done.trace)
    details = [c.detail for m in done.trace if isinstance(m, Verification) for c in m.checks]
    assert details and all(REPLACEMENT in d for d in details)


def test_a_grade_that_raises_is_a_graded_failure_with_its_cause_counted() -> None:
    done = _refined(check=_check_with_unencodable_words, grade=_grade_that_raises)
    result = done.result
    assert result.error is None and result.passed  # the loop's result stands
    assert (result.grade, result.graded_pass, result.initial_graded_pass) == (0.0, False, False)
    assert result.grade_error == "ValueError"  # what the user's grade raised
    encodes_whole(done.trace)
    grade = next(m for m in done.trace if isinstance(m, Grade))
    assert grade.error is not None and REPLACEMENT in grade.error and grade.grades[0].passed is False


def test_a_grade_no_frame_can_carry_is_a_graded_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last guard, for words that got past the entry points: a grade that cannot be encoded fails its task."""
    monkeypatch.setattr(CheckResult, "plain", lambda self: self)  # as if the grader's entry were not plain
    done = _refined(check=_check_with_unencodable_words, grade=_grade_with_unencodable_words)
    assert done.result.graded_pass is False and done.result.grade_error == "ProtocolError"
    grade = next(m for m in done.trace if isinstance(m, Grade))
    encode(grade)


def test_an_exception_s_unencodable_message_is_recorded_plain() -> None:
    assert describe(ValueError("bad \ud800")) == f"ValueError: bad {REPLACEMENT}"
    try:
        raise KeyError("\udfff")
    except KeyError as exc:
        error = CheckError.of("the check", exc)
    for text in (str(error), error.trace, error.where):
        text.encode("utf-8")  # each can be a record's field


# ---------------------------------------------------------------- backends: every client a role holds


async def test_every_role_s_client_makes_replies_plain() -> None:
    from redraft.backends.cache import cached

    client = cached(ScriptedBackend([f"Answer {unencodable.RAW}"]), "scripted", enabled=True)
    assert isinstance(client, PlainReplies)
    completion = await client.complete(ChatRequest(messages=[ChatMessage(role="user", content="q")]))
    assert completion.text == f"Answer {REPLACEMENT}" and completion.usage.calls == 1


# ---------------------------------------------------------------- the denominator, in the tables


def _result(task_id: str, **fields: Any) -> Result:
    base = Result(
        task_id=task_id,
        scenario="humaneval",
        answer="x",
        text="x",
        score=0.0,
        passed=False,
        initial_score=0.0,
        initial_passed=False,
        rounds=1,
        stop_reason="max_rounds",
        usage=Usage(calls=1),
        wall_s=0.0,
        best_round=0,
        best_sample=0,
        initial_sample=0,
    )
    return msgspec.structs.replace(base, **fields)


def test_four_right_and_four_whose_grade_could_not_be_made_are_50_percent_of_8() -> None:
    results = [
        _result(f"r{i}", grade=1.0, graded_pass=True, initial_grade=1.0, initial_graded_pass=True) for i in range(4)
    ]
    for i in range(4):
        result = _result(f"w{i}")
        request = GradeRequest(
            task=Task(task_id=f"w{i}", scenario="humaneval", prompt="p"),
            candidates=[CandidateText(round=0, sample=0, text="x")],
        )
        _, written = graded(result, failed_grade(request, "ProtocolError: cannot encode", "ProtocolError"))
        results.append(written)
    summary = summarize(results, wall_s=1.0)
    assert (summary.graded, summary.graded_passed, summary.graded_pass_rate) == (8, 4, 0.5)
    assert summary.grade_errors == {"ProtocolError": 4}
    rows = dict(summary_rows(summary, breakdowns=True))
    assert rows["graded pass rate, refined"] == "50.0% (4/8)"
    assert rows["grade not made (graded as fail)"].startswith("ProtocolError 4")


def test_a_judge_grade_that_failed_with_no_grades_still_fails_the_task() -> None:
    _, written = graded(
        _result("j"), Grade(task_id="j", error="the judge answered no valid grade", error_type="ModelError")
    )
    assert (written.graded_pass, written.initial_graded_pass, written.grade_error) == (False, False, "ModelError")


# ---------------------------------------------------------------- an errored task keeps what it paid


def test_a_task_that_ends_on_an_empty_reply_keeps_the_call_it_paid_for() -> None:
    spec = ScriptedSpec(script=["", ""], spec="scripted:empty")
    config = RunConfig.build(samples=1, max_rounds=2, strategy="none")
    done = refine(TASK, config, check=_check_with_unencodable_words, backends={"drafter": spec, "critic": spec})
    result = done.result
    assert result.stop_reason == "error" and result.error_type == "ModelError"
    assert "returned an empty draft" in (result.error or "")
    assert result.usage.calls == 1 and result.usage.input_tokens > 0  # billed, so recorded
    assert result.usage_by_role["drafter"].calls == 1
    encodes_whole(done.trace)


def test_an_empty_sample_beside_a_good_one_is_dropped_and_still_counted() -> None:
    spec = ScriptedSpec(script=lambda request: "Answer: 7" if request.seed % 2 else "", spec="scripted:half")
    config = RunConfig.build(samples=4, max_rounds=1, strategy="best_of_n")
    done = refine(TASK, config, check=_check_with_unencodable_words, backends={"drafter": spec, "critic": spec})
    drafts = [m for m in done.trace if isinstance(m, Draft)]
    assert done.result.error is None and done.result.passed
    assert done.result.usage.calls == 4 and len(drafts) < 4  # every sample paid; the empty ones dropped


def test_a_compare_arm_counts_grades_that_could_not_be_made_in_its_rate_and_by_cause() -> None:
    from redraft.comparison._analysis import arm_summary
    from redraft.comparison._lane_figures import Behaviour, TaskFigures
    from redraft.comparison._result import _grade_error_notes

    def figures(task_id: str, passed: bool, grade_error: str | None = None) -> TaskFigures:
        return TaskFigures(task_id, passed, passed, passed, 1, 10, 0.0, 1.0, grade_error=grade_error)

    lane = [figures(f"r{i}", True) for i in range(4)] + [figures(f"w{i}", False, "ProtocolError") for i in range(4)]
    arm = arm_summary("none", [lane], Behaviour(), oracle=False)
    assert (arm.tasks, arm.ungraded, arm.pass_rate, arm.grade_errors) == (8, 0, 0.5, {"ProtocolError": 4})
    assert _grade_error_notes([arm]) == [
        "none: 4 task(s) graded as failed because their grade could not be made (ProtocolError 4)"
    ]
    encoded = msgspec.json.decode(msgspec.json.encode(arm))  # as comparison.json holds it
    assert encoded["grade_errors"] == {"ProtocolError": 4}
