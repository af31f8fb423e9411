"""The incident scenario: seeded service logs, an exact check per written rule, the incident's facts graded held out.

A summary written from the gold keeps every rule and grades 1.0; each rule broken in turn fails its
check alone; a wrong fact passes every check (the feedback cannot know it) and costs its grade item;
a reply that lists every service, time or code earns none of those facts.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable

import pytest

from redraft.protocols.messages import CheckResult, Task, decode_as, encode
from redraft.scenarios import get_scenario
from redraft.scenarios.builtin._incident_logs import KNOCK_ON_CODES, Incident, case_seed, make_incident, read_log
from redraft.scenarios.builtin.incident import RULES, IncidentSummary

SCENARIO = IncidentSummary()
TASKS = list(SCENARIO.tasks(seed=0))
RULE_NAMES = [
    "sections",
    "summary",
    "impact",
    "timeline",
    "timeline_times",
    "root_cause",
    "word_count",
    "line_length",
]
LINE = re.compile(r"^(\d{2}:\d{2}):\d{2} (INFO|WARN|ERROR) (\S+) (.+)$")


def incident_of(task: Task) -> Incident:
    index = int(task.task_id.removeprefix("incident-"))
    return make_incident(case_seed(0, index), index % 3 + 1)


def by_difficulty(count: int) -> list[Task]:
    """The first ``count`` tasks of each difficulty."""
    return [t for d in (1, 2, 3) for t in [t for t in TASKS if t.gold["difficulty"] == d][:count]]


def summary_of(incident: Incident) -> str:
    """A summary written from the gold that keeps every rule."""
    return "\n".join(
        [
            f"Summary: The {incident.version} deploy of {incident.service} caused {incident.code} errors "
            "until it was rolled back or fixed; the api-gateway then recovered.",
            f"Impact: from {incident.start} to {incident.end}, {incident.failed_requests} failed requests",
            "Timeline:",
            f"- {incident.deployed} {incident.service} {incident.version} deployed",
            f"- {incident.start} first {incident.code} errors",
            f"- {incident.fixed} rollback or fix applied",
            f"- {incident.end} the api-gateway reports recovery",
            f"Root cause: the {incident.version} deploy of {incident.service}, which failed with {incident.code}.",
            "Actions: test releases under load before they ship; alert on the error rate sooner.",
        ]
    )


def failed(checks: list[CheckResult]) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.passed}


def graded(task: Task, text: str) -> CheckResult:
    verdict = SCENARIO.grade(task, text)
    assert verdict is not None
    return verdict


def replace_line(text: str, prefix: str, new: str) -> str:
    return "\n".join(new if line.startswith(prefix) else line for line in text.splitlines())


# ---------------------------------------------------------------- tasks


def test_tasks_are_two_hundred_depend_only_on_the_seed_and_differ_between_seeds() -> None:
    assert len(TASKS) == 200 and [t.task_id for t in TASKS[:2]] == ["incident-000", "incident-001"]
    assert list(get_scenario("incident").tasks(seed=0)) == TASKS
    other = list(SCENARIO.tasks(seed=1))
    assert all(a.prompt != b.prompt for a, b in zip(TASKS, other, strict=True))
    assert len({t.prompt for t in TASKS}) == 200
    assert Counter(t.gold["difficulty"] for t in TASKS) == {1: 67, 2: 67, 3: 66}


def test_tasks_round_trip_as_frames() -> None:
    for task in TASKS[:10]:
        assert decode_as(encode(task), Task) == task
        assert decode_as(encode(task.without_gold()), Task) == task.without_gold()


def test_each_log_has_its_shape_and_states_its_facts_once() -> None:
    for task in TASKS:
        log, gold = task.reference["log"], task.gold
        assert 25 <= len(log) <= 60 and all(LINE.match(line) for line in log), task.task_id
        assert [line[:8] for line in log] == sorted(line[:8] for line in log)
        first_error = next(line for line in log if " ERROR " in line)
        assert first_error.startswith(gold["start"]) and f"ERROR {gold['service']} {gold['code']} " in first_error
        [recovered] = [line for line in log if "recovered" in line]
        assert recovered.startswith(gold["end"])
        total = re.findall(r"failed_requests=(\d+) in total", "\n".join(log))
        minutes = re.findall(r"failed_requests=(\d+) in the last minute", "\n".join(log))
        assert bool(total) != bool(minutes)
        assert sum(map(int, total or minutes)) == gold["failed_requests"]
        assert "\n".join(log) in task.prompt


def test_tasks_vary_the_root_cause_the_code_the_count_and_the_distractors() -> None:
    assert len({t.gold["service"] for t in TASKS}) == 5 and len({t.gold["code"] for t in TASKS}) >= 6
    assert sum("in the last minute" in t.prompt for t in TASKS) in range(60, 141)
    for task in TASKS:
        log = task.reference["log"]
        deploys = {line.split()[2] for line in log if " deploy v" in line and line.endswith("started")}
        warned = read_log(log).codes - {task.gold["code"], *KNOCK_ON_CODES}
        assert len(deploys) == (2 if task.gold["difficulty"] == 3 else 1), task.task_id
        assert len(warned) == (0 if task.gold["difficulty"] == 1 else 1), task.task_id


def test_the_feedback_data_is_the_log_and_the_limits_and_a_task_file_splits_the_same() -> None:
    for task in TASKS:
        seen = task.without_gold()
        assert set(seen.reference) == {"log", "rules"} and seen.gold == {}
        assert seen.reference["rules"] == RULES  # the same for every task: it says nothing of one incident
        assert not set(map(str, task.gold.values())) & set(seen.reference["log"])  # no fact as a value of its own
        assert SCENARIO.split_reference(task.reference | task.gold) == (task.reference, task.gold)


# ---------------------------------------------------------------- feedback and grade


def test_a_summary_from_the_gold_keeps_every_rule_and_grades_full() -> None:
    for task in by_difficulty(8):
        text = summary_of(incident_of(task))
        checks = SCENARIO.check(task.without_gold(), text)
        assert [c.name for c in checks] == RULE_NAMES
        assert failed(checks) == {}, (task.task_id, text)
        verdict = graded(task, text)
        assert (verdict.passed, verdict.score, verdict.detail) == (True, 1.0, ""), task.task_id
        assert SCENARIO.grade(task.without_gold(), text) is None


def _break_sections(text: str) -> str:
    lines = text.splitlines()
    return "\n".join([*lines[:-2], lines[-1], lines[-2]])  # Actions before Root cause


BREAKERS: dict[str, Callable[[str], str]] = {
    "sections": _break_sections,
    "summary": lambda text: replace_line(text, "Summary:", "Summary: " + " ".join(["ok"] * 41)),
    "impact": lambda text: re.sub(r"Impact: from (\S+) to (\S+),", r"Impact: \1-\2,", text),
    "timeline": lambda text: "\n".join(line for n, line in enumerate(text.splitlines()) if n not in (4, 5)),
    "timeline_times": lambda text: re.sub(r"(?m)^- \d\d:\d\d (the api-gateway)", r"- 23:59 \1", text),
    "root_cause": lambda text: replace_line(text, "Root cause:", text.splitlines()[-2] + " It broke api-gateway."),
    "word_count": lambda text: text + "\n" + "\n".join(" ".join(["more"] * 30) for _ in range(5)),
    "line_length": lambda text: text + " " + "x" * 200,
}


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_each_broken_rule_fails_its_check_alone(rule: str) -> None:
    for task in by_difficulty(3):
        broken = BREAKERS[rule](summary_of(incident_of(task)))
        checks = SCENARIO.check(task.without_gold(), broken)
        assert list(failed(checks)) == [rule], (task.task_id, failed(checks), broken)
        assert graded(task, broken).detail.endswith(f"rules broken: {rule}")


def test_details_name_the_fault_in_the_reply() -> None:
    task = TASKS[0]
    text = summary_of(incident_of(task))
    faults = {rule: failed(SCENARIO.check(task, BREAKERS[rule](text)))[rule] for rule in RULE_NAMES}
    assert faults["sections"].startswith("the sections are in the order Summary:, Impact:, Timeline:, Actions:")
    assert faults["summary"] == "the summary has 41 words; the limit is 40"
    assert "is not 'Impact: from HH:MM to HH:MM, N failed requests'" in faults["impact"]
    assert faults["timeline"] == "the timeline has 2 event lines; write 3 to 6"
    assert faults["timeline_times"] == "no log line is at 23:59; use the log's times"
    assert faults["root_cause"].startswith("it names 2 services of the log (")
    assert faults["word_count"].endswith("the limit is 180: cut some")
    assert faults["line_length"].startswith("line 9 has ")
    marked = text.replace("Summary:", "**Summary:**")
    assert failed(SCENARIO.check(task, marked))["sections"].startswith(
        "not at the start of a line, spelt so: Summary:;"
    )
    preamble = failed(SCENARIO.check(task, "Here it is:\n" + text))
    assert list(preamble) == ["sections"]
    assert preamble["sections"].startswith("1 line(s) before the first section; start the reply with 'Summary:'")
    assert failed(SCENARIO.check(task, "Summary: hi"))["sections"].startswith(
        "missing: Impact:, Timeline:, Root cause:, Actions:;"
    )


def _wrong(incident: Incident, log: list[str]) -> dict[str, Callable[[str], str]]:
    """One wrong fact at a time, each still keeping every rule."""
    later = next(line[:5] for line in log if line[:5] > incident.start)
    caller = next(line.split()[2] for line in log if " ERROR " in line and line.split()[2] != incident.service)
    knock_on = next(code for code in KNOCK_ON_CODES if code in "\n".join(log))
    service, more = f"deploy of {incident.service},", incident.failed_requests + 1
    return {
        "start": lambda text: text.replace(f"from {incident.start} ", f"from {later} ", 1),
        "end": lambda text: text.replace(f"to {incident.end},", f"to {incident.fixed},", 1),
        "failed_requests": lambda text: text.replace(f", {incident.failed_requests} failed", f", {more} failed", 1),
        "service": lambda text: text.replace(service, f"deploy of {caller},"),
        "code": lambda text: replace_line(text, "Root cause:", text.splitlines()[-2].replace(incident.code, knock_on)),
    }


def test_a_wrong_fact_keeps_every_rule_and_costs_its_own_grade_item() -> None:
    for task in by_difficulty(4):
        incident = incident_of(task)
        for fact, wrong in _wrong(incident, task.reference["log"]).items():
            text = wrong(summary_of(incident))
            assert failed(SCENARIO.check(task.without_gold(), text)) == {}, (task.task_id, fact, text)
            verdict = graded(task, text)
            assert not verdict.passed and verdict.score == pytest.approx(5 / 6), (task.task_id, fact)
            assert verdict.detail.startswith(f"{fact}: "), verdict.detail


def test_a_shotgun_reply_earns_none_of_the_facts_it_lists() -> None:
    for task in by_difficulty(4):
        view = read_log(task.reference["log"])
        minutes = sorted(view.minutes)
        shotgun = "\n".join(
            [
                "Summary: something failed.",
                f"Impact: from {minutes[0]} to {minutes[-1]}, {task.gold['failed_requests']} failed requests"
                f" (or from {task.gold['start']} to {task.gold['end']})",
                "Timeline:",
                *[f"- {at} event" for at in minutes],
                f"Root cause: {' or '.join(sorted(view.services))}, with {' or '.join(sorted(view.codes))}.",
                "Actions: look into it.",
            ]
        )
        verdict = graded(task, shotgun)
        assert verdict.score == 0.0, (task.task_id, verdict.detail)
        for fact in ("start", "end", "failed_requests", "service", "code"):
            assert f"{fact}: " in verdict.detail


def test_naming_a_second_service_or_code_or_writing_two_impact_lines_earns_nothing_for_that_fact() -> None:
    task = TASKS[1]
    incident = incident_of(task)
    text = summary_of(incident)
    root = text.splitlines()[-2]
    two_services = replace_line(text, "Root cause:", root.removesuffix(".") + ", seen by api-gateway.")
    two_codes = replace_line(text, "Root cause:", root.removesuffix(".") + f" and {KNOCK_ON_CODES[0]}.")
    impact = next(line for line in text.splitlines() if line.startswith("Impact:"))
    two_impacts = text.replace(impact, f"{impact}\nImpact: from 00:00 to 00:01, 1 failed requests")
    assert graded(task, two_services).detail.startswith("service: 2 services named")
    assert graded(task, two_codes).detail.startswith("code: 2 error codes named")
    verdict = graded(task, two_impacts)
    assert verdict.detail.startswith("start: no Impact line in the required form") and verdict.score == 2 / 6


def test_checks_and_grades_never_raise_and_stay_in_bounds() -> None:
    task = TASKS[2]
    rng = random.Random(0)
    junk = [
        "",
        "\x00\x00",
        "Summary:",
        "Impact: from 99:99 to 00:00, 5 failed requests",
        "Impact: from 10:00 to 10:05, " + "9" * 5000 + " failed requests",
        "Timeline:\n- 25:61 x\n- 00:00\n-",
        "Root cause: " + "A_B " * 2000,
        "\n".join(["Summary:", "Impact:", "Timeline:", "Root cause:", "Actions:"] * 50),
        "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(3000)),
        "x" * 200_000,
        "\r\n".join(summary_of(incident_of(task)).splitlines()),
    ]
    for text in junk:
        checks = SCENARIO.check(task, text)
        assert [c.name for c in checks] == RULE_NAMES
        assert all(0.0 <= c.score <= 1.0 for c in checks)
        verdict = graded(task, text)
        assert 0.0 <= verdict.score <= 1.0
    assert failed(SCENARIO.check(task, junk[-1])) == {}  # Windows line ends read as any others


def test_the_check_is_deterministic_and_instant() -> None:
    assert SCENARIO.check_cost == "instant" and not SCENARIO.feedback_is_grade
    task = TASKS[3]
    for text in (summary_of(incident_of(task)), BREAKERS["impact"](summary_of(incident_of(task))), "junk"):
        assert SCENARIO.check(task, text) == IncidentSummary().check(task, text)
        assert SCENARIO.grade(task, text) == IncidentSummary().grade(task, text)


def test_the_answer_is_the_impact_and_the_root_cause_normalised() -> None:
    text = summary_of(incident_of(TASKS[0]))
    spaced = text.replace("Impact: from", "Impact:   from").replace("Root cause: the", "Root cause:  THE")
    answer = SCENARIO.answer(text)
    assert answer is not None and answer == SCENARIO.answer(spaced) and answer.startswith("from ")
    assert SCENARIO.answer("no sections at all") is None


def test_the_impact_line_is_its_section_s_one_line() -> None:
    task = TASKS[4]
    text = summary_of(incident_of(task))
    below = text.replace("Impact: from", "Impact:\nfrom")
    assert failed(SCENARIO.check(task, below)) == {
        "impact": (
            "write the Impact section as one line, the label's own: 'Impact: from HH:MM to HH:MM, N failed requests'"
        )
    }
    assert graded(task, below).detail.startswith("start: no Impact line in the required form")
    backwards = re.sub(r"from (\S+) to (\S+),", r"from \2 to \1,", text)
    assert "start not after end" in failed(SCENARIO.check(task, backwards))["impact"]
