"""``redraft judge``: a judge's card, measured before its grades are used (`redraft.judging.calibrate`).

The command resolves what it is given once (the judge's backend; the rubric, a file or the scenario's own; the
scenario whose program grade labels the answers) and hands objects to `redraft.judging`; it exits
`EXIT_CARD_FAILED` when the card fails, so a pipeline can stop before it trusts the judge.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from redraft.judging import JudgeCard, Rubric
    from redraft.scenarios import Scenario

EXIT_CARD_FAILED = 5

judge_app = typer.Typer(
    name="judge",
    help="A judge model's grades: measure the judge before its grades are trusted.",
    no_args_is_help=True,
)

_AT_LEAST, _AT_MOST = "The low end of its interval must reach this", "The high end of its interval must stay under this"


def _threshold(name: str, side: str) -> Any:
    """The option of one figure's threshold; unset, `redraft.judging.Thresholds`' default holds (documented in
    the judging guide; the package is not loaded to print a help line)."""
    return typer.Option(f"--{name.replace('_', '-')}", help=f"{name}: {side} (default: the card's).")


@judge_app.command("calibrate")
def calibrate_command(
    tasks: Annotated[Path, typer.Option("--tasks", help="JSON lines: each task's answers, with a label where known.")],
    judge: Annotated[str, typer.Option("--judge", help="The judge's model, as a backend spec (any backend).")],
    rubric: Annotated[
        Path | None, typer.Option("--rubric", help="The rubric, a TOML or JSON file (default: the scenario's own).")
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option("--scenario", help="Take tasks, its rubric and, where unlabelled, labels from its program grade."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Where judge-card.json and judge-card.html go.")] = Path(
        "judge-card"
    ),
    seed: Annotated[int, typer.Option(help="Seed of the judge's calls and of kappa's bootstrap.")] = 0,
    agreement: Annotated[float | None, _threshold("agreement", _AT_LEAST)] = None,
    kappa: Annotated[float | None, _threshold("kappa", _AT_LEAST)] = None,
    position_flip_rate: Annotated[float | None, _threshold("position_flip_rate", _AT_MOST)] = None,
    length_bias: Annotated[float | None, _threshold("length_bias", _AT_MOST)] = None,
    rubric_stability: Annotated[float | None, _threshold("rubric_stability", _AT_LEAST)] = None,
    repeatability: Annotated[float | None, _threshold("repeatability", _AT_LEAST)] = None,
) -> None:
    """Measure a judge on labelled answers and write its card: agreement, kappa, position and length bias,
    rubric stability and repeatability, each with its interval and a pass."""
    from redraft.cli._progress import CountProgress
    from redraft.judging import Thresholds, calibrate, judge_of, read_answers, write_card
    from redraft.judging.calibration import judgments
    from redraft.scenarios import get_scenario

    given = {
        "agreement": agreement,
        "kappa": kappa,
        "position_flip_rate": position_flip_rate,
        "length_bias": length_bias,
        "rubric_stability": rubric_stability,
        "repeatability": repeatability,
    }
    thresholds = Thresholds(**{name: value for name, value in given.items() if value is not None})
    named = get_scenario(scenario) if scenario else None
    chosen = _rubric(rubric, named)
    made = judge_of(judge, chosen)
    answers = read_answers(tasks, named)
    with CountProgress("judging", "judgments") as progress:
        progress.start(judgments(chosen, answers))
        card = calibrate(made, answers, thresholds=thresholds, seed=seed, judged=progress.advance)
    json_path, html_path = write_card(card, out)
    for line in card_lines(card):
        print(line)
    print(f"wrote {json_path} and {html_path}")
    if not card.passed:
        sys.exit(EXIT_CARD_FAILED)


def _rubric(path: Path | None, scenario: Scenario | None) -> Rubric:
    """The rubric at ``path``, else the scenario's own; a `UserError` of one line when there is neither."""
    from redraft.errors import UserError
    from redraft.judging import load_rubric, scenario_rubric

    if path is not None:
        return load_rubric(path)
    own = scenario_rubric(scenario) if scenario is not None else None
    if own is None:
        whose = f"scenario {scenario.name!r} has no rubric of its own" if scenario else "no --scenario to take one from"
        raise UserError(f"give the rubric to judge by with --rubric FILE: {whose}")
    return own


def card_lines(card: JudgeCard) -> list[str]:
    """The card as the command prints it: a line per figure, then the verdict."""
    lines = []
    for name, figure in card.figures.items():
        value = "-" if figure.value is None else f"{figure.value:.3f}"
        interval = "" if figure.low is None else f" [{figure.low:.3f}, {figure.high:.3f}]"
        must = ">=" if figure.side == "at_least" else "<="
        verdict = "pass" if figure.passed else "FAIL"
        lines.append(f"{name:<19} {value}{interval}  {must} {figure.threshold:g}  n={figure.n}  {verdict}")
    lines.append(f"judge {card.judge}: card {'passed' if card.passed else 'failed'}")
    return lines
