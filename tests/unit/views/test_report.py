"""`redraft report`: figures that agree with the run, a page per task, escaping, embedded plots."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import msgspec
import pytest
from PIL import Image

from redraft.protocols.messages import WIRE_VERSION, CritiqueRequest, Decision, DraftRequest
from redraft.rundir import KnownFrame, RunReader, build_history, safe_name
from redraft.rundir.frames import decode_frame
from redraft.views import report
from redraft.views.report import RunFigures, task_row, write_report
from tests.support.paths import GOLDEN
from tests.support.report_runs import HTML_TEXT, PLANS, html_tables, make_foreign_run, make_run, records, redraft


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_run(tmp_path_factory.mktemp("report") / "run")
    write_report(root)
    return root


def test_summary_and_tables_agree_with_summary_json(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    tables = html_tables((run_dir / "report.html").read_text())
    figures = dict((row[0], row[1]) for row in tables["Summary"])
    assert figures["tasks"] == "6" == str(summary["tasks"])
    assert figures["feedback pass rate, round 0"] == f"{summary['initial_pass_rate']:.1%} (1/6)"
    assert figures["feedback pass rate, refined"] == f"{summary['pass_rate']:.1%} (3/6)"
    # Four tasks were graded: the one that exploded and the one whose arbiter was lost have no candidate.
    assert (summary["graded"], summary["graded_passed"], summary["initial_graded_passed"]) == (4, 3, 1)
    assert figures["graded pass rate, round 0"] == "25.0% (1/4; 2 not graded)"
    assert figures["graded pass rate, refined"] == "75.0% (3/4; 2 not graded)"
    assert figures["fixed / broken (graded)"] == "2 / 0"  # late and html were fixed
    assert figures["model calls"].startswith(f"{summary['usage']['calls']:,} ")
    stop = {row[0]: int(row[1]) for row in tables["Stop reasons"][1:]}
    assert stop == summary["stop_reasons"] == {"threshold": 3, "no_improvement": 1, "error": 2}
    roles = {row[0]: row for row in tables["Tokens and cost per role"][1:]}
    assert set(roles) == set(summary["usage_by_role"]) == {"drafter", "critic"}
    for role, usage in summary["usage_by_role"].items():
        assert roles[role][1] == f"{usage['calls']:,}"
        assert roles[role][6] == f"${usage['cost_usd']:,.4f}"
    errors = {row[0]: int(row[1]) for row in tables["Errors by cause"][1:]}
    assert errors == summary["errors"] == {"RuntimeError": 1, "RayActorError": 1}


def test_slowest_and_most_expensive_tasks_are_ranked(run_dir: Path) -> None:
    tables = html_tables((run_dir / "report.html").read_text())
    recs = records(run_dir)
    slowest = [row[0] for row in tables["Slowest tasks"][1:]]
    by_wall = sorted(recs, key=lambda r: -float(r["wall_s"]))  # type: ignore[arg-type]
    assert [float(row[8]) for row in tables["Slowest tasks"][1:]] == [float(r["wall_s"]) for r in by_wall]  # type: ignore[arg-type]
    assert slowest[0] in {"suite/late", "suite/never"}  # three rounds each: the most clock ticks
    costliest = [row[0] for row in tables["Most expensive tasks"][1:]]
    top = max(recs, key=lambda r: (r["usage"]["cost_usd"], r["usage"]["input_tokens"]))  # type: ignore[index]
    assert costliest[0] == top["task_id"] == "suite/never"  # never fixed: every round paid for


def test_pass_rate_per_round_is_cumulative_and_ends_at_the_final_pass_rate(run_dir: Path) -> None:
    figures = RunFigures()
    reader = RunReader(run_dir)
    for i, (entry, frames) in enumerate(reader.tasks()):
        history = build_history(entry.task_id, frames)
        figures.add(task_row(i, entry.result), entry.result)
        figures.add_trace(entry.result, history.passed_by_round(), history.graded_by_round())
    rates, graded, active = figures.pass_curves()
    summary = msgspec.to_builtins(reader.saved_summary())
    # Round 0: pass-first; round 1: + html (fixed at 1); round 2: + late (fixed at 2).
    assert rates == pytest.approx([1 / 6, 2 / 6, 3 / 6])
    assert rates[0] == pytest.approx(summary["initial_pass_rate"])
    assert rates[-1] == pytest.approx(summary["pass_rate"])
    # Graded: of the 4 tasks with gold (the exploded and the lost ones have no candidate to grade).
    assert graded == pytest.approx([1 / 4, 2 / 4, 3 / 4])
    assert graded[0] == pytest.approx(summary["initial_graded_pass_rate"])
    assert graded[-1] == pytest.approx(summary["graded_pass_rate"])
    # Decided in round 0: all but the task lost with its arbiter; in round 2: late and never.
    assert active == pytest.approx([5 / 6, 3 / 6, 2 / 6])


def test_every_task_has_a_page_with_its_rounds_and_decisions(run_dir: Path) -> None:
    reader = RunReader(run_dir)
    report_html = (run_dir / "report.html").read_text()
    for entry, frames in reader.tasks():
        page = run_dir / "report" / f"{safe_name(entry.task_id)}.html"
        assert page.is_file(), entry.task_id
        text = page.read_text()
        rounds = sorted(
            {f.message.round for f in frames if isinstance(f, KnownFrame) and isinstance(f.message, Decision)}
        )
        assert re.findall(r'<h2 id="round-(\d+)">', text) == [str(r) for r in rounds]
        assert text.count('class="decision') == len(rounds)
        assert f'href="report/{safe_name(entry.task_id)}.html"' in report_html
    # Ids hold "/" and spaces; names are safe and distinct.
    names = {safe_name(r["task_id"]) for r in records(run_dir)}  # type: ignore[arg-type]
    assert len(names) == 6 and all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names)
    assert safe_name("a/b") != safe_name("a_b")
    index = (run_dir / "report" / "index.html").read_text()
    assert index.count("<tr><td>") == 6


def test_task_page_shows_candidates_checks_critiques_and_the_diff(run_dir: Path) -> None:
    text = (run_dir / "report" / f"{safe_name('suite/late')}.html").read_text()
    gold = PLANS["suite/late"].gold
    # Round 1's answer (gold + 2) tied round 0's (gold + 1), so the best changed only in round 2.
    removed, added = f'<span class="del">-Answer: {gold + 1}</span>', f'<span class="add">+Answer: {gold}</span>'
    assert removed in text and added in text and text.index(removed) < text.index(added)
    assert text.count("Best candidate changed") == 1
    assert (
        "steps" in text and "answer_follows" in text and "&lt;b&gt;Answer&lt;/b&gt;" in text
    )  # a check, and a critique's quote
    assert "Decision: stop</b> (threshold)" in text
    assert "what the drafter was told (revision)" in text


def test_model_text_is_escaped_everywhere(run_dir: Path) -> None:
    pages = [run_dir / "report.html", *sorted((run_dir / "report").glob("*.html"))]
    for page in pages:
        assert "<script>alert" not in page.read_text(), page.name
    html_page = (run_dir / "report" / f"{safe_name('suite/html')}.html").read_text()
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html_page  # markupsafe's entity for a quote
    assert "&lt;b&gt;bold&lt;/b&gt;" in html_page and "<b>bold</b>" not in html_page
    assert HTML_TEXT not in html_page
    # The one script in the report is its own image-load marker; task pages have none.
    assert (run_dir / "report.html").read_text().count("<script") == 1
    assert "<script" not in html_page


def test_plots_are_embedded_decodable_images(run_dir: Path) -> None:
    text = (run_dir / "report.html").read_text()
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]+)"', text)
    assert [alt for _, alt in images] == [
        "graded and feedback pass rate per round",
        "feedback score distribution",
        "stop reasons",
        "tokens per role",
    ]
    for data, alt in images:
        image = Image.open(io.BytesIO(base64.b64decode(data)))
        image.load()
        assert image.format == "PNG" and image.width >= 400 and image.height >= 150, alt
        assert sum(1 for n in image.convert("L").histogram() if n) > 10, f"{alt} is blank"


def test_pages_are_self_contained(run_dir: Path) -> None:
    for page in [run_dir / "report.html", *(run_dir / "report").glob("*.html")]:
        text = page.read_text()
        assert not re.search(r'(src|href)="(https?:)?//', text), page.name
        assert "<link" not in text and "@import" not in text


def test_unknown_kinds_and_fields_render_without_loss(tmp_path: Path) -> None:
    root = make_foreign_run(tmp_path / "foreign")
    write_report(root)  # no summary.json: figures come from the records
    tables = html_tables((root / "report.html").read_text())
    assert dict((r[0], r[1]) for r in tables["Summary"])["feedback pass rate, refined"] == "100.0% (1/1)"
    page = (root / "report" / f"{safe_name('future/1')}.html").read_text()
    for shown in (
        "stage <b>outline</b>",  # a stage on a draft
        "mystery_field",  # an unknown field of a known kind
        "depth",
        "Is 2+2 four?",  # verification questions and answers
        "yes, four",
        "skeptic, critic-b",  # two critics on one candidate
        "<th>stance</th><td>advocate</td>",  # a stance outside the closed set: kept whole, as a generic frame
        "<th>model</th><td>critic-a</td>",
        "reflection",  # an unknown kind inside a round
        "I stopped before the answer.",
        "confidence",  # an unknown decision field
        "audit_note",  # an unknown kind outside any round
        "<th>retries</th><td>0</td>",  # a zero may be data in a kind of unknown meaning
        "a frame with no round",
        "Plan: add &lt;two&gt; numbers.",
    ):
        assert shown in page, shown
    assert '<span class="add">+Answer: 4</span>' in page


def test_max_pages_caps_the_task_pages_and_says_so(run_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "capped"
    shutil.copytree(run_dir, root)
    shutil.rmtree(root / "report")
    write_report(root, max_pages=2)
    pages = sorted(p.name for p in (root / "report").glob("*.html"))
    assert len(pages) == 3 and "index.html" in pages
    text = (root / "report.html").read_text()
    assert "first 2 tasks only (--max-pages;" in text
    assert (
        text.count('href="report/suite_')
        == 2
        + sum(  # preview links, plus top-N rows for those two
            1
            for row in html_tables(text)["Slowest tasks"][1:] + html_tables(text)["Most expensive tasks"][1:]
            if row[0] in {"suite/pass-first", "suite/late"}
        )
    )


def test_a_large_run_lists_a_preview_and_every_task_in_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_run(tmp_path / "big", copies=8)  # 48 tasks
    monkeypatch.setattr(report, "INDEX_ROWS", 10)
    write_report(root, max_pages=0)
    text = (root / "report.html").read_text()
    assert "10 of 48 tasks shown" in text
    assert len(html_tables(text)["Tasks"]) == 1 + 10
    assert (root / "report" / "index.html").read_text().count("<tr><td>") == 48
    assert [p.name for p in (root / "report").glob("*.html")] == ["index.html"]


def test_cli_report_writes_and_prints_the_path(run_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "cli"
    shutil.copytree(run_dir, root)
    (root / "report.html").unlink()
    done = redraft("report", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(root / "report.html")
    assert (root / "report.html").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "/no/such/run"], "/no/such/run is not a run directory (no such directory)"),
        (["report", "."], ". is not a run directory (no results.jsonl)"),
        (["report", "README.md"], "README.md is not a run directory (not a directory)"),
        (["report", "RUN", "--max-pages", "-1"], "--max-pages must be at least 0, got -1"),
    ],
)
def test_cli_report_errors_are_one_line(args: list[str], message: str, run_dir: Path) -> None:
    done = redraft(*[str(run_dir) if a == "RUN" else a for a in args])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"redraft: error: {message}"]


def test_a_run_with_no_finished_task_yet_still_renders(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    (root / "results.jsonl").write_text('{"task_id": "torn", "pass')  # a torn first line is not a task
    write_report(root)
    tables = html_tables((root / "report.html").read_text())
    assert dict((r[0], r[1]) for r in tables["Summary"])["tasks"] == "0"
    assert len(tables["Tasks"]) == 1  # the header only


def test_the_golden_frames_render() -> None:
    """Every saved frame of the wire version shows, on a page and in the terminal."""
    from rich.console import Console

    from redraft.views.report import task_page
    from redraft.views.trace import render

    folder = GOLDEN / f"v{WIRE_VERSION}"
    order = ["task", "draft_request", "draft", "verify_request", "verification", "critique_request", "critique"]
    frames = [decode_frame(p.read_bytes()) for p in sorted(folder.glob("*.msgpack"))]
    frames.sort(key=lambda f: order.index(f.kind) if f.kind in order else len(order))
    history = build_history("t-1", frames)
    assert history.result is not None
    record = history.result.message
    page = task_page(history, record)
    console = Console(file=io.StringIO(), width=120)
    for renderable in render(history, record):
        console.print(renderable)
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    expected = ["Mia has 3 apples...", "3 + 4 = 7", "3 + 4 = 8", "node-a"]
    expected += ["calls budget spent: 9 of 9", "I added wrong.", "What is 3 + 4?", "edit 2 did not apply"]
    expected += ["skeptic", "patch", "the answer 7 is right"]  # the last, the held-out grade
    for text in expected:
        assert text in page, text
        assert text.replace("&gt;", ">") in printed, text


@pytest.mark.parametrize(
    ("strategy", "shown"),
    [
        ("stepwise", ["stage <b>outline</b>", "stage <b>polish</b>"]),
        ("verifier_only", ["<b>reflection</b>", "reflect_request"]),
        ("debate", ["(adversarial, gpt-4o-mini)", "(skeptic, gpt-4o-mini)", "opponent"]),
        ("cove", ["Verification questions", "Is &lt;one&gt; added to the first number?"]),
        ("adaptive", ["intent", "fresh", "best_score"]),
    ],
)
def test_every_strategy_s_frames_render(strategy: str, shown: list[str], tmp_path: Path) -> None:
    """The kinds and fields each strategy adds show on the task pages (the trace of a real in-process run)."""
    root = make_run(tmp_path / strategy, max_rounds=3, strategy=strategy)
    write_report(root)
    page = (root / "report" / f"{safe_name('suite/never')}.html").read_text()
    rounds = sorted(
        {
            f.message.round
            for _, frames in RunReader(root).tasks()
            for f in frames
            if isinstance(f, KnownFrame) and isinstance(f.message, Decision) and f.message.task_id == "suite/never"
        }
    )
    assert re.findall(r'<h2 id="round-(\d+)">', page) == [str(r) for r in rounds] and len(rounds) >= 2
    for text in shown:
        assert text in page, text


def test_an_adaptive_run_shows_how_its_calls_were_spent_as_its_frames_say(run_dir: Path, tmp_path: Path) -> None:
    root = make_run(tmp_path / "adaptive", max_rounds=4, strategy="adaptive")
    write_report(root)
    tables = html_tables((root / "report.html").read_text())
    [header, *rows] = tables["How the calls were spent"]
    split = next(i for i, r in enumerate(rows) if r[0].startswith("tasks (in the order"))
    rows, parts = rows[:split], rows[split + 1 :]  # the second table: the calls over the batch
    assert header[:3] == ["feedback state", "action", "calls"]
    frames = [f.message for _, fs in RunReader(root).tasks() for f in fs if isinstance(f, KnownFrame)]
    chosen = [m for m in frames if isinstance(m, DraftRequest) and m.intent is not None]
    critiques = sum(isinstance(m, CritiqueRequest) for m in frames)
    assert sum(int(r[3]) for r in rows) == len(chosen) and sum(int(r[4]) for r in rows) == critiques
    assert sum(int(r[2]) for r in rows) == len(chosen) + critiques == sum(int(c) for p in parts for c in p[1:])
    first = next(r for r in rows if r[:2] == ["first", "fresh"])
    assert int(first[3]) == sum(m.round == 0 for m in chosen) and first[5] == "0"  # nothing to raise yet
    assert "calls by action over the batch" in (root / "report.html").read_text()
    assert "How the calls were spent" not in (run_dir / "report.html").read_text()  # adversarial chose none


def test_a_long_run_s_report_reads_the_traces_of_a_spread_sample_and_counts_every_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a report read every task's trace: 45 s for 10,000 tasks, hours for a million."""
    root = make_run(tmp_path / "long", copies=4)  # 24 tasks
    read: list[str] = []
    trace_of = RunReader.trace_of
    monkeypatch.setattr(RunReader, "trace_of", lambda self, e, t=None: read.append(e.task_id) or trace_of(self, e, t))
    monkeypatch.setattr(report, "TRACED", 6)
    write_report(root, max_pages=0)
    assert len(read) == 6  # every 4th task's trace
    text = (root / "report.html").read_text()
    assert "read from the traces of 6 tasks spread evenly over the run" in text
    assert html_tables(text)["Summary"][0] == ["tasks", "24"]  # every result counted


def test_the_index_lists_a_bounded_number_of_tasks_and_says_how_to_see_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_run(tmp_path / "listed", copies=2)  # 12 tasks
    monkeypatch.setattr(report, "MAX_INDEX", 5)
    write_report(root, max_pages=0)
    index = (root / "report" / "index.html").read_text()
    assert index.count("<tr><td>") == 5 and "The first 5 tasks are listed" in index


def test_a_page_left_out_is_written_on_demand(run_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "on-demand"
    shutil.copytree(run_dir, root)
    shutil.rmtree(root / "report")
    write_report(root, max_pages=0)
    assert [p.name for p in (root / "report").glob("*.html")] == ["index.html"]
    done = redraft("report", str(root), "--task", "suite/late")
    page = root / "report" / f"{safe_name('suite/late')}.html"
    assert done.returncode == 0 and done.stdout.strip() == str(page)
    assert "suite/late" in page.read_text() and "round 2" in page.read_text()
    missing = redraft("report", str(root), "--task", "suite/nope")
    assert missing.returncode == 2 and "no task 'suite/nope'" in missing.stderr
