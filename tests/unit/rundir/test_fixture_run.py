"""An old run directory (tests/fixtures/run-v2, made by `tests.support.fixture_run`) still reads: report, trace, export.

What each view must show is read from the fixture's own files with plain
``json`` and ``msgpack``, as a third party would, never through redraft's reader.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import msgpack
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from redraft.cli import main
from redraft.rundir import safe_name
from redraft.views.trace import show_trace
from tests.support.fixture_run import FIXTURE, HTML_TEXT, LOST, REFUSED_SEARCH
from tests.support.report_runs import html_tables, redraft

Raw = dict[str, Any]


def raw_records() -> list[Raw]:
    return [json.loads(line) for line in (FIXTURE / "results.jsonl").read_text().splitlines()]


def raw_tasks() -> list[tuple[Raw, list[Raw]]]:
    """Each record with its frames: the trace bytes [previous record's trace_end, its trace_end)."""
    data = (FIXTURE / "trace.msgpack").read_bytes()
    start, tasks = 0, []
    for record in raw_records():
        end = record["trace_end"]
        tasks.append((record, list(msgpack.Unpacker(io.BytesIO(data[start:end]), raw=False))))
        start = end
    return tasks


def shown_texts(frames: list[Raw]) -> list[str]:
    """The model and check text of a task's frames that a view of it must show."""
    texts: list[str] = []
    for f in frames:
        match f["kind"]:
            case "task":
                texts.append(f["prompt"])
            case "draft":
                texts += [f["text"], *f["edit_errors"], *([f["stage"]] if f["stage"] else [])]
            case "verification":
                texts += [c["detail"] for c in f["checks"]]
                texts += [t for q in f["questions"] for t in (q["question"], q["answer"])]
            case "critique":
                texts += [i["reason"] for i in f["issues"]] + ([f["error"]] if f["error"] else [])
            case "reflection":
                texts.append(f["text"])
            case "decision":
                texts += [f["action"], *([f["detail"]] if f["detail"] else [])]
    return texts


class _Text(HTMLParser):
    """A page's text as a reader sees it (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def page_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return "".join(parser.parts)


def test_the_fixture_holds_frames_of_every_kind_and_each_case() -> None:
    """The fixture is what the other tests rely on: if it is ever re-made, it must still cover everything."""
    tasks = raw_tasks()
    kinds = Counter(f["kind"] for _, frames in tasks for f in frames)
    assert set(kinds) == {
        "task",
        "draft_request",
        "draft",
        "verify_request",
        "verification",
        "critique_request",
        "critique",
        "reflect_request",
        "reflection",
        "decision",
        "result",
    }
    frames = [f for _, fs in tasks for f in fs]
    assert any(f["kind"] == "critique" and f["error"] for f in frames)
    assert any(f["kind"] == "draft" and f["edit_errors"] and f["edits_applied"] for f in frames)
    assert {f["stage"] for f in frames if f["kind"] == "draft"} >= {"outline", "polish"}
    assert any(f["kind"] == "verification" and f["questions"] for f in frames)
    assert {r["error_type"] for r, _ in tasks if r["error"]} == {"RuntimeError", "RayActorError"}
    manifest = json.loads((FIXTURE / "manifest.json").read_text())
    assert manifest["config"]["out"] is None and manifest["run_id"] == "run-v2"
    assert sum((FIXTURE / name).stat().st_size for name in ("trace.msgpack", "results.jsonl")) < 300_000


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fixture") / "run-v2"
    shutil.copytree(FIXTURE, root)
    done = redraft("report", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(root / "report.html")
    return root


def test_report_summary_and_tables_show_the_old_run(reported: Path) -> None:
    summary = json.loads((FIXTURE / "summary.json").read_text())
    records = raw_records()
    tables = html_tables((reported / "report.html").read_text())
    figures = dict((row[0], row[1]) for row in tables["Summary"])
    passed = sum(r["passed"] for r in records)
    assert figures["tasks"] == str(len(records)) == str(summary["tasks"]) == "12"
    assert figures["feedback pass rate, refined"] == f"{passed / len(records):.1%} ({passed}/{len(records)})"
    # A run written before held-out grading has no grade: it says so, it is never scored 0.
    assert figures["graded pass rate, refined"].startswith("none: nothing was held out from the loop")
    assert figures["wall time"] == f"{summary['wall_s']:.1f} s"
    stop = {row[0]: int(row[1]) for row in tables["Stop reasons"][1:]}
    assert stop == Counter(r["stop_reason"] for r in records) == summary["stop_reasons"]
    errors = {row[0]: int(row[1]) for row in tables["Errors by cause"][1:]}
    assert errors == Counter(r["error_type"] for r in records if r["error"]) == summary["errors"]
    roles = {row[0]: int(row[1].replace(",", "")) for row in tables["Tokens and cost per role"][1:]}
    calls: Counter[str] = Counter()
    for r in records:
        calls.update({role: u["calls"] for role, u in r["usage_by_role"].items()})
    assert roles == calls and set(roles) == {"drafter", "critic", "verifier"}
    assert [row[0] for row in tables["Tasks"][1:]] == [r["task_id"] for r in records]


def test_report_task_pages_show_every_round_and_all_the_text(reported: Path) -> None:
    for record, frames in raw_tasks():
        html = (reported / "report" / f"{safe_name(record['task_id'])}.html").read_text()
        rounds = sorted({f["round"] for f in frames if f["kind"] == "decision"})
        assert [int(r) for r in re.findall(r'<h2 id="round-(\d+)">', html)] == rounds
        text = page_text(html)
        for shown in [record["task_id"], *shown_texts(frames), *([record["error"]] if record["error"] else [])]:
            assert shown in text, (record["task_id"], shown)
        assert "<script>alert" not in html and "<b>bold</b>" not in html
    html_page = page_text((reported / "report" / f"{safe_name('rewrite/html')}.html").read_text())
    assert HTML_TEXT in html_page  # shown as text, not markup
    patched = page_text((reported / "report" / f"{safe_name('patch/fix-1')}.html").read_text())
    assert REFUSED_SEARCH in patched


@pytest.mark.parametrize("task_id", [r["task_id"] for r in raw_records()])
def test_trace_shows_every_round_and_all_the_text(task_id: str) -> None:
    record, frames = next((r, fs) for r, fs in raw_tasks() if r["task_id"] == task_id)
    buffer = io.StringIO()
    show_trace(FIXTURE, task_id, Console(file=buffer, width=400))
    printed = buffer.getvalue()
    rounds = sorted({f["round"] for f in frames if f["kind"] == "decision"})
    assert [int(line.split()[1]) for line in printed.splitlines() if line.startswith("round ")] == rounds
    for shown in shown_texts(frames):
        for line in shown.splitlines():
            assert line in printed, line
    if record["error"]:
        assert f"error: {record['error']}" in printed


def test_cli_trace_reads_the_old_run() -> None:
    done = redraft("trace", str(FIXTURE), "reflexion/fix-1")
    assert done.returncode == 0, done.stderr
    reflection = next(f["text"] for _, fs in raw_tasks() for f in fs if f["kind"] == "reflection")
    assert "reflection" in done.stdout and reflection.split()[0] in done.stdout
    assert "decision: stop (threshold)" in done.stdout
    lost = redraft("trace", str(FIXTURE), LOST)
    assert lost.returncode == 0 and "RayActorError: the arbiter died" in lost.stdout


def _read(path: Path, fmt: str) -> list[dict[str, Any]]:
    if fmt == "parquet":
        return pq.read_table(path).to_pylist()
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_results_of_the_old_run(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"results.{fmt}"
    main(["export", str(FIXTURE), "--format", fmt, "--out", str(out)])
    records = raw_records()
    assert capsys.readouterr().out.strip() == f"{out} ({len(records)} rows)"
    rows = _read(out, fmt)
    assert [r["task_id"] for r in rows] == [r["task_id"] for r in records]
    for row, record in zip(rows, records, strict=True):
        for key in ("answer", "text", "stop_reason", "error", "error_type"):
            assert (row[key] or None) == (record[key] or None), key  # csv writes None as ""
        assert str(row["passed"]) == str(record["passed"]) and float(row["score"]) == record["score"]
        assert int(row["rounds"]) == record["rounds"]
        for key, value in record["usage"].items():
            assert float(row[f"usage_{key}"]) == pytest.approx(value)
        for role in ("drafter", "critic", "verifier"):
            calls = record["usage_by_role"].get(role, {}).get("calls", 0)
            assert int(row[f"{role}_calls"]) == calls


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_rounds_of_the_old_run(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"rounds.{fmt}"
    main(["export", str(FIXTURE), "--format", fmt, "--table", "rounds", "--out", str(out)])
    decisions = [f for _, fs in raw_tasks() for f in fs if f["kind"] == "decision"]
    assert capsys.readouterr().out.strip() == f"{out} ({len(decisions)} rows)"
    rows = _read(out, fmt)
    got = [(r["task_id"], int(r["round"]), r["action"], r["reason"] or None) for r in rows]
    assert got == [(d["task_id"], d["round"], d["action"], d["reason"]) for d in decisions]
    assert [float(r["best_score"]) for r in rows] == [d["best_score"] for d in decisions]
