"""How the docs' examples are checked without running what they start: commands parsed by the real command
line, files read by the readers redraft uses for them.

A ``redraft`` command goes through the real parser (every flag must exist and take its value), then
becomes the `RunConfig` the command would run, validated as the command would: the scenario, the
strategy and every backend spec resolve, and every file it names exists in the examples' workspace and
reads as what it is (a task file, a prompts file, a price file, an arms file). Nothing is started.
Other programs are checked for what can be: a make target exists, a file named exists, an extra exists.
"""

from __future__ import annotations

import csv
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import typer

from redraft.backends import resolve
from redraft.backends.pricing import load_prices
from redraft.cli import _judged_grade, _scenario_name, app, compare_command, run_command, tune_command
from redraft.comparison._arms import arms_from_file
from redraft.config import RunConfig
from redraft.engine._patches import parse_edits
from redraft.engine.prompt_files import load_prompts
from redraft.engine.prompts import built_in
from redraft.errors import UserError
from redraft.judging import load_rubric, read_card, read_labels
from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import validate_task_file
from redraft.scenarios.user_check import user_scenario_name
from redraft.strategies import get_strategy
from redraft.telemetry import export_run, traces_url
from redraft.tuning._splits import parse_fractions
from tests.support.paths import REPO_ROOT

COMMAND = typer.main.get_command(app)
TASK_FILE_CHECK = "tests.support.check_modules:exact_answer"
"""The check a task file block is read under: the documented contract, importable from the repository."""
MADE_BY_SETUP = ".venv/"
"""Paths under it are made by `make`'s set-up, not kept in the repository."""


def options() -> set[str]:
    """Every flag of every ``redraft`` command (aliases, hidden ones and ``--no-`` forms included)."""
    found = {"--help", "-h", "--version"}
    every = list(COMMAND.commands.values())
    while every:
        command = every.pop()
        every += getattr(command, "commands", {}).values()  # a group's subcommands (`redraft judge calibrate`)
        for param in command.params:
            found.update(param.opts, param.secondary_opts)
    return found


def makefile_targets() -> set[str]:
    text = (REPO_ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w./-]+):", text, re.MULTILINE)) - {".PHONY"}


def commands(script: str) -> list[list[str]]:
    """The commands of a shell script: lines continued with ``\\`` joined, comments dropped, ``&&`` split."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            found.append(words[:cut])
            words = words[cut + 1 :]
    return found


def check_command(words: list[str], workspace: Path) -> None:
    """One command of a shell example; AssertionError or UserError saying what is wrong with it."""
    program, args = words[0], words[1:]
    if program in ("redraft", ".venv/bin/redraft"):
        check_redraft(args, workspace)
    elif program == "make":
        assert set(args) <= makefile_targets(), f"no make target {args}"
    elif program == "export":
        assert args and all("=" in a for a in args), f"export what? {args}"
    elif program == "source":
        _exists(args)
    elif program == "ray":
        _check_ray(args, workspace)
    elif program == "serve":  # Ray Serve's own command: serve deploy CONFIG
        assert args[:1] == ["deploy"], f"serve {args[:1]}?"
        _exists(args[1:2])
    elif program in ("docker", "kubectl"):
        _exists([args[i + 1] for i, a in enumerate(args[:-1]) if a == "-f"])
    elif program == "pip":
        extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for wanted in re.findall(r"^redraft\[(.+)\]$", args[-1]):
            assert set(wanted.split(",")) <= set(extras), f"no extra {wanted!r} in pyproject.toml"
    elif program in ("bash", ".venv/bin/python"):
        _exists(args[:1])
    elif program == ".venv/bin/pytest":
        _exists([a for a in args if "/" in a])
    else:
        raise AssertionError(f"an example runs {program!r}, which the docs test does not know how to check")


def _exists(paths: list[str]) -> None:
    for path in paths:
        if not path.startswith(MADE_BY_SETUP):
            assert (REPO_ROOT / path).exists(), f"{path} is not in the repository"


def _check_ray(args: list[str], workspace: Path) -> None:
    if "--" in args:  # ray job submit ... -- COMMAND: the command the job runs
        check_command(args[args.index("--") + 1 :], workspace)
    elif args[:1] == ["up"]:
        _exists(args[1:2])
    else:
        assert args[:1] in (["start"], ["job"]), f"ray {args[:1]}?"


def check_redraft(args: list[str], workspace: Path) -> None:
    """Parse ``redraft ARGS`` as the real command line does; for run and compare, validate what would run."""
    assert args and args[0] in COMMAND.commands, f"no redraft command {args[:1]}"
    context = COMMAND.commands[args[0]].make_context(args[0], args[1:])
    if args[0] == "export" and context.params["fmt"] == "otel":
        _send_spans(context.params, workspace)
    if args[0] == "serve":
        from redraft.cli._serve import served_settings

        served_settings(context.params)
    if args[0] not in ("run", "compare", "tune"):
        return
    for strategy in (context.params.get("arms") or "").split(","):
        if strategy:
            get_strategy(strategy)
    handler = {"run": run_command, "compare": compare_command, "tune": tune_command}[args[0]]
    if args[0] == "tune":
        _tune_settings(context.params)
    named = handler.__code__.co_varnames[: handler.__code__.co_argcount]
    own = {k: v for k, v in context.params.items() if k in named}
    given = {k: v for k, v in context.params.items() if k not in named and v is not None}
    grade = _judged_grade(own["grade"], given)  # --grade rubric:FILE is the judge's --rubric FILE
    scenario = _scenario_name(own["scenario"], given.get("tasks"), own["check"], grade)
    config = RunConfig.build(scenario=scenario, model=own["model"], **given)
    check_experiment(config, workspace)
    if config.experiment.tasks is not None:
        validate_task_file(workspace / config.experiment.tasks, get_scenario(scenario), config.experiment.columns)
    for name, reader in (("prices", load_prices), ("arms_file", _arms_file), ("judge_card", read_card)):
        if (path := context.params.get(name)) is not None:
            reader(workspace / path)
    if config.runtime.otel is not None:
        traces_url(config.runtime.otel)


def _send_spans(params: dict[str, Any], workspace: Path) -> None:
    """``redraft export RUN --format otel --endpoint URL``, run for real: the run's spans sent to a receiver of
    this test in place of URL (which must read as an endpoint)."""
    from tests.support.otlp_receiver import OTLPReceiver

    traces_url(params["endpoint"])
    with OTLPReceiver() as receiver:
        url, sent = export_run(workspace / params["run_dir"], receiver.url)
    assert url == f"{receiver.url}/v1/traces" and sent == len(receiver.spans) > 0
    assert [root.name for root in receiver.roots()] == ["redraft.run"]


def _tune_settings(params: dict[str, Any]) -> None:
    """The tune's own options as `redraft tune` reads them: the split's shares, and sections that exist."""
    parse_fractions(params["split"])
    for section in params["sections"].split(","):
        assert section in built_in().templates and not section.startswith("tune_"), f"no section {section!r}"


def check_experiment(config: RunConfig, workspace: Path) -> None:
    config.validate()
    experiment = config.experiment
    get_scenario(experiment.scenario)
    get_strategy(experiment.strategy)
    for spec in (experiment.drafter, experiment.critic, experiment.verifier):
        if spec is not None:
            _resolve(spec)
    if experiment.prompts is not None:
        load_prompts(str(workspace / experiment.prompts))
    if experiment.judge is not None:
        _resolve(experiment.judge)
    if experiment.rubric is not None:
        load_rubric(workspace / experiment.rubric)


def _resolve(spec: str) -> None:
    """Resolve a backend spec; a ``local:PATH.gguf`` needs only to get as far as looking for its file."""
    try:
        resolve(spec)
    except UserError as exc:
        if not (spec.startswith("local:") and str(exc).startswith("GGUF model file not found")):
            raise


def _arms_file(path: Path) -> None:
    arms, _ = arms_from_file(path)
    for arm in arms:
        get_strategy(arm.settings["strategy"])
        for role in ("drafter", "critic", "verifier"):
            if role in arm.settings:
                _resolve(arm.settings[role])


def check_data(language: str, text: str, path: Path, workspace: Path) -> None:
    """A json, csv, toml, yaml or text block, read as the file it shows (written at ``path``); the files a
    workflow's commands name are in ``workspace``."""
    if language == "json":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        if all(isinstance(r, dict) and "prompt" in r for r in records):
            graded = any("feedback" in r for r in records)
            scenario = user_scenario_name(TASK_FILE_CHECK, TASK_FILE_CHECK if graded else None)
            assert validate_task_file(path, get_scenario(scenario)) == len(records)
        elif all(isinstance(r, dict) and set(r) == {"task_id", "label"} for r in records):
            assert len(read_labels(path)) == len(records)  # `judge calibrate --run DIR --labels FILE`
        else:
            load_prices(path)
    elif language == "csv":  # a task file: the command that runs it validates it with its --columns
        rows = list(csv.reader(text.splitlines()))
        assert len(rows) > 1 and all(len(row) == len(rows[0]) for row in rows), "a header, then rows as wide"
    elif language == "toml":
        _check_toml(tomllib.loads(text), path)
    elif language == "yaml":
        _check_workflow(text, workspace)
    elif language == "text":
        assert not re.search(r"^(\$ |redraft )", text, re.MULTILINE), "a command in a text block: make it bash"
        if "<<<<<<< SEARCH" in text:
            assert parse_edits(text), "the edit blocks do not parse"


def _check_toml(data: dict[str, Any], path: Path) -> None:
    if "arms" in data:
        _arms_file(path)
    elif "criteria" in data:
        from redraft.judging import load_rubric

        load_rubric(path)
    elif "rewordings" in data:
        _rewordings_file(path)
    elif "project" in data:
        groups = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
        shown = data["project"]["entry-points"]
        assert set(shown) <= set(groups), f"entry-point groups redraft does not read: {set(shown) - set(groups)}"
        assert all(re.fullmatch(r"[\w.]+", module) for entries in shown.values() for module in entries.values())
    else:
        load_prompts(str(path))


def _rewordings_file(path: Path) -> None:
    """A ``--rewordings`` file: it must word one of the rubrics the examples wrote beside it."""
    from redraft.judging import load_rewordings, load_rubric

    rubrics = [p for p in path.parent.glob("*.toml") if p != path and "criteria" in tomllib.loads(p.read_text())]
    refusals = []
    for rubric in rubrics:
        try:
            load_rewordings(path, load_rubric(rubric))
            return
        except UserError as exc:
            refusals.append(str(exc))
    raise AssertionError(f"{path.name} words none of the rubrics beside it: {refusals}")


def _check_workflow(text: str, workspace: Path) -> None:
    import yaml

    jobs = yaml.safe_load(text)["jobs"]
    scripts = 0
    for step in (step for job in jobs.values() for step in job["steps"]):
        script = step.get("run")
        if script is None:
            continue
        for name, value in step.get("env", {}).items():
            script = script.replace(f"${name}", value)
        for words in commands(script):
            check_command(words, workspace)
            scripts += words[0] == "redraft"
    assert scripts, "a workflow in the docs runs no redraft command"
