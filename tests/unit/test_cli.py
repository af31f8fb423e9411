"""The `redraft` command: listings, one-line errors with exit code 2, help wherever help is.

The help as the docs show it is tested with every other terminal session of the docs (tests/unit/test_docs.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import typing
from pathlib import Path

import pytest

from redraft import __version__
from redraft.cli import main
from redraft.config import GROUPS, description, flag
from tests.support.paths import REPO_ROOT


def redraft(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def in_process(*args: str) -> int:
    """The command's exit code, run in this process (its output goes to the test's captured streams)."""
    try:
        main(list(args))
    except SystemExit as ended:
        return int(ended.code or 0)
    return 0


def test_scenarios_lists_one_name_per_line() -> None:
    done = redraft("scenarios")
    assert done.returncode == 0
    # A parametrized family is listed by its pattern.
    assert done.stdout.splitlines() == [
        "arithmetic",
        "check:MODULE:FUNCTION",
        "cited_answer",
        "constrained_writing",
        "humaneval",
        "incident",
        "json_extract",
        "pipeline",
        "reasoning_gym:NAME",
        "sql",
    ]


def test_strategies_lists_names_first() -> None:
    done = redraft("strategies")
    assert done.returncode == 0
    names = done.stdout.split("\n\n")[0].splitlines()
    assert names == [
        "adaptive",
        "adversarial",
        "best_of_n",
        "cove",
        "debate",
        "none",
        "plan_execute",
        "self_consistency",
        "self_refine",
        "stepwise",
        "verifier_only",
    ]
    assert "separate critic" in done.stdout and "two critics" in done.stdout.lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "sudoku"],
            "unknown scenario 'sudoku' (known: arithmetic, check:MODULE:FUNCTION, cited_answer, constrained_writing, "
            "humaneval, incident, json_extract, pipeline, reasoning_gym:NAME, sql)",
        ),
        (["run", "arithmetic", "--strategy", "vibes"], "unknown strategy 'vibes'"),
        (["run", "arithmetic", "--model", "gpt:4"], "unknown backend spec 'gpt:4'"),
        (
            ["run", "arithmetic", "--critic", "local:/no/such/model.gguf"],
            "GGUF model file not found: /no/such/model.gguf",
        ),
        (["run", "arithmetic", "--drafter", "local:pyproject.toml"], "needs a .gguf file"),
        (["run", "arithmetic", "--samples", "0"], "--samples must be in [1, 1,000], got 0"),
        (["run", "arithmetic", "--samples", "many"], "Invalid value for '--samples'"),
        (["run", "arithmetic", "--threshold", "1.5"], "--threshold must be in [0, 1], got 1.5"),
        (["run", "arithmetic", "--max-rounds", "0"], "--max-rounds must be in [1, 1,000], got 0"),
        (["run", "arithmetic", "--limit", "-3"], "--limit must be in [1, 1,000,000], got -3"),
        # An alias reaches its field: the bound is the field's, named by its flag.
        (["run", "arithmetic", "--max-in-flight", "0"], "--max-tasks-in-flight must be in [1, 1,000,000], got 0"),
        (
            ["run", "arithmetic", "--max-tokens", "1" + "0" * 23],
            "--max-tokens must be in [1, 1,000,000], got 100" + ",000" * 7,
        ),
        (["run", "arithmetic", "--budget-usd", "nan"], "--budget-usd must be a finite number, got nan"),
        (["run", "arithmetic", "--task-budget-usd", "inf"], "--task-budget-usd must be a finite number, got inf"),
        (["run", "arithmetic", "--budget-usd", "-1"], "--budget-usd must be in (0, 1,000,000,000], got -1"),
        (["run", "arithmetic", "--frobnicate"], "No such option: --frobnicate"),
        (["run", "arithmetic", "--model", "scripted:nope"], "scripted backend needs 'scripted:MODULE:FUNC'"),
        # A near miss is answered with the name meant.
        (["run", "arithmetc"], "unknown scenario 'arithmetc' (did you mean 'arithmetic'? known: arithmetic, "),
        (
            ["run", "reasoning-gym:leg_counting"],
            "unknown scenario 'reasoning-gym:leg_counting' (did you mean 'reasoning_gym:leg_counting'? known: ",
        ),
        (
            ["run", "arithmetic", "--strategy", "self-refine"],
            "unknown strategy 'self-refine' (did you mean 'self_refine'? known: adaptive, adversarial, ",
        ),
        (
            ["run", "arithmetic", "--critic", "openai-compatibe:m@http://127.0.0.1:9/v1"],
            "unknown backend spec 'openai-compatibe:m@http://127.0.0.1:9/v1' "
            "(did you mean 'openai-compatible:m@http://127.0.0.1:9/v1'? known: ",
        ),
        (
            ["run", "arithmetic", "--model", "local?rmp=5"],
            "unknown rate limit 'rmp' in 'local?rmp=5' (did you mean 'rpm'?",
        ),
        (["export", "no-such-run", "--format", "parqet"], "unknown --format 'parqet' (did you mean 'parquet'? known: "),
        (["export", "no-such-run", "--table", "round"], "unknown --table 'round' (did you mean 'rounds'? known: "),
        (
            ["compare", "arithmetic", "--arms", "adversarial", "--match", "call"],
            "unknown --match 'call' (did you mean 'calls'? known: calls, tokens, usd)",
        ),
        (["tune", "arithmetic", "--split", "0.5,0.5"], "--split '0.5,0.5': three shares, each in (0, 1), summing to 1"),
        (["tune", "arithmetic", "--split", "a,b,c"], "--split 'a,b,c': give three shares, train,validation,test"),
        (
            ["tune", "arithmetic", "--sections", "draft_sytem"],
            "--sections: unknown section 'draft_sytem' (did you mean 'draft_system'? known: ",
        ),
        (["tune", "arithmetic", "--sections", "tune_system"], "--sections: unknown section 'tune_system'"),
        (["tune", "arithmetic", "--minibatch", "0"], "--minibatch must be at least 1, got 0"),
        (["tune", "arithmetic", "--parallel", "0"], "--parallel must be at least 1, got 0"),
        (["tune", "arithmetic", "--oracle-feedback"], "--oracle-feedback would let the held-out grade into the loop"),
        (["tune", "arithmetic", "--samples", "0"], "--samples must be in [1, 1,000], got 0"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = redraft(*args, "--out", str(tmp_path / "run"), cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("redraft: error: ")
    assert message in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()  # nothing was started or written


@pytest.mark.parametrize(
    ("args", "missing"),
    [(["report"], "RUN_DIR"), (["export"], "RUN_DIR"), (["trace"], "RUN_DIR"), (["trace", "runs/x"], "TASK_ID")],
)
def test_a_missing_argument_is_named_in_one_line(args: list[str], missing: str) -> None:
    done = redraft(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"redraft: error: Missing argument '{missing}'. (see `python -m redraft.cli {args[0]} --help`)"
    ]


def test_version_prints_the_package_version() -> None:
    done = redraft("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"redraft {__version__}\n", "")
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == declared


@pytest.mark.parametrize(
    "command", [[], ["run"], ["compare"], ["report"], ["trace"], ["export"], ["scenarios"], ["strategies"]]
)
def test_dash_h_is_help_wherever_help_is(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    shown = []
    for asked in ("--help", "-h"):
        assert in_process(*command, asked) == 0
        shown.append(capsys.readouterr())
    assert shown[0].err == shown[1].err == ""
    assert "Usage:" in shown[0].out and shown[1].out == shown[0].out


def help_at_80_columns(command: str) -> str:
    env = os.environ | {"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "redraft.cli", command, "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def panels_of(shown: str) -> dict[str, str]:
    """Each option's panel, read from the help's boxes: ``╭─ Loop ─...`` opens one, ``│ --samples ...`` is in it."""
    panel, found = "", {}
    for line in shown.splitlines():
        if opened := re.match(r"╭─ (\w[\w ]*?) ─", line):
            panel = opened[1]
        elif option := re.match(r"│ (--[\w-]+)", line):
            found[option[1]] = panel
    return found


def config_options() -> list[tuple[list[str], str]]:
    """Every option a config field makes (its flag, --no- form, aliases and short name) and the field's panel."""
    options = []
    for struct in GROUPS.values():
        for name, hint in typing.get_type_hints(struct).items():
            extra = description(struct, name).extra or {}
            if extra.get("argument"):
                continue
            names = [flag(name), *extra.get("aliases", []), *([extra["short"]] if "short" in extra else [])]
            names += [f"--no-{flag(name)[2:]}"] if hint is bool else []
            options.append((names, extra["panel"]))
    return options


@pytest.mark.parametrize("command", ["run", "compare", "tune"])
def test_help_at_80_columns_groups_every_option_whole_in_its_panel(command: str) -> None:
    shown = help_at_80_columns(command)
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "…" not in shown  # nothing cut, a flag name least of all
    panels = panels_of(shown)
    for names, panel in config_options():
        if command == "compare" and names[0] == "--strategy":
            continue  # the arms choose the strategies
        for name in names:
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", shown), name
        assert panels[names[0]] == panel, names[0]
    assert {panels["--model"], panels["--drafter"], panels["--critic"]} == {"Model"}
    assert {panels["--check"], panels["--grade"], panels["--tasks"]} == {"Tasks"}
    assert list(dict.fromkeys(panels.values()))[-5:] == ["Model", "Loop", "Budgets", "Output", "Cluster"]
    if command == "compare":
        own = ["--arms", "--arms-file", "--baseline-samples", "--match", "--repeats", "--baseline", "--fail-if-worse"]
        assert {panels[name] for name in own} == {"Comparison"}
        assert "[default: 16]" in shown  # the baseline's N, said where the comparison keeps it
    if command == "tune":
        own = ["--proposer", "--sections", "--split", "--minibatch", "--max-proposals", "--parallel", "--examples"]
        assert {panels[name] for name in own} == {"Tune"}
        assert "[default: draft_system,draft_task]" in shown and "[default: 0.4,0.3,0.3]" in shown


@pytest.mark.parametrize("command", ["run", "compare", "tune"])
def test_defaults_read_as_values(command: str) -> None:
    shown = help_at_80_columns(command)
    assert "[default: (" not in shown
    defaults = re.findall(r"\[default: ([^\]]+)\]", shown)
    # --model, --drafter and --critic: the config's default model; -k: the config's 3 drafts a round.
    assert defaults.count("local") == 3 and "3" in defaults and "no-patch" in defaults and "cache" in defaults


def test_a_default_the_help_shows_is_not_taken_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from redraft.actors import driver
    from redraft.config import RunConfig
    from redraft.errors import UserError

    seen: list[RunConfig] = []

    def stop(config: RunConfig, **_: object) -> None:
        seen.append(config)
        raise UserError("stopped before running")

    monkeypatch.setattr(driver, "run", stop)
    assert in_process("run", "arithmetic", "--model", "scripted:m:f", "--critic", "local", "--no-cache") == 2
    experiment, runtime = seen[0].experiment, seen[0].runtime
    # --model fills the roles not given (the drafter's shown default, local, is not given); --critic is.
    assert (experiment.drafter, experiment.critic, experiment.verifier) == ("scripted:m:f", "local", None)
    assert (experiment.samples, runtime.cache, runtime.max_tasks_in_flight) == (3, False, None)


def test_the_end_of_a_run_says_where_its_report_is_and_what_the_embedded_model_is() -> None:
    """Before, a run on the embedded model ended in a bleak table with no word of why or what next."""
    from pathlib import Path

    from redraft.cli._next_steps import next_steps

    embedded = next_steps(Path("runs/x"), ["local", "local"], first_task="arithmetic-0000")
    assert embedded[0] == "next: redraft report runs/x   (then open runs/x/report.html in a browser)"
    assert embedded[1].strip() == "redraft trace runs/x arithmetic-0000   (one task's rounds, with diffs)"
    said = " ".join(embedded)
    assert "SmolLM2-135M" in said and "expect low scores" in said and "--model openai:gpt-4o-mini" in said
    served = next_steps(Path("runs/my run"), ["openai:gpt-4o-mini", "openai:gpt-4o-mini"])
    assert served == ["next: redraft report 'runs/my run'   (then open runs/my run/report.html in a browser)"]


def test_a_tune_dry_run_says_its_splits_and_estimate_and_calls_no_model(tmp_path: Path) -> None:
    done = redraft(
        "tune", "arithmetic", "--limit", "20", "--strategy", "best_of_n", "--samples", "1", "--max-rounds", "1",
        "--model", "scripted:tests.support.replies:always_seven", "--max-proposals", "3", "--minibatch", "2",
        "--dry-run", "--out", str(tmp_path / "tune"), cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    # 20 tasks: 8 train, 6 validation, 6 test. One draft a task; the worst case: the start on validation (6),
    # 3 iterations of 2 x 2 minibatch tasks, 6 validation tasks and a proposal (33), both prompts on test (12).
    assert "8 train, 6 validation, 6 test tasks; up to 3 proposals, 2 at once" in said
    assert "estimate: about 0 s expected, 0 s at most; 51 calls expected, 51 at most (the models cost no USD)" in said
    assert "dry run: no model was called and nothing was written" in said
    assert not (tmp_path / "tune").exists()


def test_a_tune_resumed_with_other_settings_is_refused_naming_the_first(tmp_path: Path) -> None:
    args = ["tune", "arithmetic", "--limit", "20", "--model", "scripted:tests.support.replies:always_seven"]
    args += ["--out", str(tmp_path / "tune")]
    # Begun (its manifest and splits written), then refused by a budget that cannot pay for the verdict.
    assert redraft(*args, "--minibatch", "2", "--budget-calls", "1", cwd=REPO_ROOT).returncode == 2
    assert (tmp_path / "tune" / "tune-manifest.json").exists()
    args.append("--dry-run")
    assert redraft(*args, "--minibatch", "2", "--max-proposals", "9", cwd=REPO_ROOT).returncode == 0  # may grow
    done = redraft(*args, "--minibatch", "3", cwd=REPO_ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "holds a tune with other settings (minibatch: 2 then, 3 now); use another --out"
    )


def test_a_tune_whose_budget_cannot_pay_for_its_verdict_is_refused_before_it_starts(tmp_path: Path) -> None:
    # 20 tasks: the start on 6 validation tasks and both prompts on 6 test tasks, a call each: 18 at worst.
    args = ["tune", "arithmetic", "--limit", "20", "--strategy", "best_of_n", "--samples", "1", "--max-rounds", "1"]
    args += ["--model", "scripted:tests.support.replies:always_seven", "--out", str(tmp_path / "tune")]
    done = redraft(*args, "--budget-calls", "17", cwd=REPO_ROOT)
    assert done.returncode == 2
    assert "the budget cannot pay for the starting prompts on validation and the verdict" in done.stderr
    assert "(at worst 18 calls" in done.stderr
    assert redraft(*args, "--budget-calls", "18", "--dry-run", cwd=REPO_ROOT).returncode == 0
