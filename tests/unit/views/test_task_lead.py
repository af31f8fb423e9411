"""A task's page (and its trace) leads with the verdict the task is judged by: its held-out grade, a judge's, or
the feedback when nothing was held out, named and coloured by that verdict; the loop's own verdict follows. Before,
a task whose answer failed its grade led with a green "result: pass" (the feedback's)."""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from redraft import RunConfig
from redraft.protocols.messages import CandidateGrade, Grade, Result, Task, encode
from redraft.rundir import RunStore, safe_name
from redraft.views.report import write_report
from redraft.views.trace import show_trace
from tests.support.report_runs import html_tables
from tests.support.resolved import manifest_for
from tests.unit.views.test_report_labels import result


def graded(task_id: str, *, passed: bool, grade: bool, judge: str | None = None) -> tuple[Grade, Result]:
    made = result(task_id, passed=passed, graded=grade)
    made = Result(**{**{f: getattr(made, f) for f in made.__struct_fields__}, "best_round": 0, "best_sample": 0})
    verdict = CandidateGrade(round=0, sample=0, score=float(grade), passed=grade, detail="")
    return Grade(task_id=task_id, grades=[verdict], judge=judge), made


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    store = RunStore.open(root, manifest_for(RunConfig.build(scenario="arithmetic"), "run"))
    for grade, made in (
        graded("strict", passed=True, grade=False),
        graded("judged", passed=False, grade=True, judge="openai:gpt-4o-mini"),
        (None, result("ungraded", passed=True, graded=None)),
    ):
        task = Task(task_id=made.task_id, scenario="arithmetic", prompt="What is 3 + 4?")
        frames = [encode(task), *([encode(grade)] if grade else []), encode(made)]
        store.append(frames, made)
    store.finish(1.0)
    write_report(root)
    return root


class _Lead(HTMLParser):
    """The first row of a task page's result table: its label, and its first verdict's class and text."""

    def __init__(self) -> None:
        super().__init__()
        self.label, self.verdict, self.colour, self._in = "", "", "", ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("th", "span") and not (self.label if tag == "th" else self.verdict):
            self._in, self.colour = tag, dict(attrs).get("class") or self.colour if tag == "span" else self.colour

    def handle_endtag(self, tag: str) -> None:
        self._in = "" if tag == self._in else self._in

    def handle_data(self, data: str) -> None:
        if self._in == "th":
            self.label += data
        elif self._in == "span":
            self.verdict += data


def lead_of(root: Path, task_id: str) -> tuple[str, str, str, list[list[str]]]:
    page = (root / "report" / f"{safe_name(task_id)}.html").read_text()
    parsed = _Lead()
    parsed.feed(page.split('<table class="kv">', 1)[1])
    return parsed.label, parsed.verdict, parsed.colour, html_tables(page)[""]


def test_a_task_whose_answer_fails_its_grade_leads_with_a_red_fail(run_dir: Path) -> None:
    label, verdict, colour, rows = lead_of(run_dir, "strict")
    assert (label, verdict, colour) == ("result (graded)", "fail", "fail")
    assert rows[0][1] == "fail · held-out grade 0.000 (first draft: not graded)"
    assert rows[1][0] == "feedback (the loop's verdict)" and rows[1][1].startswith("pass · score")


def test_a_judged_task_names_its_judge(run_dir: Path) -> None:
    label, verdict, colour, rows = lead_of(run_dir, "judged")
    assert (label, verdict, colour) == ("result (judged)", "pass", "pass")
    assert "judged by openai:gpt-4o-mini: grade 1.000" in rows[0][1]


def test_a_task_with_nothing_held_out_leads_with_its_feedback_and_says_so(run_dir: Path) -> None:
    label, verdict, colour, rows = lead_of(run_dir, "ungraded")
    assert (label, verdict, colour) == ("result (feedback)", "pass", "pass")
    assert "no held-out grade" in rows[0][1]


def test_the_trace_leads_with_the_grade_too(run_dir: Path) -> None:
    console = Console(file=io.StringIO(), width=160)
    show_trace(run_dir, "strict", console)
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    inside = [line.strip("│ ") for line in printed.splitlines() if line.startswith("│")]
    assert inside[0].startswith("FAIL (graded): held-out grade 0.000")  # the panel's first line
    assert inside[1].startswith("feedback (the loop's verdict): pass")
