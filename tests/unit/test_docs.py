"""The documentation cannot drift from the code: the site builds with every warning an error, every link
lands, the references are generated from the code, and every example on every page runs as shown.

How each kind of fenced block is checked (see `tests.support.doc_pages` for the marks above a block):
``python`` is executed, a page's blocks in order in one namespace; ``bash`` is parsed, each
``redraft`` command by the real command line and validated as the command would (`doc_examples`);
``console`` is run, each ``$ redraft ...`` in a subprocess, and its output compared with the block's,
unless marked not run (then parsed); ``json``, ``toml``, ``yaml`` and ``text`` are read as the files
they show. The examples share one workspace, where every ``file:`` block is written and ``runs/demo``
is a finished run of the demo's tasks, written by a scripted model without Ray.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import redraft
from redraft import RunConfig
from redraft.backends import ScriptedSpec
from redraft.backends.base import ChatRequest
from redraft.backends.registry import BACKENDS
from redraft.engine._refine import refine_trace
from redraft.engine.grader import Grader
from redraft.engine.resolution import arbiter_settings
from redraft.protocols.messages import Result, decode_as, encode
from redraft.rundir import RunReader, RunStore
from redraft.scenarios import get_scenario
from redraft.scenarios._base import SCENARIOS
from redraft.strategies._base import STRATEGIES
from redraft.views.export import export
from redraft.views.summary_table import summary_rows
from tests.support.doc_examples import COMMAND, check_command, check_data, commands, options
from tests.support.doc_pages import LANGUAGES, Block, blocks, code_spans, dead_links, pages, prose, shown
from tests.support.harness import scripted_arbiter
from tests.support.paths import DOCS, REPO_ROOT
from tests.support.replies import CRITIQUE, is_critique, round_of, task_of, worked
from tests.support.resolved import manifest_for

ALL_BLOCKS = [block for page in pages() for block in blocks(page)]
PYTHON_PAGES = sorted({b.page for b in ALL_BLOCKS if b.language == "python"})
NOT_RUN_AT_MOST = 3
"""Only the recorded output of long runs is not run: the demo, a comparison, a humaneval run."""


def stand_in(request: ChatRequest) -> str:
    """The embedded model's stand-in: an arithmetic answer, one step off in round 0, right once revised."""
    if is_critique(request):
        return json.dumps(CRITIQUE)
    return worked(task_of(request), off=0 if round_of(request) >= 1 else 1)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every ``file:`` block written out, and ``runs/demo``: the demo's config, finished and exported."""
    root = tmp_path_factory.mktemp("examples")
    written: dict[str, str] = {}
    for block in (b for b in ALL_BLOCKS if b.file is not None):
        assert written.setdefault(block.file, block.text) == block.text, f"{block.where}: two texts of {block.file}"
        (root / block.file).write_text(block.text, encoding="utf-8")
    for block in (b for b in ALL_BLOCKS if b.writes is not None):  # a program that writes a file (Parquet, say)
        write_by_program(block, root)
    config = RunConfig.build(scenario="arithmetic", limit=30, out="runs/demo")
    demo = root / "runs" / "demo"
    store = RunStore.open(demo, manifest_for(config, demo.name))
    arbiter = scripted_arbiter(stand_in, arbiter_settings(config))
    for task in list(get_scenario("arithmetic").tasks(seed=0))[:30]:
        trace = asyncio.run(refine_trace(arbiter, Grader("arithmetic"), task))
        store.append([encode(m) for m in trace], decode_as(encode(trace[-1]), Result))
    store.finish(wall_s=1.0)
    export(demo, "parquet")
    return root


def write_by_program(block: Block, root: Path) -> None:
    """Run a ``python`` block marked ``writes: NAME`` in ``root``, where it must leave the file NAME."""
    here = Path.cwd()
    os.chdir(root)
    try:
        exec(compile(block.text, block.where, "exec"), {"__name__": "docs_example"})
    finally:
        os.chdir(here)
    assert block.writes is not None and (root / block.writes).is_file(), f"{block.where} did not write {block.writes}"


@pytest.fixture
def in_workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The examples' directory as the working directory and on the import path, with registrations kept local,
    API keys set (to nothing usable), Azure's endpoint and version as the examples export them, and the ``local``
    backend answered by `stand_in`."""
    monkeypatch.chdir(workspace)
    monkeypatch.syspath_prepend(str(workspace))
    for registry in (SCENARIOS, STRATEGIES, BACKENDS):
        registry.names()  # loaded before copying, so that the copy is whole
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.setenv(key, "sk-docs-examples-not-a-key")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://my-resource.openai.azure.com")  # as the examples export
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    embedded = BACKENDS.get("local")
    monkeypatch.setitem(BACKENDS._entries, "local", lambda rest: embedded(rest) if rest else ScriptedSpec(stand_in))
    before = set(sys.modules)
    yield workspace
    for name in set(sys.modules) - before:  # a module the examples defined, e.g. my_checks
        if str(workspace) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


# ---------------------------------------------------------------- the site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = mkdocs_build(REPO_ROOT, out)
    assert done.returncode == 0, done.stderr
    return out


def mkdocs_build(project: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_site_builds_strictly_with_every_page_and_screenshot(site: Path) -> None:
    for page in DOCS.rglob("*.md"):
        built = page.relative_to(DOCS).with_suffix("")
        assert (site / (built.parent if built.name == "index" else built) / "index.html").exists(), page
    assert 'src="../../report.png"' in (site / "guides" / "reading-a-run" / "index.html").read_text()
    assert 'src="../../report-task.png"' in (site / "guides" / "reading-a-run" / "index.html").read_text()
    assert 'src="../../img/comparison.png"' in (site / "guides" / "compare" / "index.html").read_text()
    assert "All notable changes to redraft" in (site / "changelog" / "index.html").read_text()


def test_a_dead_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    """A small site with the same validation settings: strict turns a link to nothing into a failed build."""
    settings = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## Here\n")
    config = {"site_name": "t", "strict": True, "validation": settings["validation"], "plugins": []}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[fine](other.md#here)\n")
    assert mkdocs_build(tmp_path, tmp_path / "site").returncode == 0  # the same site, every link landing
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[gone](missing.md) and [nowhere](other.md#there)\n")
    failed = mkdocs_build(tmp_path, tmp_path / "site")
    assert failed.returncode != 0
    assert "'missing.md'" in failed.stderr and "'#there'" in failed.stderr


def test_the_cli_reference_is_generated_from_the_real_command(site: Path) -> None:
    source = "\n".join(prose(DOCS / "reference" / "cli.md"))  # the help shown above it is tested as a session
    assert re.search(r"^::: mkdocs-typer2\n    :module: redraft.cli\n", source, re.MULTILINE)
    page = (site / "reference" / "cli" / "index.html").read_text()
    for name, command in COMMAND.commands.items():
        assert f"redraft {name}" in page, name
        shown_options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
        for flag in (opt for param in shown_options for opt in param.opts if opt.startswith("--")):
            assert flag not in source, f"{flag} is written by hand in the page's source"
            assert f"<code>{flag}" in page or f"{flag} " in page or f", {flag}" in page, f"redraft {name} {flag}"
    assert "[OPTIONS] [SCENARIO]" in page  # a usage line, not taken for a link


def test_the_api_reference_documents_every_public_name(site: Path) -> None:
    page = (site / "reference" / "api" / "index.html").read_text()
    for name in redraft.__all__:
        assert f'id="redraft.{name}"' in page, name
    assert 'id="redraft.scenarios.Scenario.check"' in page and 'id="redraft.errors.UserError"' in page


# ---------------------------------------------------------------- links and words


def test_every_link_and_image_lands() -> None:
    assert [dead for page in pages() for dead in dead_links(page)] == []


def test_the_link_check_finds_a_dead_link_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# There\n\n## A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading) [gone](gone.md) [no](there.md#none) `[code](gone.md)`\n")
    assert [line.split(": ", 1)[1] for line in dead_links(page)] == [
        "gone.md points to nothing",
        "there.md#none names no heading of there.md",
    ]


def test_every_flag_the_docs_name_exists() -> None:
    """A flag in the prose is one of redraft's, of a benchmark script's, of the ray and kubectl commands shown, or
    of bubblewrap, which the architecture page says why the sandbox does not use."""
    scripts = "".join(script.read_text() for script in (REPO_ROOT / "benchmarks").glob("*.py"))
    others = set(re.findall(r"add_argument\(\s*\"(--[\w-]+)", scripts))
    others |= {"--head", "--port", "--num-cpus", "--working-dir", "--metrics-export-port", "--from-literal"}
    others |= {"--uid", "--die-with-parent"}  # bubblewrap's
    spans = [span for page in pages() for span in code_spans(page)]
    named = {flag for span in spans for flag in re.findall(r"(?<!\w)--[a-z][\w-]*", span)}
    assert named - options() - others == set()


def test_the_readme_is_short_and_holds_nothing_a_commit_makes_stale() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    units = r"\d[\d,.]*\s*(?:s|ms|µs|seconds?|minutes?|hours?|tests?|calls/s|tasks/s|MiB|MB|GB)"
    assert re.findall(rf"\b{units}\b", readme) == []
    assert re.findall(r"\b\d+\.\d+\.\d+\b", readme) == []  # no version of anything
    python = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert re.findall(r"Python (\d+\.\d+)\+", readme) == [python.removeprefix(">=")]


# ---------------------------------------------------------------- every example


def test_every_block_names_a_language_the_test_checks() -> None:
    assert [b.where for b in ALL_BLOCKS if b.language not in LANGUAGES] == []


def test_only_the_output_of_long_runs_is_not_run() -> None:
    not_run = [b for b in ALL_BLOCKS if b.not_run is not None]
    assert 0 < len(not_run) <= NOT_RUN_AT_MOST
    assert all(b.language == "console" and b.not_run.strip() for b in not_run)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=shown)
def test_the_python_examples_run(page: Path, in_workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "docs_example"}
    ran = 0
    for block in (b for b in blocks(page) if b.language == "python"):
        exec(compile(block.text, block.where, "exec"), namespace)
        ran += 1
    assert ran and "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language == "bash"], ids=lambda b: b.where)
def test_the_shell_examples_parse(block: Block, in_workspace: Path) -> None:
    found = commands(block.text)
    assert found
    for words in found:
        check_command(words, in_workspace)


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.language in ("json", "csv", "toml", "yaml", "text")], ids=lambda b: b.where
)
def test_the_files_shown_read_as_what_they_are(block: Block, in_workspace: Path, tmp_path: Path) -> None:
    path = in_workspace / block.file if block.file else tmp_path / f"shown.{block.language}"
    path.write_text(block.text, encoding="utf-8")
    check_data(block.language, block.text, path, in_workspace)


def session(block: Block) -> list[tuple[str, list[str]]]:
    """A console block as (command, the lines it printed)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.rstrip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{block.where}: output before any command"
            steps[-1][1].append(line.rstrip())
    return steps


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language == "console"], ids=lambda b: b.where)
def test_the_terminal_sessions_print_what_they_show(block: Block, in_workspace: Path) -> None:
    for command, printed in session(block):
        words = commands(command)[0]
        if words[0] == "cat":  # the session shows a file: it is that file from here on
            (in_workspace / words[1]).write_text("\n".join(printed) + "\n", encoding="utf-8")
        elif block.not_run is not None:
            check_command(words, in_workspace)
            check_end_table(printed, in_workspace)
        else:
            assert words[0] == "redraft", f"{block.where}: a session runs redraft or cat, not {words[0]}"
            assert real_output(words[1:], in_workspace) == strip_blank_ends(printed), f"{block.where}: $ {command}"


def real_output(args: list[str], cwd: Path) -> list[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )
    text = (done.stdout + done.stderr).replace("python -m redraft.cli", "redraft")
    return strip_blank_ends([line.rstrip() for line in text.splitlines()])


def strip_blank_ends(lines: list[str]) -> list[str]:
    text = "\n".join(lines).strip("\n")
    return text.splitlines()


def check_end_table(printed: list[str], workspace: Path) -> None:
    """A recorded end table has the rows, in the order and words, that the end table of a run prints today."""
    labels = [line.split("│")[1][1:].rstrip() for line in printed if line.startswith("│")]  # past its padding
    if labels:
        summary = RunReader(workspace / "runs" / "demo").saved_summary()
        assert summary is not None
        assert labels == [label for label, _ in summary_rows(summary, breakdowns=True)]


def test_the_readme_s_own_tasks_example_is_graded_on_a_reference_its_check_does_not_read(in_workspace: Path) -> None:
    """Before, the README's own-tasks example named no grade, and its table said "graded: none" under a README
    whose headline is the held-out grade. Its command, through the real parser, run on the first task of its
    task file with a model answering in a well-formed line: right, and wrong."""
    from redraft.cli import _scenario_name
    from redraft.engine.resolution import resolve_run

    readme = [b for b in ALL_BLOCKS if b.where.startswith("README.md") and b.language == "bash"]
    [words] = [w for b in readme for w in commands(b.text) if w[:3] == ["redraft", "run", "--tasks"]][:1]
    params = COMMAND.commands["run"].make_context("run", words[2:]).params
    assert params["grade"] is not None, "the README's own tasks have no held-out grade"
    scenario = _scenario_name(None, params["tasks"], params["check"], params["grade"])
    config = RunConfig.build(scenario=scenario, tasks=params["tasks"], samples=1, max_rounds=1)
    task = next(resolve_run(config).tasks())
    answers = {}
    for said in ("Answer: Paris", "Answer: Lyon"):
        model = ScriptedSpec(script=lambda request, said=said: said)
        answers[said] = redraft.refine(task, config, backends={"drafter": model, "critic": model}).result
    assert {said: (r.passed, r.graded_pass) for said, r in answers.items()} == {
        "Answer: Paris": (True, True),
        "Answer: Lyon": (True, False),  # the check, without the answer, passes it; the held-out grade does not
    }
