"""Incident summaries written from seeded service logs under written rules; the facts graded held out.

Feedback (`check`) is one exact check per rule (`redraft.scenarios.builtin._incident_rules`), from the reply
and the task's ``reference`` (the log and the rules' limits): what a user with the log can tell. The
grade (`grade`), held out, reads one value per fact from its one place and compares it with the
gold: the start and the end of the impact and the failed requests from the Impact line, the
root-cause service and its error code from ``Root cause:`` (a section naming two services or two
codes names neither), and, as one more item, whether every rule was kept. Its score is the share
of items right; a reply passes when all are. Its rubric (`rubric`, ``data/incident-rubric.toml``) asks a judge
for the same items, read from the log, weighted so that a faithful judge's score and pass are the grade's: the
grade labels the answers a judge is calibrated on.

Invariants: the task list depends only on the seed; `check` and `grade` never raise for any text;
the feedback reads no gold, and lists of every service, time or code earn no fact.

See docs/architecture.md, section "Incident summaries: the tasks".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario, scenario
from redraft.scenarios.builtin._incident_logs import SERVICES, case_seed, make_incident, read_log
from redraft.scenarios.builtin._incident_rules import (
    IMPACT_FORM,
    LABELS,
    Reply,
    check_impact,
    check_line_length,
    check_root_cause,
    check_sections,
    check_summary,
    check_timeline,
    check_timeline_times,
    check_word_count,
    read_reply,
    root_cause_names,
)
from redraft.scenarios.builtin._rubrics import shipped_rubric

SIZE = 200
RULES = {"summary_max_words": 40, "timeline_min": 3, "timeline_max": 6, "max_words": 180, "max_line_chars": 200}
"""The rules' limits, as a task's ``reference`` holds them (a task file may set its own)."""
FACTS = ("start", "end", "failed_requests", "service", "code")


def rules_text(rules: dict[str, int]) -> str:
    """The rules as the prompt states them, a numbered list."""
    labels = ", ".join(LABELS)
    return "\n".join(
        [
            f"1. Write exactly five sections, in this order, each starting a line with its label: {labels} "
            "(nothing before Summary:, no markup around a label).",
            f"2. Summary: at most {rules['summary_max_words']} words.",
            f"3. Impact: one line written exactly as '{IMPACT_FORM}', from the minute of the first ERROR line "
            "to the minute of the line reporting recovery, where N is the number of failed requests the "
            "api-gateway reports for the whole incident (its total, or the sum of its per-minute counts).",
            f"4. Timeline: alone on its line, followed by {rules['timeline_min']} to {rules['timeline_max']} "
            "lines written '- HH:MM event', in time order.",
            "5. Every time in the timeline is the minute of a line of the log.",
            "6. Root cause: names exactly one service and exactly one error code, spelt as in the log.",
            f"7. At most {rules['max_words']} words in all.",
            f"8. No line longer than {rules['max_line_chars']} characters.",
        ]
    )


def prompt_of(lines: tuple[str, ...], rules: dict[str, int]) -> str:
    """A task's prompt: the log in a fence, then the rules."""
    log = "\n".join(lines)
    return (
        f"Here is the log of a service incident:\n\n```text\n{log}\n```\n\n"
        f"Write an incident summary from this log. Keep every rule:\n{rules_text(rules)}"
    )


def _rules_of(reference: dict[str, Any]) -> dict[str, int]:
    given = reference.get("rules")
    return RULES | (given if isinstance(given, dict) else {})


def _fact(name: str, found: object, gold: object, where: str) -> str | None:
    """None when ``found`` is the gold value; else what was wrong, for people reading the grade."""
    if found is None:
        return f"{name}: {where}"
    if isinstance(gold, str) and isinstance(found, str) and found.casefold() == gold.casefold():
        return None
    return None if found == gold else f"{name}: {found}, not {gold}"


def fact_errors(reply: Reply, gold: dict[str, Any], services: set[str]) -> list[str | None]:
    """One entry per fact of `FACTS`: None when the reply states the gold value in the fact's one place."""
    impact = reply.impact()
    named, codes = root_cause_names(reply, sorted(services | {str(gold["service"])}))
    no_impact = "no Impact line in the required form"
    return [
        _fact("start", impact.start if impact else None, str(gold["start"]), no_impact),
        _fact("end", impact.end if impact else None, str(gold["end"]), no_impact),
        _fact("failed_requests", impact.failed_requests if impact else None, int(gold["failed_requests"]), no_impact),
        _fact("service", named[0] if len(named) == 1 else None, str(gold["service"]), f"{len(named)} services named"),
        _fact("code", codes[0] if len(codes) == 1 else None, str(gold["code"]), f"{len(codes)} error codes named"),
    ]


@scenario("incident")
class IncidentSummary(Scenario):
    """Incident summaries from seeded service logs: exact rules for feedback, the incident's facts graded."""

    feedback_keys = frozenset({"log", "rules"})
    check_cost = "instant"  # a few regular expressions over the reply and the log
    draft_tokens = 256  # a summary in five sections

    def tasks(self, *, seed: int) -> Iterator[Task]:
        for index in range(SIZE):
            incident = make_incident(case_seed(seed, index), index % 3 + 1)
            yield Task(
                task_id=f"incident-{index:03d}",
                scenario=self.name,
                prompt=prompt_of(incident.lines, RULES),
                reference={"log": list(incident.lines), "rules": dict(RULES)},
                gold=incident.gold(),
            )

    def system_prompt(self) -> str:
        return (
            "You are an on-call engineer who writes incident summaries from service logs. Read the log closely, "
            "state only what it shows, and keep every numbered rule of the task exactly. Answer with the five "
            "sections only."
        )

    def rubric(self) -> dict[str, Any]:
        return shipped_rubric("incident")

    def answer(self, text: str) -> str | None:
        reply = read_reply(text)
        parts = [" ".join(reply.text_of(label).casefold().split()) for label in ("Impact:", "Root cause:")]
        return " | ".join(parts) if any(parts) else None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        rules = _rules_of(task.reference)
        log = read_log(task.reference.get("log") or [])
        reply = read_reply(text)
        return [
            check_sections(reply, text),
            check_summary(reply, int(rules["summary_max_words"])),
            check_impact(reply),
            check_timeline(reply, int(rules["timeline_min"]), int(rules["timeline_max"])),
            check_timeline_times(reply, log.minutes),
            check_root_cause(reply, sorted(log.services), log.codes),
            check_word_count(text, int(rules["max_words"])),
            check_line_length(text, int(rules["max_line_chars"])),
        ]

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if not set(FACTS) <= task.gold.keys():
            return None
        log = read_log(task.reference.get("log") or [])
        # The built-in services count too, so that a task without a log cannot be gamed by listing them all.
        errors = fact_errors(read_reply(text), task.gold, set(log.services) | set(SERVICES))
        broken = [c.name for c in self.check(task, text) if not c.passed]
        errors.append(f"rules broken: {', '.join(broken)}" if broken else None)
        wrong = [e for e in errors if e is not None]
        score = (len(errors) - len(wrong)) / len(errors)
        return CheckResult(name="facts", passed=not wrong, score=score, detail="; ".join(wrong)[:500])
