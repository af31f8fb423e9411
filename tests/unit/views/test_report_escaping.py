"""Model and user text reaches the report only escaped, in every place a run can put text.

A run directory is written by hand (as a hostile or merely careless writer could)
with two attack strings in every text a page shows: the task id, the prompt and
reference, model text, stage and model names, a check's name and detail,
verification questions, every critique field, a decision's detail, the result's
error, a frame of an unknown kind (its kind and its fields), an unknown field of
a known kind (its name and its value) and an unknown field of a result record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from redraft.rundir import RunReader, build_history, safe_name
from redraft.views.report import task_page, write_report

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = '"><img src=x onerror=alert(1)>'
BAD = SCRIPT + BREAKOUT
TASK_ID = f"t/{BAD}"


def hostile_frames() -> list[dict[str, Any]]:
    t = {"task_id": TASK_ID, "v": 1}
    issue = {"severity": "critical", "quote": BAD, "reason": BAD, "fix": BAD}
    return [
        {"kind": "task", **t, "scenario": BAD, "prompt": BAD, "reference": {BAD: BAD}, BAD: BAD},
        {"kind": "draft_request", **t, "task": {"kind": "task", **t, "scenario": "s", "prompt": BAD}, "round": 0}
        | {"sample": 0, "seed": 1, "stage": {"name": BAD, "index": 0, "total": 2, "instruction": BAD}},
        {"kind": "draft", **t, "round": 0, "sample": 0, "text": BAD, "stage": BAD, "model": BAD, "node_id": BAD}
        | {"edits_applied": 1, "edit_errors": [BAD], "mystery": BAD},
        {"kind": "verification", **t, "round": 0, "sample": 0, "score": 0.5, "passed": False, "answer": BAD}
        | {"stage": BAD, "checks": [{"name": BAD, "passed": False, "score": 0.5, "detail": BAD}]}
        | {"questions": [{"question": BAD, "answer": BAD}], "model": BAD, "usage": {"calls": 1}, BAD: [BAD]},
        {"kind": "critique", **t, "round": 0, "sample": 0, "issues": [issue], "model": BAD, "stance": BAD}
        | {"error": BAD, "extra_note": {BAD: BAD}},
        {"kind": "critique", **t, "round": 0, "sample": 0, "issues": [issue | {"severity": BAD}]},  # not valid
        {"kind": "reflection", **t, "round": 0, "sample": 0, "text": BAD, "model": BAD},
        {"kind": BAD, **t, "round": 0, "sample": 0, BAD: BAD},
        {"kind": "decision", **t, "round": 0, "action": "continue", "best_round": 0, "best_sample": 0}
        | {"best_score": 0.5, "round_best_score": 0.5, "detail": BAD, BAD: BAD},
        {"kind": "draft", **t, "round": 1, "sample": 0, "text": f"{BAD}\nsecond line {BAD}", "stage": BAD},
        {"kind": "verification", **t, "round": 1, "sample": 0, "score": 1.0, "passed": True, "stage": BAD},
        {"kind": "decision", **t, "round": 1, "action": "stop", "reason": "error", "best_round": 1}
        | {"best_sample": 0, "best_score": 1.0, "round_best_score": 1.0, "detail": BAD},
        {"kind": BAD, **t, "note": BAD},  # no round: outside every round
    ]


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "run"
    root.mkdir()
    data = b"".join(msgpack.packb(f) for f in hostile_frames())
    (root / "trace.msgpack").write_bytes(data)
    record = {
        "task_id": TASK_ID,
        "scenario": BAD,
        "answer": BAD,
        "text": BAD,
        "score": 1.0,
        "passed": True,
        "initial_score": 0.5,
        "initial_passed": False,
        "rounds": 2,
        "stop_reason": "error",
        "usage": {"calls": 1},
        "usage_by_role": {BAD: {"calls": 1}},
        "unpriced_models": [BAD],
        "wall_s": 1.0,
        "error": BAD,
        "error_type": BAD,
        BAD: BAD,
        "trace_end": len(data),
    }
    (root / "results.jsonl").write_text(json.dumps(record) + "\n")
    manifest = {"run_id": BAD, "started_at": BAD, "config": {"scenario": BAD, "strategy": BAD, "drafter": BAD}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "summary.json").write_text(json.dumps({"stopped_by": BAD, "wall_s": 1.0}))
    write_report(root)
    return root


def assert_escaped(html: str, where: str) -> None:
    for attack in (SCRIPT, BREAKOUT, "<script>", "<img"):
        assert attack not in html, (where, attack)
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 1, where  # shown, as text


def test_a_task_page_escapes_every_text_it_shows(hostile_run: Path) -> None:
    reader = RunReader(hostile_run)
    [(entry, frames)] = list(reader.tasks())
    assert entry.task_id == TASK_ID
    html = task_page(build_history(entry.task_id, frames), entry.result, record_extra=entry.extra)
    assert_escaped(html, "task_page")
    # Every place holds the attack, so each one was rendered (and escaped), not left out.
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 40
    assert "onerror=alert(1)&gt;" in html and "&#34;&gt;&lt;img src=x" in html


def test_every_written_page_escapes_the_run_s_text(hostile_run: Path) -> None:
    pages = [hostile_run / "report.html", *sorted((hostile_run / "report").glob("*.html"))]
    assert len(pages) == 3  # the report, the index and the one task's page
    assert (hostile_run / "report" / f"{safe_name(TASK_ID)}.html").is_file()
    for page in pages:
        html = page.read_text()
        if page.name == "report.html":  # its own image-load script and plots are the only tags of those kinds
            assert html.count("<script>") == 1 and html.count("<img ") == html.count("data:image/png;base64,")
            html = html.replace("<script>\nwindow.", "").replace('<img src="data:image/png;base64,', "")
        assert_escaped(html, page.name)
