"""``redraft.compare``: a comparison from Python, as ``redraft compare`` runs it, with its figures returned."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from redraft.comparison._analysis import Comparison, Match
from redraft.comparison._arms import Arm, arms_from_file, arms_from_names
from redraft.comparison._human import human_judgements
from redraft.comparison._judged import Judged, judge_of
from redraft.comparison._pairwise import pairwise as judged_pairs
from redraft.comparison._result import build, held_against, read_json, write_json
from redraft.comparison._runner import ComparePlan, run_comparison
from redraft.config import DEFAULT_BASELINE_SAMPLES, RunConfig
from redraft.engine import Plugins
from redraft.engine.resolution import BackendOverrides
from redraft.errors import UserError, unknown_name
from redraft.judging import read_card
from redraft.protocols.messages import Result, Usage
from redraft.rundir.reader import RunReader

MATCHES: tuple[Match, ...] = ("calls", "tokens", "usd")


@dataclass(frozen=True)
class ComparisonOutcome:
    """A finished comparison: its figures, and where its files are."""

    comparison: Comparison
    """Every arm's figures, the sampling baselines' curves, and each difference with its test."""
    out: Path
    """The comparison's directory: each lane's run directory (``arms/NAME``, ``baseline``) and the files below."""
    json: Path
    """``comparison.json``: the figures, for a regression gate (``redraft compare --baseline``)."""
    html: Path
    """``comparison.html``: the tables and plots for a person."""


@dataclass(frozen=True)
class CompareSettings:
    """What a comparison compares and how (`compare`): its arms, the sampling baseline they are matched against,
    what they are matched on, and what the comparison is held against and judged by.

        >>> from redraft import CompareSettings
        >>> settings = CompareSettings(["adversarial", "self_refine"], baseline_samples=8, match="tokens")
    """

    arms: Sequence[str] | Path
    """Strategy names, one arm each, or the path of an arms file (TOML)."""
    baseline_samples: int | None = None
    """Samples per task of the sampling baseline; None: the arms file's ``samples``, else the default."""
    match: Match = "calls"
    """What the arms and the baseline are matched on: ``calls``, ``tokens`` or ``usd``."""
    repeats: int = 1
    """Runs of each lane, for the spread between runs."""
    baseline: Path | None = None
    """An earlier comparison.json: each arm is held against it, and the verdict is the comparison's ``gate``
    (``redraft compare --baseline``)."""
    judge_card: Path | None = None
    """The card (``redraft judge calibrate``) of the config's ``judge``, named with its verdict in the
    comparison's ``judge``."""
    pairwise: bool = False
    """The judge also compares each pair of arms' final answers, in both orders (the comparison's ``pairwise``)."""


@dataclass(frozen=True)
class CompareHooks:
    """What a comparison tells its caller as its lanes run, and the event that stops them (`compare`)."""

    on_result: Callable[[str, Result], None] | None = None
    """Called ``(lane, result)`` for every task that lands, in any lane."""
    stop: threading.Event | None = None
    """Set it to end every lane at once: `Interrupted`, counting the tasks done over all lanes."""


def compare(
    config: RunConfig,
    settings: CompareSettings,
    plugins: Plugins | None = None,
    hooks: CompareHooks | None = None,
) -> ComparisonOutcome:
    """Compare critic strategies on the same tasks, against sampling at matched cost, on Ray.

    ``config`` holds the shared settings (scenario or task file, models, budgets, ``out``); ``settings`` the
    comparison's own (`CompareSettings`: its arms, baseline, matching, gate and judge). Every arm, and the
    sampling baseline, is a resumable run under ``config.runtime.out``: calling it again with the same ``out``
    resumes. ``plugins`` steer and grade a task file's tasks and replace the config's models, as `run`'s
    (`Plugins`); ``hooks`` follow every lane and stop them all (`CompareHooks`).

        >>> import tempfile
        >>> from redraft import CompareSettings, Plugins, RunConfig, compare
        >>> from redraft.backends.scripted import ScriptedSpec
        >>> model = ScriptedSpec(script=lambda request: "3 + 4 = 7\\nAnswer: 7")
        >>> config = RunConfig.build(scenario="arithmetic", limit=3, samples=2, max_rounds=2, out=tempfile.mkdtemp())
        >>> plugins = Plugins(backends={"drafter": model, "critic": model})
        >>> done = compare(config, CompareSettings(["self_refine"], baseline_samples=3), plugins)
        >>> [arm.name for arm in done.comparison.arms], done.json.name
        (['self_refine'], 'comparison.json')
    """
    plugged, hooked = plugins or Plugins(), hooks or CompareHooks()
    if settings.match not in MATCHES:
        raise unknown_name("match", settings.match, MATCHES)
    config = plugged.steering(config)
    plan = _plan(config, settings.arms, settings.baseline_samples, settings.repeats)
    if settings.baseline is not None:
        read_json(settings.baseline)  # a bad baseline fails before anything runs
    judged = judged_by(plan, settings.judge_card, plugged.backends, pairwise=settings.pairwise)  # a bad card, too
    with plan.held():
        run_comparison(plan, backends=plugged.backends, on_result=hooked.on_result, stop=hooked.stop)
        return write(plan, settings.match, settings.baseline, judged, pairwise=settings.pairwise)


def _plan(config: RunConfig, arms: Sequence[str] | Path, baseline_samples: int | None, repeats: int) -> ComparePlan:
    chosen: list[Arm]
    from_file: dict[str, object] = {}
    if isinstance(arms, Path):
        chosen, from_file = arms_from_file(arms)
    elif isinstance(arms, str):
        raise UserError("arms is a list of strategy names, e.g. ['adversarial', 'self_refine'], or an arms file's Path")
    else:
        chosen = arms_from_names(",".join(arms))
    samples = baseline_samples or int(str(from_file.get("samples", DEFAULT_BASELINE_SAMPLES)))
    out = Path(config.runtime.out) if config.runtime.out else default_out()
    return ComparePlan(base=config, arms=chosen, out=out, baseline_samples=samples, repeats=repeats)


def default_out() -> Path:
    """Where a comparison without an ``out`` goes: ``runs/compare-<time>-<id>``."""
    return Path("runs") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def judged_by(
    plan: ComparePlan, card: Path | None, backends: BackendOverrides | None = None, *, pairwise: bool = False
) -> Judged | None:
    """The judge of ``plan``'s lanes with its ``card`` read, or None when the scenario grades them; `UserError` for
    a card that cannot be read, or a card or pairwise verdicts asked without a judge."""
    judge = judge_of(plan, backends)
    if judge is None:
        if card is not None:
            raise UserError("--judge-card is the card of the comparison's judge: give --judge MODEL with it")
        if pairwise:
            raise UserError("--pairwise asks the comparison's judge to compare the arms: give --judge MODEL with it")
        return None
    return judge, (read_card(card) if card is not None else None), card


def judge_spend(plan: ComparePlan) -> Usage:
    """What the judge spent grading every lane's tasks (each result's ``judge`` role): the comparison's grading,
    no part of any arm's or baseline's matched cost (`redraft.comparison._lane_figures.method_usage`)."""
    results = (entry.result for lane in plan.lanes() for entry in RunReader(plan.out / lane.label).entries())
    return sum((r.usage_by_role.get("judge", Usage()) for r in results), Usage())


def write(
    plan: ComparePlan,
    match: Match,
    baseline: Path | None = None,
    judged: Judged | None = None,
    *,
    pairwise: bool = False,
) -> ComparisonOutcome:
    """The comparison of a plan whose lanes have run: each lane's report, ``comparison.json`` and ``.html``; held
    against the earlier comparison.json ``baseline`` (its gate's verdict recorded in both), when one is given;
    ``judged``: its judge and card (`judged_by`), when a judge graded it, which with ``pairwise`` also compares
    each pair of arms' final answers (`redraft.comparison._pairwise`)."""
    from redraft.comparison._html import write_html  # with the plots: the report extra's, loaded when drawn
    from redraft.views.report import report

    comparison = build(plan, match, judged)
    if judged is not None:
        comparison.grading = judge_spend(plan)
    if pairwise and judged is not None:
        comparison.pairwise = judged_pairs(plan, judged[0])
        comparison.grading += sum((figures.usage for figures in comparison.pairwise), Usage())
        comparison.notes += [figures.said() for figures in comparison.pairwise]
    comparison.human = human_judgements(plan.out)
    comparison.notes += comparison.human.notes() if comparison.human is not None else []
    comparison.notes += [said] if (said := comparison.grading_said()) is not None else []
    if baseline is not None:
        comparison.gate = held_against(comparison, read_json(baseline), str(baseline))
    written = [(lane, report(plan.out / lane.label)) for lane in plan.lanes()]
    reports = {lane.arm: str(done.path.relative_to(plan.out)) for lane, done in written}
    spent = {lane.label: done.spending for lane, done in written if done.spending is not None}
    return ComparisonOutcome(
        comparison=comparison,
        out=plan.out,
        json=write_json(comparison, plan.out),
        html=write_html(comparison, plan.out, reports, spent),
    )
