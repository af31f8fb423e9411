"""A run that gives less than its scenario or strategy needs is told so, once, with the reason and the fix."""

from __future__ import annotations

import pytest

from redraft.cli import main
from redraft.config import RunConfig
from redraft.engine.resolution import shortfalls
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy


def said(**settings: object) -> list[str]:
    config = RunConfig.build(**settings)  # type: ignore[arg-type]
    experiment = config.experiment
    return shortfalls(experiment, get_scenario(experiment.scenario), get_strategy(experiment.strategy))


def test_too_few_tokens_for_the_scenario_s_answers_are_named_with_the_fix() -> None:
    assert said(scenario="pipeline") == [
        "pipeline's answers need about 1,024 tokens and --max-tokens 128 cuts them short; pass --max-tokens 1024"
    ]
    assert said(scenario="pipeline", max_tokens=1024) == []
    assert said(scenario="humaneval", max_tokens=300)[0].startswith("humaneval's answers need about 512 tokens")
    assert said(scenario="arithmetic") == []  # the default is enough for it


def test_too_few_samples_for_the_strategy_are_named_with_the_fix() -> None:
    assert said(scenario="arithmetic", strategy="self_consistency", samples=2) == [
        "self_consistency needs at least 3 --samples to do what it is for, and was given 2; pass --samples 3"
    ]
    assert said(scenario="arithmetic", strategy="self_consistency", samples=3) == []
    assert said(scenario="arithmetic", strategy="best_of_n", samples=1) == []  # one sample: a single pass, as asked


def test_the_command_line_says_each_once_as_a_warning_line(capsys: pytest.CaptureFixture[str]) -> None:
    main(["run", "pipeline", "--strategy", "self_consistency", "--samples", "2", "--limit", "2", "--dry-run"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("redraft: warning:")]
    assert len(lines) == 2, lines  # each once, though the run's settings are resolved more than once
    assert lines[0].startswith("redraft: warning: pipeline's answers need about 1,024 tokens")
    assert lines[1].startswith("redraft: warning: self_consistency needs at least 3 --samples")
