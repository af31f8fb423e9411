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
    from redraft.judging import Judge, JudgeCard, LabelledAnswer, Rewording, Rubric, Thresholds
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


_NAMED = typer.Argument(metavar="SCENARIO", help="The scenario, as `redraft run` takes it (or --scenario).")
_RUN = typer.Option(
    "--run",
    help="A finished run directory: its answers, labelled by people (its labels.jsonl), else its program grades.",
)
_LABELS = typer.Option("--labels", help="With --run: JSON lines, a `label` per `task_id` (yours first).")
_REWORDINGS = typer.Option("--rewordings", help="Your rewordings of the rubric (JSON or TOML); no model is then asked.")
_REWORD_MODEL = typer.Option("--reword-model", help="The model that rewords the rubric (default: the judge's).")
_REWORD_COUNT = typer.Option("--reword-count", min=0, help="Rewordings a model writes (0: none, the layout's only).")


@judge_app.command("calibrate")
def calibrate_command(
    judge: Annotated[str, typer.Option("--judge", help="The judge's model, as a backend spec (any backend).")],
    named: Annotated[str | None, _NAMED] = None,
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="JSON lines: each task's answers, with a label where known.")
    ] = None,
    run: Annotated[Path | None, _RUN] = None,
    labels: Annotated[Path | None, _LABELS] = None,
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
    rewordings: Annotated[Path | None, _REWORDINGS] = None,
    reword_model: Annotated[str | None, _REWORD_MODEL] = None,
    reword_count: Annotated[int, _REWORD_COUNT] = 2,
    agreement: Annotated[float | None, _threshold("agreement", _AT_LEAST)] = None,
    kappa: Annotated[float | None, _threshold("kappa", _AT_LEAST)] = None,
    position_flip_rate: Annotated[float | None, _threshold("position_flip_rate", _AT_MOST)] = None,
    length_bias: Annotated[float | None, _threshold("length_bias", _AT_MOST)] = None,
    rubric_stability: Annotated[float | None, _threshold("rubric_stability", _AT_LEAST)] = None,
    repeatability: Annotated[float | None, _threshold("repeatability", _AT_LEAST)] = None,
) -> None:
    """Measure a judge on labelled answers (a file's, or a finished run's) and write its card: agreement, kappa,
    position and length bias, rubric stability and repeatability, each with its interval and a pass."""
    from redraft.judging import Thresholds, held_card, judge_of

    given = {
        "agreement": agreement,
        "kappa": kappa,
        "position_flip_rate": position_flip_rate,
        "length_bias": length_bias,
        "rubric_stability": rubric_stability,
        "repeatability": repeatability,
    }
    thresholds = Thresholds(**{name: value for name, value in given.items() if value is not None})
    with held_card(out):
        chosen, answers = _inputs(tasks, run, labels, _one_scenario(named, scenario), rubric)
        words = _rewordings(chosen, rewordings, reword_model or judge, reword_count)
        card = _measured(judge_of(judge, chosen), answers, words, thresholds, seed)
        _reported(card, out)
    if not card.passed:
        sys.exit(EXIT_CARD_FAILED)


def _reported(card: JudgeCard, out: Path) -> None:
    """The card written under ``out``, its figures and where it went said."""
    from redraft.judging import write_card

    json_path, html_path = write_card(card, out)
    for line in card_lines(card):
        print(line)
    print(f"wrote {json_path} and {html_path}")


def _one_scenario(named: str | None, option: str | None) -> str | None:
    """The scenario named first (as ``redraft run`` takes it) or by ``--scenario``; `UserError` for two."""
    if named is not None and option is not None and named != option:
        from redraft.errors import UserError

        raise UserError(f"two scenarios: {named} and --scenario {option}; give one")
    return named or option


def _measured(
    judge: Judge, answers: list[LabelledAnswer], words: list[Rewording], thresholds: Thresholds, seed: int
) -> JudgeCard:
    """The judge's card, its progress shown as the judgments come back (judgments done of the card's total)."""
    from redraft.cli._progress import CountProgress
    from redraft.judging import calibrate
    from redraft.judging.calibration import judgments

    assert judge.rubric is not None
    with CountProgress("judging", "judgments") as progress:
        progress.start(judgments(judge.rubric, answers, words))
        return calibrate(judge, answers, thresholds=thresholds, seed=seed, judged=progress.advance, rewordings=words)


def _inputs(
    tasks: Path | None, run: Path | None, labels: Path | None, scenario: str | None, rubric: Path | None
) -> tuple[Rubric, list[LabelledAnswer]]:
    """The rubric to judge by and the answers to measure the judge on (a rubric that is not one is refused before
    a ``--tasks`` file is read)."""
    from redraft.judging import read_answers

    named, answers = _source(tasks, run, labels, scenario)
    chosen = _rubric(rubric, named)
    if answers is None:
        assert tasks is not None
        answers = read_answers(tasks, named)
    return chosen, answers


def _source(
    tasks: Path | None, run: Path | None, labels: Path | None, scenario: str | None
) -> tuple[Scenario | None, list[LabelledAnswer] | None]:
    """The scenario whose rubric is the default, and with ``--run`` the run's answers (``--tasks`` is read once the
    rubric is); a `UserError` of one line for a mix that does not go together."""
    from redraft.errors import UserError
    from redraft.judging import read_run_answers
    from redraft.scenarios import get_scenario

    if (tasks is None) == (run is None):
        raise UserError("give the answers to measure the judge on: --tasks FILE or --run DIR (one of them)")
    if labels is not None and run is None:
        raise UserError("--labels labels a run's tasks: give it with --run DIR (a --tasks file has its own `label`s)")
    if run is None:
        return (get_scenario(scenario) if scenario else None), None
    if scenario is not None:
        raise UserError("--run takes its tasks, labels and scenario from the run: leave out --scenario")
    answers, ran = read_run_answers(run, labels)
    try:
        return get_scenario(ran), answers  # its rubric, where it has one, is the default
    except UserError:  # a scenario this process cannot make (a check of a module not here): --rubric is needed
        return None, answers


def _rewordings(rubric: Rubric, path: Path | None, model: str, count: int) -> list[Rewording]:
    """The user's rewordings of ``rubric`` (``--rewordings``), which keep priority, else ``count`` of ``model``'s
    (each it could not write said in one line, and left out)."""
    from redraft.judging import load_rewordings, rewordings_by

    if path is not None:
        return load_rewordings(path, rubric)
    if count == 0:
        return []
    made, left_out = rewordings_by(model, rubric, count)
    for why in left_out:
        print(f"redraft: warning: {why}", file=sys.stderr)
    return made


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
        value = ("undefined" if figure.n else "-") if figure.value is None else f"{figure.value:.3f}"
        interval = "" if figure.low is None else f" [{figure.low:.3f}, {figure.high:.3f}]"
        must = ">=" if figure.side == "at_least" else "<="
        verdict = {"pass": "pass", "fail": "FAIL"}.get(figure.verdict, f"too few (needs about {figure.needs})")
        lines.append(f"{name:<19} {value}{interval}  {must} {figure.threshold:g}  n={figure.n}  {verdict}")
    lines += card.labels_said()
    lines.append(f"judge {card.judge}: card {card.said()}")
    return lines
