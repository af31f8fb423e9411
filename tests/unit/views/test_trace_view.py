"""`redraft trace`: one task's rounds in the terminal, with coloured diffs and literal model text."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from redraft.cli import main
from redraft.errors import UserError
from redraft.views.trace import show_trace
from tests.support.report_runs import FOREIGN_ID, PLANS, make_foreign_run, make_run, redraft


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("trace") / "run")


def test_trace_shows_rounds_checks_critiques_decisions_and_the_diff(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["trace", str(run_dir), "suite/late"])
    printed = capsys.readouterr().out
    gold = PLANS["suite/late"].gold
    assert [line.split()[1] for line in printed.splitlines() if line.startswith("round ")] == ["0", "1", "2"]
    assert printed.count("decision: continue") == 2 and "decision: stop (threshold)" in printed
    assert f"✗ steps: '{gold - 1} + 1 = {gold + 1}' is wrong; recompute it" in printed
    assert "✓ steps: 1 step(s), each one right" in printed
    assert "critical" in printed and "the sum is <off>" in printed
    assert "best candidate unchanged" in printed  # round 1 tied round 0
    assert f"-Answer: {gold + 1}" in printed and f"+Answer: {gold}" in printed


def test_diff_lines_are_coloured_on_a_terminal(run_dir: Path) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="standard", width=100)
    show_trace(run_dir, "suite/late", console)
    text = buffer.getvalue()
    gold = PLANS["suite/late"].gold
    assert f"\x1b[32m+Answer: {gold}" in text  # green
    assert f"\x1b[31m-Answer: {gold + 1}" in text  # red


def test_model_text_is_printed_literally_not_as_markup(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["trace", str(run_dir), "suite/html"])
    printed = capsys.readouterr().out
    assert "[bold red]not markup[/]" in printed
    assert '<script>alert("pwned")</script>' in printed


def test_error_tasks_show_their_cause(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["trace", str(run_dir), "suite/boom"])
    printed = capsys.readouterr().out
    assert "FAIL" in printed and "error: RuntimeError: backend exploded" in printed
    assert "decision: stop (error)" in printed
    main(["trace", str(run_dir), "suite/lost arbiter"])
    assert "RayActorError: the arbiter died" in capsys.readouterr().out


def test_unknown_kinds_and_fields_are_printed(tmp_path: Path) -> None:
    root = make_foreign_run(tmp_path / "foreign")
    buffer = io.StringIO()
    show_trace(root, FOREIGN_ID, Console(file=buffer, width=120))
    printed = buffer.getvalue()
    for shown in (
        "stage outline",
        "mystery_field",
        "Is 2+2 four?",
        "critique (skeptic, critic-b)",
        "stance: advocate",  # a stance outside the closed set: the frame is kept whole, as a generic one
        "model: critic-a",
        "reflection",
        "I stopped before the answer.",
        "confidence: 0.25",
        "audit_note",
        "retries=0",
        "+Answer: 4",
    ):
        assert shown in printed, shown


def test_an_unknown_task_id_is_a_user_error_naming_known_ones(run_dir: Path) -> None:
    with pytest.raises(UserError, match=r"no task 'nope' in .* \(e\.g\. suite/pass-first, suite/late"):
        show_trace(run_dir, "nope", Console(file=io.StringIO()))


def test_a_near_miss_task_id_gets_the_id_meant(run_dir: Path) -> None:
    with pytest.raises(
        UserError, match=r"no task 'suite/pass-frist' in .* \(did you mean 'suite/pass-first'\? e\.g\. "
    ):
        show_trace(run_dir, "suite/pass-frist", Console(file=io.StringIO()))


@pytest.mark.parametrize("target", ["task", "dir"])
def test_cli_errors_are_one_line_with_exit_code_2(run_dir: Path, tmp_path: Path, target: str) -> None:
    if target == "task":
        done = redraft("trace", str(run_dir), "HumanEval/0")
        expected = f"no task 'HumanEval/0' in {run_dir}"
    else:
        done = redraft("trace", str(tmp_path), "suite/late")
        expected = f"{tmp_path} is not a run directory (no results.jsonl)"
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"redraft: error: {expected}")


def test_trace_seeks_to_the_task_s_own_bytes(run_dir: Path, tmp_path: Path) -> None:
    """Only the task's byte range [previous trace_end, its trace_end) is read: damage elsewhere does not matter."""
    import json
    import shutil

    root = tmp_path / "damaged"
    shutil.copytree(run_dir, root)
    ends = [json.loads(line)["trace_end"] for line in (root / "results.jsonl").read_text().splitlines()]
    data = bytearray((root / "trace.msgpack").read_bytes())
    data[: ends[0]] = b"\xc1" * ends[0]  # 0xc1 is never valid MessagePack
    (root / "trace.msgpack").write_bytes(bytes(data))
    buffer = io.StringIO()
    show_trace(root, "suite/late", Console(file=buffer, width=120))
    assert "decision: stop (threshold)" in buffer.getvalue()
    buffer = io.StringIO()
    show_trace(root, "suite/pass-first", Console(file=buffer, width=120))  # its frames are garbage now
    assert "task suite/pass-first" in buffer.getvalue() and "round 0" not in buffer.getvalue()


def test_the_trace_and_the_report_show_what_each_role_was_sent_system_prompt_included(tmp_path: Path) -> None:
    """Before, no view showed a role's messages: a user could not confirm their SYSTEM_PROMPT was used."""
    import markupsafe

    from redraft import RunConfig, refine
    from redraft.backends.scripted import ScriptedSpec
    from redraft.protocols.messages import Task, encode
    from redraft.rundir import RunStore, safe_name
    from redraft.views.report import write_report
    from tests.support.check_modules import SYSTEM_PROMPT
    from tests.support.resolved import manifest_for

    check = "tests.support.check_modules:exact_answer"
    task = Task(task_id="t", scenario=f"check:{check}", prompt="What is 3 + 4?", reference={"answer": "8"})
    spec = ScriptedSpec(script=lambda request: "Answer: 7" if request.json_schema is None else '{"issues": []}')
    config = RunConfig.build(scenario=task.scenario, samples=1, max_rounds=2, out=str(tmp_path / "run"))
    refinement = refine(task, config, backends={"drafter": spec, "critic": spec})
    store = RunStore.open(tmp_path / "run", manifest_for(config, "run"))
    store.append([encode(m) for m in refinement.trace], refinement.result)
    store.finish(1.0)
    buffer = io.StringIO()
    show_trace(tmp_path / "run", "t", Console(file=buffer, width=200), messages=True)
    printed = buffer.getvalue()
    assert f"drafter's system prompt: {SYSTEM_PROMPT}" in printed
    assert "critic (adversarial)'s system prompt:" in printed
    assert "the drafter's model was sent:" in printed and "[user]" in printed
    write_report(tmp_path / "run")
    page = (tmp_path / "run" / "report" / f"{safe_name('t')}.html").read_text()
    assert "what the drafter's model was sent" in page and "what the critic's model was sent" in page
    assert str(markupsafe.escape(SYSTEM_PROMPT)) in page
