"""The built-in scenarios json_extract, sql and constrained_writing, and the registry's parametrized names.

Each verifier is run against known-good answers (all pass) and known-bad ones
(each fails, with a detail that says what is wrong without giving the gold away).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from redraft.errors import UserError
from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import DEFAULT_STAGES, Scenario, get_scenario, scenario, scenario_names, score_of
from redraft.scenarios.builtin.constrained_writing import ConstrainedWriting, words
from redraft.scenarios.builtin.json_extract import JsonExtract, extract_object
from redraft.scenarios.builtin.sql import Sql, database_path, extract_sql, run_query
from tests.support.paths import REPO_ROOT

NEW = ["json_extract", "sql", "constrained_writing", "incident", "cited_answer"]


def failed(checks: list[CheckResult]) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.passed}


# ---------------------------------------------------------------- registry


def test_every_scenario_is_listed_and_families_by_their_pattern() -> None:
    names = scenario_names()
    assert {"arithmetic", "humaneval", *NEW, "reasoning_gym:NAME", "check:MODULE:FUNCTION"} <= set(names)
    assert names == sorted(names)


@pytest.mark.parametrize("name", NEW)
def test_new_scenarios_satisfy_the_protocol_and_are_seeded(name: str) -> None:
    scenario = get_scenario(name)
    assert isinstance(scenario, Scenario) and scenario.name == name and scenario.check_cost != "executes"
    first = list(islice(scenario.tasks(seed=0), 8))
    assert first == list(islice(get_scenario(name).tasks(seed=0), 8))  # depends only on the seed
    assert first != list(islice(scenario.tasks(seed=1), 8))
    assert len({t.task_id for t in scenario.tasks(seed=0)}) == len(list(scenario.tasks(seed=0)))
    assert all(t.scenario == name and t.prompt for t in first)


def test_a_parametrized_name_goes_to_its_family_factory() -> None:
    with pytest.raises(UserError, match=r"unknown scenario 'nope:x' \(known: arithmetic, "):
        get_scenario("nope:x")
    with pytest.raises(UserError, match="needs a parameter after the colon"):
        get_scenario("check:")
    with pytest.raises(UserError, match="unknown scenario 'sudoku'"):
        get_scenario("sudoku")
    # The listed pattern itself is a parameter like any other: a clean error, not a crash.
    with pytest.raises(UserError, match="cannot import check module 'MODULE'"):
        get_scenario("check:MODULE:FUNCTION")


def test_a_scenario_that_declares_nothing_optional_takes_every_default() -> None:
    from redraft.scenarios.builtin.arithmetic import Arithmetic

    task = next(iter(Arithmetic().tasks(seed=0)))
    plain = Arithmetic()
    assert plain.stages() == list(DEFAULT_STAGES) and not plain.needs_task_file
    assert [c.passed for c in plain.check_stage(task, "outline", "1. add\n2. subtract")] == [True]
    [one_line] = plain.check_stage(task, "outline", "just one line")
    assert not one_line.passed and one_line.name == "outline_present"


def test_a_registration_that_makes_no_scenario_is_refused_by_name() -> None:
    @scenario("not_a_scenario")
    class Loose:  # the shape of a scenario, without the contract
        def tasks(self, *, seed: int) -> Any:
            return iter([])

    with pytest.raises(UserError, match=r"scenario 'not_a_scenario' made a Loose, not a redraft\.scenarios\.Scenario"):
        get_scenario("not_a_scenario")


def test_reasoning_gym_without_its_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # as if not installed: importing it fails
    with pytest.raises(UserError, match=r"need the optional package reasoning-gym: pip install 'redraft\[reasoning\]'"):
        get_scenario("reasoning_gym:leg_counting")


# ---------------------------------------------------------------- json_extract

JSON = JsonExtract()
JSON_TASKS = list(islice(JSON.tasks(seed=0), 30))


def gold_reply(task: Task) -> str:
    return f"Here you go:\n```json\n{json.dumps(task.gold['fields'], indent=2)}\n```"


def graded(scenario: Scenario, task: Task, text: str) -> CheckResult:
    verdict = scenario.grade(task, text)
    assert verdict is not None
    return verdict


def test_json_tasks_cover_each_kind_and_show_the_schema_never_the_gold() -> None:
    kinds = {tuple(sorted(t.gold["fields"])) for t in JSON_TASKS}
    assert len(kinds) == 3
    for task in JSON_TASKS:
        assert json.dumps(task.reference["schema"]) in task.prompt
        assert set(task.reference["schema"]["required"]) == set(task.gold["fields"])
        assert set(task.reference) == {"schema"}  # the feedback's data holds no gold value


def test_json_gold_answers_pass_the_feedback_and_the_grade() -> None:
    for task in JSON_TASKS:
        checks = JSON.check(task, gold_reply(task))
        assert failed(checks) == {}, task.task_id
        assert score_of(checks) == 1.0 and len(checks) == len(task.gold["fields"])
        assert graded(JSON, task, gold_reply(task)).passed
    # Unfenced, with prose around it, strings differing only in case (and spacing where the schema allows it).
    task = JSON_TASKS[0]
    loose = {k: v.upper() if isinstance(v, str) else v for k, v in task.gold["fields"].items()}
    loose["name"] = f"  {loose['name']} "
    assert failed(JSON.check(task, f"The object is {json.dumps(loose)} as asked.")) == {}
    assert graded(JSON, task, json.dumps(loose)).passed


def test_json_a_wrong_but_valid_field_passes_the_feedback_and_fails_the_grade_alone() -> None:
    for task in JSON_TASKS[:6]:
        gold = task.gold["fields"]
        for field, value in gold.items():
            wrong = json.dumps(gold | {field: _wrong_value(value)})
            checks = JSON.check(task, wrong)
            if failed(checks):  # a wrong value the schema itself refuses: the feedback names the field
                assert (
                    list(failed(checks)) == [f"field:{field}"]
                    and "breaks the schema" in failed(checks)[f"field:{field}"]
                )
                if not isinstance(value, bool) and "enum" not in task.reference["schema"]["properties"][field]:
                    assert str(value) not in failed(checks)[f"field:{field}"]  # never the gold value
            verdict = graded(JSON, task, wrong)
            assert not verdict.passed and verdict.score == pytest.approx((len(gold) - 1) / len(gold))
            assert repr(field) in verdict.detail and verdict.detail.count("';") == 0


def _wrong_value(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if str(value).startswith("ORD-"):
        return "ORD-0000"
    if str(value)[:4].isdigit():
        return "2026-12-31"
    return "Zzyzx"


def test_json_schema_breaks_and_missing_fields_are_named_by_the_feedback() -> None:
    task = next(t for t in JSON_TASKS if "age" in t.gold["fields"])
    gold = task.gold["fields"]
    as_string = failed(JSON.check(task, json.dumps(gold | {"age": str(gold["age"])})))
    assert list(as_string) == ["field:age"] and "breaks the schema" in as_string["field:age"]
    assert "is not of type 'integer'" in as_string["field:age"]
    missing = {k: v for k, v in gold.items() if k != "email"}
    assert failed(JSON.check(task, json.dumps(missing))) == {"field:email": "'email' is missing"}
    assert not graded(JSON, task, json.dumps(missing)).passed


@pytest.mark.parametrize(
    ("text", "found"),
    [("no json here", "nothing parsable"), ("```json\n[1, 2]\n```", "a JSON list"), ("{broken", "nothing parsable")],
)
def test_json_unparsable_or_non_object_answers_fail_with_one_check(text: str, found: str) -> None:
    checks = JSON.check(JSON_TASKS[0], text)
    assert [c.name for c in checks] == ["json_object"] and not checks[0].passed
    assert found in checks[0].detail and "```json" in checks[0].detail
    assert graded(JSON, JSON_TASKS[0], text).score == 0.0


def test_json_answer_is_the_canonical_object() -> None:
    assert JSON.answer('x ```json\n{"b": 1, "a": 2}\n```') == JSON.answer('{"a": 2, "b": 1}') == '{"a": 2, "b": 1}'
    assert JSON.answer("nothing") is None
    assert extract_object('first {"a": 1} then {"b": 2}') == {"a": 1}


# ---------------------------------------------------------------- sql

SQL = Sql()
SQL_TASKS = list(SQL.tasks(seed=0))


def sql_reply(query: str) -> str:
    return f"This query answers it:\n\n```sql\n{query};\n```\n"


def test_the_database_is_the_seeded_scripts_output(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        import make_sql_db
    finally:
        sys.path.pop(0)
    rebuilt = tmp_path / "shop.sqlite"
    make_sql_db.build(rebuilt)
    # The same schema and rows (the file's bytes also record the SQLite version that wrote it).
    assert _dump(rebuilt) == _dump(database_path())
    counts = [run_query(f"SELECT COUNT(*) FROM {t}").rows[0][0] for t in ("customers", "products", "orders")]
    assert counts == [60, 24, 180]


def _dump(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


def test_sql_tasks_are_forty_from_ten_templates_and_never_show_the_gold_query() -> None:
    assert len(SQL_TASKS) == 40 and len({t.prompt for t in SQL_TASKS}) == 40
    for task in SQL_TASKS:
        assert "CREATE TABLE order_items" in task.prompt
        assert task.gold["gold_sql"] not in task.prompt and "gold_sql" not in task.reference
        assert run_query(task.gold["gold_sql"]).rows  # no empty gold result: it would pass any empty query
        # The shape the feedback checks is the question's own: as many columns as the gold query's.
        assert task.reference["columns"] == run_query(task.gold["gold_sql"]).columns


def test_sql_gold_queries_pass_the_feedback_and_the_grade_fenced_or_plain() -> None:
    for task in SQL_TASKS:
        gold = task.gold["gold_sql"]
        assert failed(SQL.check(task, sql_reply(gold))) == {}, task.task_id
        assert graded(SQL, task, sql_reply(gold)).passed, task.task_id
    plain = SQL_TASKS[1]
    assert failed(SQL.check(plain, f"Sure.\n{plain.gold['gold_sql']}")) == {}
    assert graded(SQL, plain, f"Sure.\n{plain.gold['gold_sql']}").passed


def test_sql_grade_ignores_column_names_and_row_order_unless_asked_and_feedback_checks_the_asked_order() -> None:
    by_city = SQL_TASKS[0]  # How many customers live in X?
    city = by_city.prompt.rsplit(" in ", 1)[1].rstrip("?")
    renamed = f"SELECT count(id) AS n FROM customers WHERE city = '{city}'"
    assert graded(SQL, by_city, sql_reply(renamed)).passed
    names = SQL_TASKS[1]  # a list of names, no order asked
    reversed_order = names.gold["gold_sql"] + " ORDER BY name DESC"
    assert graded(SQL, names, sql_reply(reversed_order)).passed
    ranked = SQL_TASKS[8]  # top spenders, biggest first: the order matters
    assert "ORDER BY spent DESC" in ranked.gold["gold_sql"] and ranked.reference["order"] == "desc_last"
    wrong_order = f"SELECT * FROM ({ranked.gold['gold_sql']}) ORDER BY spent ASC"
    verdict = graded(SQL, ranked, sql_reply(wrong_order))
    assert (
        not verdict.passed
        and verdict.detail == "returned the right rows in the wrong order; sort them as the question asks"
    )
    assert failed(SQL.check(ranked, sql_reply(wrong_order))) == {
        "order": "the rows are not sorted by the last column, highest first, as the question asks"
    }


def test_sql_feedback_sees_the_shape_the_grade_sees_the_values() -> None:
    names = SQL_TASKS[1]
    gold_rows = run_query(names.gold["gold_sql"]).rows
    n = len(gold_rows)
    too_few = names.gold["gold_sql"] + " LIMIT 1"
    assert failed(SQL.check(names, sql_reply(too_few))) == {}  # nothing a user sees says one row is too few
    assert graded(SQL, names, sql_reply(too_few)).detail == f"returned 1 row(s), expected {n}"
    two_columns = names.gold["gold_sql"].replace("SELECT name", "SELECT name, city")
    assert failed(SQL.check(names, sql_reply(two_columns))) == {
        "columns": "returned 2 column(s); the question asks for 1"
    }
    shifted = names.gold["gold_sql"].replace("SELECT name", "SELECT name || '!'")
    assert failed(SQL.check(names, sql_reply(shifted))) == {}
    detail = graded(SQL, names, sql_reply(shifted)).detail
    assert detail == f"returned the right number of rows ({n}), but {n} of them are not in the expected result"
    empty = names.gold["gold_sql"] + " AND 1 = 0"
    assert failed(SQL.check(names, sql_reply(empty)))["rows"].startswith("the query returns no rows")


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("SELECT nope FROM orders", "the query failed: no such column: nope"),
        ("SELEC 1", 'the query failed: near "SELEC": syntax error'),
        ("DELETE FROM orders", "not authorized: only a read-only SELECT query is allowed"),
        ("UPDATE products SET price = 0", "not authorized"),
        ("CREATE TABLE x (a)", "not authorized"),
        ("PRAGMA query_only = OFF", "not authorized"),
        ("ATTACH DATABASE 'x.db' AS x", "not authorized"),
        ("SELECT 1; DROP TABLE orders", "You can only execute one statement at a time; send exactly one SELECT"),
        ("SELECT * FROM orders, order_items", "returned more than 1000 rows"),
        ("SELECT length(randomblob(1000000000))", "the query failed: string or blob too big"),
    ],
)
def test_sql_errors_writes_and_floods_fail_cleanly(query: str, detail: str) -> None:
    before = hashlib.sha256(database_path().read_bytes()).hexdigest()
    checks = SQL.check(SQL_TASKS[0], sql_reply(query))
    assert not checks[0].passed and detail in checks[0].detail
    assert not graded(SQL, SQL_TASKS[0], sql_reply(query)).passed
    assert hashlib.sha256(database_path().read_bytes()).hexdigest() == before


def test_sql_a_cartesian_join_is_stopped_quickly() -> None:
    started = time.monotonic()
    query = "SELECT COUNT(*) FROM order_items a, order_items b, order_items c, customers d"
    checks = SQL.check(SQL_TASKS[0], sql_reply(query))
    assert time.monotonic() - started < 3.0
    assert "stopped after 1 s" in checks[0].detail and "cartesian product" in checks[0].detail


def test_sql_no_query_and_extraction() -> None:
    assert failed(SQL.check(SQL_TASKS[0], "   "))["runs"].startswith("no query found")
    assert extract_sql("```sql\nSELECT 1;\n```\nor\n```sql\nSELECT 2\n```") == "SELECT 2"
    assert extract_sql("I would run:\nWITH t AS (SELECT 1) SELECT * FROM t;") == "WITH t AS (SELECT 1) SELECT * FROM t"
    assert SQL.answer("```sql\nSELECT  1\n FROM t\n```") == "SELECT 1 FROM t"


# ---------------------------------------------------------------- constrained_writing

WRITING = ConstrainedWriting()
WRITING_TASKS = list(islice(WRITING.tasks(seed=0), 40))
_FILLER = ["keep", "a", "calm", "routine", "and", "note", "what", "works", "for", "you", "each", "day"]


def good_text(ref: dict[str, Any], extra_words: int = 0) -> str:
    """A text keeping every rule of ``ref``: the right shape, mid-range length, the required words."""
    target = (int(ref["min_words"]) + int(ref["max_words"])) // 2 + extra_words
    items = int(ref["items"]) if ref["format"] != "paragraph" else 1
    body = list(ref["required"]) + [_FILLER[i % len(_FILLER)] for i in range(target - 2)]
    size = len(body) // items
    chunks = [body[i * size : (i + 1) * size if i < items - 1 else None] for i in range(items)]
    if ref["format"] == "paragraph":
        return " ".join(body) + "."
    marker = (lambda i: "- ") if ref["format"] == "bullets" else (lambda i: f"{i + 1}. ")
    return "\n".join(marker(i) + " ".join(chunk) for i, chunk in enumerate(chunks))


def test_writing_tasks_state_every_rule_in_the_prompt() -> None:
    assert {t.reference["format"] for t in WRITING_TASKS} == {"bullets", "numbered", "paragraph"}
    for task in WRITING_TASKS:
        ref = task.reference
        assert f"between {ref['min_words']} and {ref['max_words']} words" in task.prompt
        assert all(repr(w) in task.prompt for w in [*ref["required"], *ref["forbidden"]])


def test_writing_good_texts_keep_every_rule() -> None:
    for task in WRITING_TASKS:
        checks = WRITING.check(task, good_text(task.reference))
        assert [c.name for c in checks] == ["format", "word_count", "required_words", "forbidden_words"]
        assert failed(checks) == {}, (task.task_id, good_text(task.reference))


def test_writing_each_broken_rule_fails_alone_with_a_useful_detail() -> None:
    bullets = next(t for t in WRITING_TASKS if t.reference["format"] == "bullets")
    ref = bullets.reference
    good = good_text(ref)
    too_long = good_text(ref, extra_words=int(ref["max_words"]))
    assert failed(WRITING.check(bullets, too_long)) == {
        "word_count": f"{len(words(too_long))} words; the range is {ref['min_words']} to {ref['max_words']}: cut some"
    }
    without = good.replace(ref["required"][0], "item")
    assert failed(WRITING.check(bullets, without)) == {
        "required_words": f"missing required word(s): {ref['required'][0]}"
    }
    forbidden = ref["forbidden"][0]
    with_forbidden = good.replace("calm", forbidden.capitalize(), 1)
    assert failed(WRITING.check(bullets, with_forbidden)) == {
        "forbidden_words": f"forbidden word(s) used: {forbidden}; rephrase without them"
    }
    one_item_less = "\n".join(good.splitlines()[:-1]) + " " + good.splitlines()[-1][2:]
    detail = failed(WRITING.check(bullets, one_item_less))["format"]
    assert detail.startswith(f"found {ref['items'] - 1} bulleted item(s); write exactly {ref['items']} lines")
    assert score_of(WRITING.check(bullets, with_forbidden)) == 0.75


def test_writing_numbered_lists_must_count_from_one_and_paragraphs_have_no_breaks() -> None:
    numbered = next(t for t in WRITING_TASKS if t.reference["format"] == "numbered")
    good = good_text(numbered.reference)
    skipping = good.replace("2. ", "3. ", 1)
    assert failed(WRITING.check(numbered, skipping))["format"].startswith("number the items 1 to")
    paragraph = next(t for t in WRITING_TASKS if t.reference["format"] == "paragraph")
    broken = good_text(paragraph.reference).replace(" and ", "\n", 1)
    assert failed(WRITING.check(paragraph, broken))["format"] == "write one paragraph with no line breaks, not 2 lines"
    as_item = "- " + good_text(paragraph.reference)
    assert failed(WRITING.check(paragraph, as_item))["format"] == "write one paragraph, not a list item"


def test_writing_required_words_match_whole_words_ignoring_case() -> None:
    task = next(t for t in WRITING_TASKS if t.reference["format"] == "paragraph")
    word = task.reference["required"][0]
    glued = good_text(task.reference).replace(word, f"un{word}", 1)
    assert "required_words" in failed(WRITING.check(task, glued))
    shouted = good_text(task.reference).replace(word, word.upper(), 1)
    assert failed(WRITING.check(task, shouted)) == {}


def test_writing_declares_stages_and_checks_the_outline_and_the_draft() -> None:
    assert [s.name for s in WRITING.stages()] == ["outline", "draft", "polish"]
    task = next(t for t in WRITING_TASKS if t.reference["format"] == "bullets")
    ref = task.reference
    outline = "\n".join(f"- point {i + 1} about {ref['required'][i % 2]}" for i in range(ref["items"]))
    assert failed(WRITING.check_stage(task, "outline", outline)) == {}
    short = "\n".join(outline.splitlines()[:-1])
    assert failed(WRITING.check_stage(task, "outline", short)) == {
        "outline_points": f"found {ref['items'] - 1} point(s); write exactly {ref['items']}, one per line"
    }
    prose = outline + " " + " ".join(["more"] * 15)
    assert failed(WRITING.check_stage(task, "outline", prose))["outline_brevity"].startswith(f"point(s) {ref['items']}")
    # The draft is judged on format and words, not yet on length; the last stage on every rule.
    long_draft = good_text(ref, extra_words=int(ref["max_words"]))
    assert failed(WRITING.check_stage(task, "draft", long_draft)) == {}
    assert list(failed(WRITING.check_stage(task, "polish", long_draft))) == ["word_count"]


def test_writing_answer_normalises_words() -> None:
    assert WRITING.answer("- Keep it\n- CALM") == WRITING.answer("1. keep it\n2. calm") == "keep it calm"
    assert WRITING.answer("") is None


@pytest.mark.parametrize("name", NEW)
def test_checks_never_raise_for_bad_text(name: str) -> None:
    scenario = get_scenario(name)
    task = next(iter(scenario.tasks(seed=0)))
    rng = random.Random(0)
    junk = [
        "",
        "\x00\x00",
        "```",
        "```json\n{",
        "{" * 500,
        "- " * 400,
        '{"a": ' * 50_000 + "1" + "}" * 50_000,  # nesting deep enough to exhaust the JSON parser's recursion
        "```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```",
        "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(300)),
    ]
    for text in junk:
        checks = scenario.check(task, text)
        assert checks and all(0.0 <= c.score <= 1.0 for c in checks)


# ---------------------------------------------------------------- through the engine


def test_sql_execution_errors_reach_the_drafter_and_the_loop_fixes_the_query() -> None:
    """Plan, execute, observe, revise: round 0's SQLite error is in round 1's prompt, which then passes."""
    from redraft import RunConfig, refine
    from redraft.backends.base import ChatRequest
    from redraft.backends.scripted import ScriptedSpec
    from redraft.protocols.messages import DraftRequest

    task = SQL_TASKS[3]  # units sold: a three-table join
    prompts: list[str] = []

    def model(request: ChatRequest) -> str:
        if request.json_schema is not None:  # the critic finds nothing: the evidence is the verifier's
            return json.dumps({"issues": []})
        prompt = request.messages[-1].content
        prompts.append(prompt)
        if "no such column: units" in prompt:
            return sql_reply(task.gold["gold_sql"])
        return sql_reply("SELECT SUM(units) FROM order_items")

    spec = ScriptedSpec(script=model)
    config = RunConfig.build(samples=1, max_rounds=3)
    refinement = refine(task, config, backends={"drafter": spec, "critic": spec})
    result = refinement.result
    assert (result.passed, result.initial_passed, result.rounds) == (True, False, 2)
    assert (result.graded_pass, result.initial_graded_pass) == (True, False)  # the held-out grade agrees
    revision = next(m for m in refinement.trace if isinstance(m, DraftRequest) and m.round == 1).revision
    assert revision is not None
    assert [c.detail for c in revision.failed_checks] == ["the query failed: no such column: units"]
    assert "no such column: units" not in prompts[0] and "no such column: units" in prompts[1]
