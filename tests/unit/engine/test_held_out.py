"""The loop never sees the gold: feedback steers, a held-out grade scores, and only oracle mode mixes them."""

from __future__ import annotations

import asyncio
import json
import re
from itertools import islice
from typing import Any

import msgpack
import pytest

from redraft import RunConfig, refine
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles, refine_trace
from redraft.engine.arbiter import Arbiter
from redraft.engine.grader import Grader
from redraft.engine.pools import Member, Outcome, Request, Roles
from redraft.engine.resolution import Cast, arbiter_settings, resolve_run
from redraft.protocols.messages import Decision, Grade, Result, Task, Verification, decode, encode
from redraft.scenarios import get_scenario
from redraft.scenarios.builtin.arithmetic import Arithmetic, check_steps
from redraft.strategies import get_strategy
from tests.support.replies import request_kind, worked

# ---------------------------------------------------------------- arithmetic's calculator

PROBLEM = (
    "Mia has 7 apples. Then Mia gets 5 more apples. Then Mia gives away 3 apples. How many apples does Mia have now?"
)


def verdicts(text: str) -> dict[str, bool]:
    return {c.name: c.passed for c in check_steps(PROBLEM, text)}


def test_a_right_chain_passes_every_check() -> None:
    assert verdicts("First 7 + 5 = 12.\n12 - 3 = 9\nAnswer: 9") == {
        "answer_line": True,
        "steps": True,
        "grounded": True,
        "answer_follows": True,
    }
    assert all(verdicts("7 + 5 - 3 = 9\n**Answer:** 9 apples").values())  # a chain in one equation
    assert all(verdicts("7 + 5 = 12 = 12\n12 − 3 = 9\nAnswer: 9").values())  # a repeated side, a Unicode minus


def test_a_wrong_step_is_named_without_its_right_value() -> None:
    checks = {c.name: c for c in check_steps(PROBLEM, "7 + 5 = 13\n13 - 3 = 10\nAnswer: 10")}
    assert not checks["steps"].passed and checks["steps"].detail == "'7 + 5 = 13' is wrong; recompute it"
    assert "12" not in checks["steps"].detail  # the calculator names the step, the model recomputes it
    assert checks["grounded"].passed and checks["answer_follows"].passed  # 13 is an earlier result: used fairly


def test_no_steps_invented_numbers_and_an_answer_that_does_not_follow_each_fail() -> None:
    assert verdicts("Answer: 9") == {"answer_line": True, "steps": False, "grounded": False, "answer_follows": False}
    assert next(c for c in check_steps(PROBLEM, "Answer: 9") if c.name == "steps").detail.startswith(
        "no step written as an equation"
    )
    invented = {c.name: c for c in check_steps(PROBLEM, "7 + 4 = 11\n11 - 3 = 8\nAnswer: 8")}
    assert not invented["grounded"].passed and "use 4," in invented["grounded"].detail
    assert verdicts("7 + 5 = 12\n12 - 3 = 9\nAnswer: 10")["answer_follows"] is False
    assert verdicts("7 + 5 = 12\n12 - 3 = 9") == {
        "answer_line": False,
        "steps": True,
        "grounded": True,
        "answer_follows": False,
    }


def test_the_calculator_computes_and_never_executes() -> None:
    assert verdicts("7 × 5 = 35\n35 ÷ 5 = 7\nAnswer: 7")["steps"]  # the right arithmetic of a wrong reading
    assert not verdicts("7 / 0 = 1\nAnswer: 1")["steps"]  # cannot be computed: wrong
    hostile = "__import__('os').system('x') = 1\n9**99999999 = 1\nAnswer: 1"
    assert verdicts(hostile) == {"answer_line": True, "steps": False, "grounded": False, "answer_follows": False}


def misread(prompt: str) -> str:
    """A solution with every step computed right, of a wrong reading: losses taken as gains."""
    return worked(prompt.replace("gives away", "gets"))


TASK_WITH_A_LOSS = next(t for t in Arithmetic().tasks(seed=0) if "gives away" in t.prompt)


def test_the_grade_is_the_gold_integer_and_the_feedback_ignores_it() -> None:
    scenario, task = Arithmetic(), TASK_WITH_A_LOSS
    right, wrong = worked(task.prompt), misread(task.prompt)
    assert scenario.check(task, right) == scenario.check(task.without_gold(), right)
    assert all(c.passed for c in scenario.check(task, wrong))  # every check a user has passes a misreading
    grade, wrong_grade = scenario.grade(task, right), scenario.grade(task, wrong)
    assert grade is not None and grade.passed and scenario.grade(task.without_gold(), right) is None
    assert wrong_grade is not None and not wrong_grade.passed


# ---------------------------------------------------------------- ranking, rollback and stop use feedback only


def test_a_later_draft_that_grades_higher_but_scores_lower_on_feedback_is_not_preferred() -> None:
    task = TASK_WITH_A_LOSS
    gold = task.gold["answer"]
    feedback_favourite = worked(task.prompt, off=1)  # three of four checks pass; its answer is wrong
    grade_favourite = f"The answer is {gold}.\nAnswer: {gold}"  # right, but no step to check: one of four

    def model(request: ChatRequest) -> str:
        if request_kind(request) == "critique":
            return json.dumps({"issues": []})
        return grade_favourite if "Your best answer so far" in request.messages[-1].content else feedback_favourite

    spec = ScriptedSpec(script=model)
    config = RunConfig.build(strategy="adversarial", samples=1, max_rounds=2, patience=5)
    result, trace = _refine(task, config, spec)
    decisions = [m for m in trace if isinstance(m, Decision)]
    assert [(d.round, d.round_best_score, d.rolled_back) for d in decisions] == [(0, 0.75, False), (1, 0.25, True)]
    assert result.text == feedback_favourite and result.score == 0.75  # the arbiter kept round 0's
    assert (result.graded_pass, result.grade, result.best_round) == (False, 0.0, 0)
    [grade] = [m for m in trace if isinstance(m, Grade)]
    assert {(g.round, g.passed) for g in grade.grades} == {(0, False), (1, True)}  # graded, and still not used

    oracle, oracle_trace = _refine(task, config.replace(oracle_feedback=True), spec)
    assert (oracle.text, oracle.graded_pass, oracle.best_round) == (grade_favourite, True, 1)
    assert all(v.oracle for v in oracle_trace if isinstance(v, Verification))


def test_the_threshold_stop_is_on_feedback_not_on_the_grade() -> None:
    wrong = misread(TASK_WITH_A_LOSS.prompt)
    spec = ScriptedSpec(script=lambda request: json.dumps({"issues": []}) if request.json_schema else wrong)
    result, _ = _refine(TASK_WITH_A_LOSS, RunConfig.build(samples=1, max_rounds=3), spec)
    assert (result.stop_reason, result.rounds, result.passed, result.graded_pass) == ("threshold", 1, True, False)


def _refine(task: Task, config: RunConfig, spec: ScriptedSpec) -> tuple[Result, list[Any]]:
    refinement = refine(task, config, backends={"drafter": spec, "critic": spec})
    return refinement.result, refinement.trace


# ---------------------------------------------------------------- no gold in any frame a role receives


def any_reply(request: ChatRequest) -> str:
    """A wrong but well-formed answer for any scenario's request, so the loop revises."""
    kind = request_kind(request)
    if kind == "critique":
        return json.dumps({"issues": [{"severity": "major", "quote": "x", "reason": "looks off", "fix": "redo"}]})
    if kind == "questions":
        return json.dumps({"questions": ["Is every step right?"]})
    if kind in ("answer", "reflect"):
        return "I cannot tell."
    return "```python\ndef f():\n    return 1\n```\n```sql\nSELECT 1\n```\n1 + 1 = 2\n<answer>zz</answer>\nAnswer: 2"


class Recording:
    """A role member that records every request it receives, as the frame a role actor would receive."""

    def __init__(self, inner: Member, received: list[bytes]) -> None:
        self._inner, self._received = inner, received

    async def serve_many(self, requests: list[Request]) -> list[Outcome]:
        self._received.extend(encode(r) for r in requests)
        return await self._inner.serve_many(requests)

    async def answers(self, within_s: float) -> bool:
        return True


def gold_markers(task: Task) -> list[str]:
    """Texts that would only reach a role if the gold did: the held-out values, as text."""
    markers = [json.dumps(task.gold, sort_keys=True)]
    for value in task.gold.values():
        if isinstance(value, str) and len(value) > 12:  # a query, a hidden test's source
            markers += [line.strip() for line in value.splitlines() if len(line.strip()) > 12]
    return markers


def run_recorded(task: Task, strategy: str, oracle: bool) -> tuple[list[bytes], list[str]]:
    prompts: list[str] = []

    def model(request: ChatRequest) -> str:
        prompts.extend(m.content for m in request.messages)
        return any_reply(request)

    spec = ScriptedSpec(script=model)
    config = RunConfig.build(scenario=task.scenario, strategy=strategy, samples=2, max_rounds=2, oracle_feedback=oracle)
    setup = resolve_run(config, backends={"drafter": spec, "critic": spec, "verifier": spec}).setup
    received: list[bytes] = []
    roles = local_roles(Cast.of(setup, get_strategy(strategy)))
    recorded = Roles.of(
        {pool.role: [Recording(m, received) for m in pool.members if m is not None] for pool in roles.pools()}
    )
    arbiter = Arbiter(recorded, arbiter_settings(config))
    trace = asyncio.run(refine_trace(arbiter, Grader(setup.scenario), task, oracle=oracle))
    assert isinstance(trace[-1], Result)
    return received, prompts


SCENARIOS = ["arithmetic", "humaneval", "json_extract", "sql", "incident", "reasoning_gym:leg_counting"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("strategy", ["adversarial", "cove"])
def test_no_frame_a_role_receives_and_no_prompt_holds_the_gold_unless_oracle(name: str, strategy: str) -> None:
    task = next(islice(get_scenario(name).tasks(seed=0), 3, None))
    assert task.gold, "every built-in scenario but constrained_writing holds something back"
    for oracle in (False, True):
        received, prompts = run_recorded(task, strategy, oracle)
        tasks_seen = [t for t in _tasks_in(received)]
        assert tasks_seen, "the roles received the task"
        frames_text = "\n".join(json.dumps(msgpack.unpackb(p), default=str, sort_keys=True) for p in received)
        markers = gold_markers(task)
        if oracle:  # the verifier gets the whole task, gold included: an upper bound, named as such
            assert any(t.gold == task.gold for t in tasks_seen)
        else:
            assert all(t.gold == {} for t in tasks_seen)
            assert not [m for m in markers if m in frames_text], name
            assert not [m for m in markers for prompt in prompts if m in prompt], name
        if name == "arithmetic" and not oracle:
            gold = re.compile(rf"(?<![\d.]){task.gold['answer']}(?![\d.])")
            numbers = set(re.findall(r"\d+", task.prompt))
            if str(task.gold["answer"]) not in numbers:  # the gold integer is in no model's prompt
                assert not [p for p in prompts if gold.search(p) and "Answer: 2" not in p]


def _tasks_in(received: list[bytes]) -> list[Task]:
    found = []
    for payload in received:
        message = decode(payload)
        task = getattr(message, "task", None)
        if isinstance(task, Task):
            found.append(task)
    return found


def test_humaneval_feedback_is_the_prompt_s_examples_and_its_grade_the_hidden_tests() -> None:
    scenario = get_scenario("humaneval")
    task = next(t for t in scenario.tasks(seed=0) if t.task_id == "HumanEval/53")
    fits_the_examples = "```python\ndef add(x, y):\n    return x + y if x < 10 else 0\n```"
    checks = scenario.check(task.without_gold(), fits_the_examples)
    assert [(c.name, c.passed) for c in checks] == [("example_1", True), ("example_2", True)]
    grade = scenario.grade(task, fits_the_examples)  # the hidden tests try x up to 1000
    assert grade is not None and not grade.passed and grade.detail.startswith("AssertionError")
    assert scenario.grade(task.without_gold(), fits_the_examples) is None


def test_constrained_writing_feedback_is_its_grade_and_holds_nothing_back() -> None:
    scenario = get_scenario("constrained_writing")
    task = next(iter(scenario.tasks(seed=0)))
    assert task.gold == {} and scenario.feedback_is_grade
    text = "- a\n- b"
    grade = scenario.grade(task, text)
    checks = scenario.check(task, text)
    assert grade is not None and grade.passed == all(c.passed for c in checks)


def test_a_user_check_without_a_grade_leaves_the_grade_null_and_with_one_grades_held_out(tmp_path: Any) -> None:
    check = "tests.support.check_modules:exact_answer"
    spec = ScriptedSpec(script=lambda request: "Answer: Paris")
    task = Task(task_id="fr", scenario=f"check:{check}", prompt="Capital of France?", reference={"answer": "Paris"})
    result = refine(task, RunConfig.build(samples=1, max_rounds=1), backends={"drafter": spec, "critic": spec}).result
    assert result.passed and (result.grade, result.graded_pass) == (None, None)  # unknown, never 0
    graded_name = f"check:tests.support.check_modules:share_of_keywords,grade:{check}"
    graded_task = Task(task_id="fr", scenario=graded_name, prompt="Capital of France?", gold={"answer": "Paris"})
    graded = refine(graded_task, RunConfig.build(samples=1, max_rounds=1), backends={"drafter": spec, "critic": spec})
    # The check got no reference: it raised on the missing keywords, which ends the task with the check's
    # error (no grade: nothing was judged); the grade never reached the check.
    assert graded.result.error_type == "CheckError" and graded.result.error_raised == "KeyError"
    assert not [m for m in graded.trace if isinstance(m, Verification)]


def test_a_check_that_raises_ends_the_task_and_never_reaches_the_drafter_as_feedback() -> None:
    """Before, the exception's text was the failed check's detail, revised against for every round."""
    check = "tests.support.check_modules:by_reference"
    prompts: list[str] = []

    def model(request: ChatRequest) -> str:
        prompts.extend(m.content for m in request.messages)
        return "Answer: 7"

    spec = ScriptedSpec(script=model)
    task = Task(task_id="t", scenario=f"check:{check}", prompt="What is 3 + 4?", reference={})  # no "answer": raises
    config = RunConfig.build(samples=2, max_rounds=3)
    refinement = refine(task, config, backends={"drafter": spec, "critic": spec})
    result = refinement.result
    assert (result.stop_reason, result.error_type, result.error_raised) == ("error", "CheckError", "KeyError")
    assert result.error_where is not None and result.error_where.endswith(" in exact_answer")
    assert result.traceback is not None and "raise" not in prompts and "KeyError" not in " ".join(prompts)
    assert len(prompts) == 2 * 2  # round 0's two drafts (system + user each), and no revision after
