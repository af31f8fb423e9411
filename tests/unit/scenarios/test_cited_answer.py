"""The cited_answer scenario: seeded documents of numbered sentences and a question, the written rules as exact
feedback, and a grade by its rubric alone (a judge's), never by gold the loop could see.

An answer built from the sentences that answer the question keeps every rule; each rule broken in turn fails
its check alone; the rubric is the one the docs describe; a scripted judge grades through it; and neither the
rubric nor a judge's verdict reaches a role of the loop.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from itertools import islice

import msgpack
import pytest

from redraft import RunConfig, refine
from redraft.backends import ChatRequest, ScriptedSpec
from redraft.judging import Judge, scenario_rubric
from redraft.protocols.messages import CheckResult, Task, decode_as, encode
from redraft.scenarios.builtin._citations import NOT_SAID, read_claims
from redraft.scenarios.builtin._cited_documents import KINDS, Case, make_case
from redraft.scenarios.builtin.cited_answer import MAX_WORDS, SIZE, CitedAnswer
from tests.support import judges
from tests.support.doc_pages import blocks
from tests.support.paths import DOCS
from tests.unit.engine.test_held_out import run_recorded

SCENARIO = CitedAnswer()
TASKS = list(SCENARIO.tasks(seed=0))
RULES = ["length", "cited", "ids", "quotes"]


def case_of(task: Task, seed: int = 0) -> Case:
    index = int(task.task_id.removeprefix("cited-"))
    return make_case(f"{seed}:{index}", index % 3 + 1)


def right_answer(case: Case) -> str:
    """An answer that keeps every rule: each supporting sentence said again, cited; or the reply for none."""
    if not case.support:
        return NOT_SAID
    return " ".join(f"{case.sentences[n - 1].removesuffix('.')} [S{n}]." for n in case.support)


def failed(checks: list[CheckResult]) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.passed}


# ---------------------------------------------------------------- tasks


def test_tasks_depend_only_on_the_seed_and_differ_between_seeds() -> None:
    assert len(TASKS) == SIZE and len({t.task_id for t in TASKS}) == SIZE
    assert list(CitedAnswer().tasks(seed=0)) == TASKS
    other = list(islice(SCENARIO.tasks(seed=1), SIZE))
    assert sum(a.prompt != b.prompt for a, b in zip(TASKS, other, strict=True)) > SIZE * 0.9
    assert make_case("7:3", 2) == make_case("7:3", 2) and make_case("7:3", 2) != make_case("7:4", 2)


def test_each_document_is_well_formed_and_its_prompt_shows_every_sentence_after_its_id() -> None:
    for task in TASKS:
        case = case_of(task)
        sentences = task.reference["document"]
        assert sentences == list(case.sentences) and 10 <= len(sentences) <= 13
        assert len(set(sentences)) == len(sentences)
        for n, sentence in enumerate(sentences, start=1):
            assert sentence.endswith(".") and not re.search(r"[\"\[\]\n]", sentence), sentence
            assert f"\n[S{n}] {sentence}\n" in task.prompt
        assert f"Question: {case.question}\n" in task.prompt and case.question.endswith("?")
        assert f"(S1 to S{len(sentences)})" in task.prompt and f"At most {MAX_WORDS} words" in task.prompt


def test_the_question_is_answered_by_one_or_two_sentences_or_by_none() -> None:
    for task in TASKS:
        case = case_of(task)
        assert len(case.support) == {1: 1, 2: 2, 3: 0}[case.difficulty]
        assert case.subject in case.question
        assert all(case.subject in case.sentences[n - 1] for n in case.support), (case.question, case.support)
    assert Counter(case_of(t).kind for t in TASKS).keys() == {kind.name for kind in KINDS}


def test_the_task_holds_no_gold_and_its_feedback_data_is_the_document_and_the_limit() -> None:
    for task in TASKS:
        assert task.gold == {} and set(task.reference) == {"document", "max_words"}
        assert decode_as(encode(task), Task) == task
    assert SCENARIO.split_reference({"document": ["A."], "max_words": 9, "note": "x"}) == (
        {"document": ["A."], "max_words": 9},
        {"note": "x"},
    )


# ---------------------------------------------------------------- the feedback


def test_a_right_cited_answer_keeps_every_rule_and_has_no_program_grade() -> None:
    for task in TASKS:
        text = right_answer(case_of(task))
        checks = SCENARIO.check(task, text)
        assert [c.name for c in checks] == RULES and failed(checks) == {}, (task.task_id, text)
        assert SCENARIO.grade(task, text) is None  # no program can grade it: a judge's rubric does
    assert not SCENARIO.feedback_is_grade


def test_a_quotation_copied_from_the_sentence_it_cites_passes() -> None:
    case = case_of(TASKS[0])
    n = case.support[0]
    quoted = f'The document says "{case.sentences[n - 1]}" [S{n}].'
    assert failed(SCENARIO.check(TASKS[0], quoted)) == {}
    spaced = f'As "{case.sentences[n - 1].replace(" ", "  ")}" puts it [S{n}].'  # runs of spaces are one space
    assert failed(SCENARIO.check(TASKS[0], spaced)) == {}


def test_a_sentence_that_cites_nothing_fails_the_citations_alone() -> None:
    task = TASKS[1]
    text = right_answer(case_of(task)) + " I hope this helps."
    assert list(failed(SCENARIO.check(task, text))) == ["cited"]
    assert failed(SCENARIO.check(task, text))["cited"].startswith("1 sentence(s) cite nothing, e.g. 'I hope this")
    assert list(failed(SCENARIO.check(task, ""))) == ["cited"]
    stray = failed(SCENARIO.check(task, "It opened in 1884 [3]."))
    assert list(stray) == ["cited"] and stray["cited"].startswith("1 sentence(s) cite nothing")
    assert "[3] is not a citation" in stray["cited"]


def test_a_cited_id_the_document_lacks_fails_the_ids_alone() -> None:
    task = TASKS[1]
    count = len(task.reference["document"])
    text = right_answer(case_of(task)).replace("].", f", S{count + 1}].", 1)
    assert failed(SCENARIO.check(task, text)) == {
        "ids": f"the document has no sentence S{count + 1}; its ids run S1 to S{count}"
    }
    assert "ids" in failed(SCENARIO.check(task, "It is so [S0]."))


def test_a_quotation_not_word_for_word_in_a_cited_sentence_fails_the_quotes_alone() -> None:
    task = TASKS[0]
    case = case_of(task)
    n = case.support[0]
    sentence = case.sentences[n - 1]
    altered = sentence[0].swapcase() + sentence[1:]
    assert failed(SCENARIO.check(task, f'It says "{altered}" [S{n}].')) == {
        "quotes": f"{altered[:60]!r} is not word for word in any sentence of the document"
    }
    other = 1 if n != 1 else 2  # the words are the document's, but the sentence quoting them cites another
    assert failed(SCENARIO.check(task, f'It says "{sentence}" [S{other}].')) == {
        "quotes": f"{sentence[:60]!r} is in S{n}, which its sentence does not cite"
    }


def test_an_answer_over_the_word_limit_fails_the_length_alone() -> None:
    task = TASKS[0]
    case = case_of(task)
    n = case.support[0]
    long = " ".join([f"{case.sentences[n - 1]} [S{n}]"] * 8)
    count = len(case.sentences[n - 1].split()) * 8
    assert count > MAX_WORDS
    assert failed(SCENARIO.check(task, long)) == {
        "length": f"{count} words; the limit is {MAX_WORDS}: cut what the question does not ask"
    }
    own_limit = Task(task_id="t", scenario="cited_answer", prompt="", reference=task.reference | {"max_words": 3})
    assert list(failed(SCENARIO.check(own_limit, right_answer(case)))) == ["length"]


def test_claims_are_read_with_citations_before_or_after_the_full_stop_and_across_list_lines() -> None:
    claims = read_claims('- It opened in 1884 [S2]. It is 3.5 km long. [S3, S4]\n2. "Built of iron." [S5][S6]')
    assert [(c.text, c.cited) for c in claims] == [
        ("It opened in 1884 .", (2,)),
        ("It is 3.5 km long.", (3, 4)),
        ('"Built of iron."', (5, 6)),
    ]
    assert read_claims(f"  {NOT_SAID.lower()}  ")[0].not_said


def test_the_answer_is_what_it_cites_for_agreement_between_samples() -> None:
    assert SCENARIO.answer("A [S3]. B [S1, S3].") == SCENARIO.answer("B [S1]. A [S3].") == "S1 S3"
    assert SCENARIO.answer(NOT_SAID) == "not said" and SCENARIO.answer("no citation") is None


def test_checks_never_raise_stay_in_bounds_and_are_deterministic() -> None:
    rng = random.Random(0)
    alphabet = 'abc S[]1,.!?"“”-*\n 0 9 ' + "\u200b"
    task = TASKS[2]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        checks = SCENARIO.check(task, text)
        assert [c.name for c in checks] == RULES and all(0.0 <= c.score <= 1.0 for c in checks)
        assert checks == SCENARIO.check(task, text)
    assert [c.name for c in SCENARIO.check(Task(task_id="t", scenario="cited_answer", prompt=""), "x [S1].")] == RULES


# ---------------------------------------------------------------- the rubric, a judge's alone


def documented_rubric() -> tuple[float, list[tuple[str, float, list[tuple[str, float]]]]]:
    """The rubric as the scenario's page states it: its threshold, and a row per criterion."""
    page = (DOCS / "scenarios" / "cited_answer.md").read_text()
    threshold = float(re.search(r"passes at a weighted score of (\d+(?:\.\d+)?)", page)[1])  # type: ignore[index]
    rows = []
    for name, weight, levels in re.findall(r"^\| `(\w+)` \| (\d+) \| ([^|]+) \|", page, re.MULTILINE):
        shown = [(level, float(score)) for level, score in re.findall(r"`(\w+)` \(([\d.]+)\)", levels)]
        rows.append((name, float(weight), shown))
    return threshold, rows


def test_the_rubric_is_the_one_the_docs_describe() -> None:
    rubric = scenario_rubric(SCENARIO)
    assert rubric is not None and rubric.name == "cited_answer"
    threshold, rows = documented_rubric()
    assert len(rows) == 4 and rubric.threshold == threshold
    assert [(c.name, c.weight, [(lv.name, lv.score) for lv in c.levels]) for c in rubric.criteria] == rows


async def test_a_judge_grades_an_answer_through_the_rubric() -> None:
    rubric = scenario_rubric(SCENARIO)
    judge = Judge(ScriptedSpec(judges.cited_by_support), rubric)
    task = TASKS[0]
    cited, bare = await judge.grade(task, right_answer(case_of(task))), await judge.grade(task, "It is big.")
    assert (cited.score, cited.passed, bare.score, bare.passed) == (1.0, True, 0.0, False)
    assert [c.criterion for c in cited.criteria] == ["faithful", "answers", "supported", "concise"]
    padded = Judge(ScriptedSpec(lambda r: judges._by_levels(_one_flaw, WEIGHTS)(r)), rubric)
    flawed = await padded.grade(task, "x [S1].")
    assert flawed.score == pytest.approx((1.5 + 2 + 2 + 0.5) / 8) and flawed.passed is False  # two flaws fail


async def test_the_reading_judge_passes_a_right_answer_and_fails_each_kind_of_wrong_one() -> None:
    judge = Judge(ScriptedSpec(judges.cited_reader), scenario_rubric(SCENARIO))
    said = next(t for t in TASKS if len(case_of(t).support) == 2)
    unsaid = next(t for t in TASKS if not case_of(t).support)
    case = case_of(said)
    outside = next(n for n, s in enumerate(case.sentences, start=1) if case.subject not in s)
    one = right_answer(case).split("]. ")[0] + "]."
    verdicts = {
        "right": await judge.grade(said, right_answer(case)),
        "right_unsaid": await judge.grade(unsaid, NOT_SAID),
        "half": await judge.grade(said, one),
        "not_said_when_said": await judge.grade(said, NOT_SAID),
        "said_when_not": await judge.grade(unsaid, f"{case_of(unsaid).sentences[0]} [S1]"),
        "other_subject": await judge.grade(said, f"{right_answer(case)} Also this [S{outside}]."),
    }
    passed = {name: v.passed for name, v in verdicts.items()}
    assert passed == {
        "right": True,
        "right_unsaid": True,
        "half": True,  # one lesser flaw, as the rubric allows
        "not_said_when_said": False,
        "said_when_not": False,
        "other_subject": False,
    }
    levels = {c.criterion: c.level for c in verdicts["half"].criteria}
    assert levels["answers"] == "partly" and levels["supported"] == "all"
    assert verdicts["half"].score == pytest.approx(7 / 8)


WEIGHTS = {"faithful": 3, "answers": 2, "supported": 2, "concise": 1}


def _bottom(task: str, text: str) -> dict[str, str]:
    return {"faithful": "unfaithful", "answers": "no", "supported": "none", "concise": "rambling"}


def _one_flaw(task: str, text: str) -> dict[str, str]:
    return {"faithful": "minor", "answers": "fully", "supported": "all", "concise": "padded"}


# ---------------------------------------------------------------- held out


@pytest.mark.parametrize("strategy", ["adversarial", "cove"])
def test_no_frame_a_role_receives_and_no_prompt_holds_the_rubric(strategy: str) -> None:
    rubric = scenario_rubric(SCENARIO)
    assert rubric is not None
    markers = [c.description for c in rubric.criteria] + [lv.description for c in rubric.criteria for lv in c.levels]
    received, prompts = run_recorded(TASKS[4], strategy, oracle=False)
    frames = "\n".join(json.dumps(msgpack.unpackb(p), default=str) for p in received)
    assert received and prompts
    assert [m for m in markers if m in frames or any(m in p for p in prompts)] == []


def test_the_loop_is_the_same_whatever_a_judge_says_and_carries_no_grade() -> None:
    """A judge grades after the loop: what every role was asked, and the answer the loop chose, are the same
    under a judge that passes it and one that fails it; and the result holds no grade of any kind."""
    task = TASKS[0]
    answer = right_answer(case_of(task))
    asked: list[list[str]] = []

    def model(request: ChatRequest) -> str:
        asked[-1].append("\n".join(m.content for m in request.messages))
        return json.dumps({"issues": []}) if request.json_schema else answer

    config = RunConfig.build(scenario="cited_answer", samples=2, max_rounds=2)
    chosen, passes = [], []
    for verdict in (judges.cited_by_support, judges._by_levels(_bottom, WEIGHTS)):
        asked.append([])
        done = refine(task, config, backends={"drafter": ScriptedSpec(model), "critic": ScriptedSpec(model)})
        judged = asyncio.run(Judge(ScriptedSpec(verdict), scenario_rubric(SCENARIO)).grade(task, done.result.text))
        chosen.append(done.result.text)
        passes.append(judged.passed)
        assert (done.result.grade, done.result.graded_pass, done.result.passed) == (None, None, True)
    assert asked[0] == asked[1] and asked[0] and chosen == [answer, answer] and passes == [True, False]


def test_the_docs_show_the_first_task_as_the_drafter_reads_it() -> None:
    [shown] = [b.text for b in blocks(DOCS / "scenarios" / "cited_answer.md") if b.language == "text"]
    assert shown == TASKS[0].prompt + "\n"
