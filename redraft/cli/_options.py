"""The options of ``redraft run`` and ``redraft compare``, one per config field, in the help's panels.

A config field (`redraft.config`) gives its option everything: the flag, the help, the
type, the panel it is shown in, and its default. The option has the config's default
so that the help shows it as a value (``[default: local]``), and a callback, `_given`,
that turns the default back into None: a command sees only what was given, and the
config's own default applies, said once.

The options are ordered panel by panel (`redraft.config.PANELS`, the comparison's
own after the tasks), so a panel is one box whose columns are as wide as its own
flags need: at 80 columns no flag name is cut.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import typer

from redraft.config import (
    DEFAULT_BASELINE_SAMPLES,
    GROUPS,
    PANELS,
    Experiment,
    description,
    field_types,
    flag,
    setting_aliases,
)

KEYWORD = inspect.Parameter.KEYWORD_ONLY
COMPARISON = "Comparison"
"""The panel of the comparison's own options."""

Placed = tuple[str, inspect.Parameter]
"""An option and the panel it is shown in."""


def run_parameters() -> list[inspect.Parameter]:
    """The parameters of ``redraft run``: SCENARIO, then the options panel by panel."""
    return [_scenario(), *_in_panel_order(_run_options(), PANELS)]


RUN_ONLY = frozenset({"strategy"})
"""``redraft run``'s options that ``redraft compare`` has not: the arms choose the strategies."""


def compare_parameters() -> list[inspect.Parameter]:
    """``redraft run``'s but `RUN_ONLY`, and the comparison's own after the tasks."""
    options = [placed for placed in _run_options() if placed[1].name not in RUN_ONLY] + _comparison_options()
    return [_scenario(), *_in_panel_order(options, (PANELS[0], COMPARISON, *PANELS[1:]))]


def _given(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """The value given on the command line, or None for the default (there for the help to show)."""
    source = ctx.get_parameter_source(param.name or "")
    return None if source is not None and source.name == "DEFAULT" else value


def _in_panel_order(options: list[Placed], order: Sequence[str]) -> list[inspect.Parameter]:
    """The options sorted by panel; within a panel, in the order given (the config's field order)."""
    return [parameter for _, parameter in sorted(options, key=lambda placed: order.index(placed[0]))]


def _scenario() -> inspect.Parameter:
    text = "Scenario name (see `redraft scenarios`); leave out with --check."
    argument = typer.Argument(None, metavar="SCENARIO", help=text)
    return inspect.Parameter("scenario", KEYWORD, default=argument, annotation=str | None)


_CHECK = "MODULE:FUNCTION whose verdict steers the loop on the --tasks (instead of a SCENARIO)."
_GRADE = (
    "MODULE:FUNCTION that grades the final answers against the --tasks' reference, held out; or rubric:FILE, the "
    "--judge's rubric."
)


def _run_options() -> list[Placed]:
    """--check, --grade and --model (the command line's own), then the options of each config field."""
    roles = Experiment().drafter  # --model sets every role; their default
    own = [
        _option("Tasks", "check", "--check", _CHECK),
        _option("Tasks", "grade", "--grade", _GRADE),
        _option("Model", "model", "--model", "Backend spec for every model role.", shown=roles),
    ]
    fields = [_field_options(struct, field) for struct in GROUPS.values() for field in msgspec.structs.fields(struct)]
    return own + [placed for options in fields for placed in options]


def _field_options(struct: type[msgspec.Struct], field: msgspec.structs.FieldInfo) -> list[Placed]:
    """The option of one config field (none for the scenario, an argument), and a hidden one per alias.

    An alias is an option of its own, named in the field's help: typer would show it joined to the
    flag by a comma, one word too long for the column at 80 columns. `RunConfig.build` takes it by name.
    """
    meta = description(struct, field.name)
    extra = meta.extra or {}
    if extra.get("argument"):
        return []
    kind, panel, name = field_types(struct)[field.name], extra["panel"], flag(field.name)[2:]
    short = [extra["short"]] if "short" in extra else []
    names = [f"--{name}/--no-{name}", *short] if kind is bool else [f"--{name}", *short]
    aliases = [alias for alias, target in setting_aliases().items() if target == field.name]
    text = (meta.description or "") + (f" Also {', '.join(flag(alias) for alias in aliases)}." if aliases else "")
    option = typer.Option(field.default, *names, help=text, callback=_given, rich_help_panel=panel)
    return [
        (panel, inspect.Parameter(field.name, KEYWORD, default=option, annotation=kind | None)),
        *[(panel, _hidden(alias, kind)) for alias in aliases],
    ]


def _hidden(alias: str, kind: Any) -> inspect.Parameter:
    """An alias's own option, left out of the help (the field's help names it)."""
    option = typer.Option(None, flag(alias), hidden=True)
    return inspect.Parameter(alias, KEYWORD, default=option, annotation=kind | None)


TUNE = "Tune"
"""The panel of the tune's own options."""


def tune_parameters() -> list[inspect.Parameter]:
    """``redraft run``'s options, and the tune's own after the tasks."""
    return [_scenario(), *_in_panel_order(_run_options() + _tune_options(), (PANELS[0], TUNE, *PANELS[1:]))]


def _tune_options() -> list[Placed]:
    return [
        _option(
            TUNE, "proposer", "--proposer", "Backend spec of the model that rewrites prompts (default: the drafter's)."
        ),
        _option(TUNE, "sections", "--sections", "Prompt sections to tune, by name.", default="draft_system,draft_task"),
        _option(TUNE, "split", "--split", "Train, validation and test shares of the tasks.", default="0.4,0.3,0.3"),
        _option(TUNE, "minibatch", "--minibatch", "Train tasks a child must beat its parent on.", default=8),
        _option(TUNE, "max_proposals", "--max-proposals", "Edits to propose at most.", default=8),
        _option(TUNE, "parallel", "--parallel", "Iterations (proposals and evaluations) at once.", default=2),
        _option(TUNE, "examples", "--examples", "Train tasks the proposer reads per proposal.", default=4),
        _option(
            TUNE,
            "train_labels",
            "--train-labels",
            "A run whose people's labels are the train evidence: its labelled tasks are train.",
            kind=Path,
        ),
    ]


def _comparison_options() -> list[Placed]:
    n = DEFAULT_BASELINE_SAMPLES  # None when not given: an arms file's [baseline] may set it
    return [
        _option(COMPARISON, "arms", "--arms", "Strategies to compare, by name: adversarial,debate."),
        _option(
            COMPARISON, "arms_file", "--arms-file", "A TOML file of arms (see the docs: guides/compare).", kind=Path
        ),
        _option(
            COMPARISON,
            "baseline_samples",
            "--baseline-samples",
            "N, the sampling baseline's samples per task.",
            shown=n,
        ),
        _option(COMPARISON, "match", "--match", "Match the baselines' cost by calls, tokens or usd.", default="calls"),
        _option(COMPARISON, "repeats", "--repeats", "Run every arm this many times, with other seeds.", default=1),
        _option(
            COMPARISON, "baseline", "--baseline", "An earlier comparison.json to hold this one against.", kind=Path
        ),
        _option(COMPARISON, "fail_if_worse", "--fail-if-worse", _FAIL_IF_WORSE, default=False),
        _option(
            COMPARISON,
            "judge_card",
            "--judge-card",
            "The --judge's card (`redraft judge calibrate`), named in the comparison; a gate needs it to pass.",
            kind=Path,
        ),
        _option(
            COMPARISON,
            "pairwise",
            "--pairwise",
            "Have the --judge compare each pair of arms' final answers, in both orders.",
            default=False,
        ),
        _option(
            COMPARISON,
            "trust_judge",
            "--trust-judge",
            "Let --fail-if-worse gate on a --judge without a passing --judge-card.",
            default=False,
        ),
    ]


_FAIL_IF_WORSE = "Exit 4 if an arm is worse than --baseline beyond its CI."


def _option(
    panel: str, name: str, flag_name: str, text: str, *, kind: Any = str, default: Any = None, shown: Any = None
) -> Placed:
    """A command-line-only option: with a ``default`` the command gets, or none (None: not given).

    ``shown`` is a default the help shows that the command does not get (it gets None, and decides).
    """
    if default is not None:
        option = typer.Option(default, flag_name, help=text, rich_help_panel=panel)
        return panel, inspect.Parameter(name, KEYWORD, default=option, annotation=type(default))
    if shown is not None:
        kind = type(shown)
    option = typer.Option(shown, flag_name, help=text, callback=_given, rich_help_panel=panel)
    return panel, inspect.Parameter(name, KEYWORD, default=option, annotation=kind | None)
