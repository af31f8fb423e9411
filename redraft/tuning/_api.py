"""``redraft.tune``: the prompt refinement loop, from a config to a verdict, as ``redraft tune`` runs it.

Layout of ``--out`` (default ``runs/tune-<time>-<id>``)::

    tune-manifest.json     what decides the tune's results; a resume must match it
    splits.json            the task ids of train, validation and test
    tune.jsonl             the journal: candidates, proposals, evaluations, iterations
    tasks/*.jsonl          each evaluation's tasks, as a task file
    prompts/c<k>.toml      each candidate's prompts file (c0: the start)
    evaluations/c<k>/<on>  each evaluation's run directory (``redraft report`` opens it)
    tuned-prompts.toml     the new prompts, written only when the test split's verdict is significant
    tune.json, tune.html   the report: lineage, diffs, reasons, scores per split, spend, verdict
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from redraft.actors import ensure_ray
from redraft.backends.base import BackendSpec
from redraft.backends.pricing import PriceTable
from redraft.backends.registry import resolve
from redraft.config import RunConfig
from redraft.engine import CallSettings, Plugins, check_out
from redraft.engine.estimate import model_of
from redraft.engine.prompt_files import about
from redraft.engine.prompts import built_in
from redraft.engine.proposer import PROPOSAL_MAX_TOKENS
from redraft.engine.resolution import BackendOverrides, ResolvedRun, resolve_run
from redraft.errors import Interrupted, UserError, unknown_name
from redraft.protocols.messages import Result
from redraft.rundir import TUNE, RunSecret, check_kind, check_wire, hold
from redraft.rundir.layout import RAY_LOG
from redraft.tuning._budget import Costs, TuneBudget
from redraft.tuning._costs import estimate_costs, priced_proposals
from redraft.tuning._directory import default_out, read_manifest, read_splits, start_candidate
from redraft.tuning._evaluate import RunEvaluator
from redraft.tuning._journal import PromptCandidate, TuneJournal
from redraft.tuning._labelled import labelled_train
from redraft.tuning._report import write_report
from redraft.tuning._search import START, Propose, Search, SearchSettings
from redraft.tuning._splits import DEFAULT_FRACTIONS, Splits
from redraft.tuning._status import StatusTracker, TuneStatus
from redraft.tuning._verdict import TuneVerdict, adopt, decide, unread

DEFAULT_SECTIONS = ("draft_system", "draft_task")


@dataclass(frozen=True)
class TuneSettings:
    """What the search does (`redraft.tuning._search.SearchSettings`) and how the tasks are split."""

    sections: Sequence[str] = DEFAULT_SECTIONS
    split: tuple[float, float, float] = DEFAULT_FRACTIONS
    minibatch: int = 8
    max_proposals: int = 8
    parallel: int = 2
    examples: int = 4
    proposer: str | None = None
    """The proposer's backend spec; None: the drafter's."""
    train_labels: Path | None = None
    """A run whose people's labels are the train evidence (`redraft.tuning._labelled`): its labelled tasks are the
    train split, the others validation and test; None: the tasks are split by seed and ``split``."""


@dataclass(frozen=True)
class TuneOutcome:
    out: Path
    verdict: TuneVerdict | None
    """None for a dry run (``config.runtime.dry_run``): the estimate was said, and nothing run."""
    json: Path | None = None
    html: Path | None = None


Say = Callable[[str], None]


def _unsaid(line: str) -> None:
    """A step nobody listens to."""


@dataclass(frozen=True)
class TunePlugins(Plugins):
    """`Plugins` with the tune's proposer as an object: what `tune` takes where `run` and `compare` take
    `Plugins`."""

    proposer: BackendSpec | Propose | None = None
    """Replaces ``TuneSettings.proposer``'s model: a backend object, or a function from a request to a proposal,
    run in this process; None: the settings' model."""


@dataclass(frozen=True)
class TuneHooks:
    """What a tune tells its caller as it goes, and the event that stops it (`tune`)."""

    on_start: Callable[[str, int, int], None] | None = None
    """Called ``(label, total, done)`` as each evaluation's run opens (``label``: the candidate and the split)."""
    on_result: Callable[[str, Result], None] | None = None
    """Called ``(label, result)`` for each task of an evaluation's run as it lands."""
    on_status: Callable[[TuneStatus], None] | None = None
    """Told the tune's status whenever it changes."""
    say: Say = _unsaid
    """Told each step in a line (the verdict is the outcome's)."""
    stop: threading.Event | None = None
    """Set it to end the tune: `Interrupted`, counting the iterations done."""


def tune(
    config: RunConfig,
    settings: TuneSettings = TuneSettings(),
    plugins: Plugins | None = None,
    hooks: TuneHooks | None = None,
) -> TuneOutcome:
    """Tune ``config``'s prompts (``config.experiment.prompts``, or the built-in ones) on its tasks: split them
    by seed, search for a better version on train and validation, and test the winner against the start on
    the test split, once. Rerun with the same ``config.runtime.out`` to resume without re-scoring anything.
    A dry run (``config.runtime.dry_run``) says the estimate of what is left and writes nothing.

    ``plugins`` steer and grade a task file's tasks and replace the config's models, as `run`'s; a
    `TunePlugins` also replaces the proposer's model. ``hooks`` follow the tune and each evaluation's run, and
    stop it (`TuneHooks`).
    """
    plugged, hooked = plugins or Plugins(), hooks or TuneHooks()
    config = plugged.steering(config)
    out = Path(config.runtime.out) if config.runtime.out else default_out()
    dry = config.runtime.dry_run
    run = _checked(config, settings, plugged.backends, RunSecret(out, keep=not dry))  # what every evaluation splits
    check_out(out)
    check_kind(out, TUNE)
    _check_evaluations(out)
    lock = None if dry else hold(out)  # one tune at a time in a directory: a dry run writes nothing
    try:
        return _tuned(config, settings, run, out, plugged, hooked)
    finally:
        if lock is not None:
            lock.release()


def _tuned(
    config: RunConfig, settings: TuneSettings, run: ResolvedRun, out: Path, plugins: Plugins, hooks: TuneHooks
) -> TuneOutcome:
    """`tune`'s work, in its directory held (`tune`'s arguments, checked)."""
    setup, say, backends = run.setup, hooks.say, plugins.backends
    proposer = plugins.proposer if isinstance(plugins, TunePlugins) else None
    dry = config.runtime.dry_run
    tasks = {task.task_id: task for task in run.tasks()}
    judged = labelled_train(settings.train_labels, tasks) if settings.train_labels is not None else {}
    splits = read_splits(out, list(tasks.values()), settings, config.experiment.seed, write=not dry, labelled=judged)
    payer = read_manifest(out, config, settings, write=not dry)  # the tune's own id: its journal's records carry it
    status = StatusTracker(of=settings.max_proposals, tell=hooks.on_status)
    journal = status.journal = _opened(out, payer if not dry else None, status, say)
    model = _proposer_spec(config, settings, proposer)  # resolved once: for the estimate and the actor
    costs = estimate_costs(config, splits, tasks, backends, model)
    budget = TuneBudget(limits=config.budgets, paid=journal.spent)
    say(costs.summary(settings, splits, journal))
    for line in costs.warnings(settings, splits, budget, journal):
        say(f"warning: {line}")
    _reserve_the_ends(budget, journal, costs.worst, splits)
    if dry:
        say("dry run: no model was called and nothing was written; leave out --dry-run to run it")
        return TuneOutcome(out=out, verdict=None)
    evaluate = RunEvaluator(
        config, out, backends, hooks.stop, hooks.on_start, hooks.on_result, parallel=settings.parallel
    )
    start_candidate(out, journal, config.experiment.prompts)
    ensure_ray(config.runtime.address, log=out / RAY_LOG, verbose=config.runtime.verbose)
    propose, close = _proposer(proposer, model, setup.cache, payer, run.settings.prices)
    chosen = _search_settings(config, settings)
    search = Search(out, splits, tasks, journal, evaluate, propose, chosen, budget, costs.worst, say, judged=judged)
    try:
        verdict = _searched(search, budget, status, config.experiment.prompts)
    finally:
        evaluate.close()
        close()
    json_path, html_path = write_report(out, journal, splits, verdict, config, settings)
    return TuneOutcome(out=out, verdict=verdict, json=json_path, html=html_path)


def _check_evaluations(out: Path) -> None:
    """Refuse, in one line and before anything is written or started, a tune whose evaluation a pre-release
    redraft wrote (`redraft.rundir.check_wire`)."""
    for evaluation in sorted(out.glob("evaluations/*/*")):
        check_wire(evaluation)


def _opened(out: Path, tune: str | None, status: StatusTracker, say: Say) -> TuneJournal:
    """The tune's journal, its records stamped with the tune's id; what reading it set aside, said."""
    journal = TuneJournal(out, tune, on_record=status.recorded)
    if (recovered := journal.recovery.line()) is not None:
        say(f"warning: {recovered}")
    return journal


def _searched(search: Search, budget: TuneBudget, status: StatusTracker, prompts: str | None) -> TuneVerdict:
    """The search and its verdict; `Interrupted` counting the tune's iterations, not an evaluation's tasks."""
    journal = search.journal
    try:
        status.enter("search")
        best = search.run()
        budget.release("verdict")
        status.enter("verdict")
        return _verdict(search, best, prompts, search.root)
    except Interrupted:
        done, of = sum(k < status.of for k in journal.iterations), status.of
        raise Interrupted(
            f"interrupted: {done} of {of} iterations done, {len(journal.evaluations)} evaluations recorded",
            done=done,
            total=of,
        ) from None


def _reserve_the_ends(budget: TuneBudget, journal: TuneJournal, worst: Costs, splits: Splits) -> None:
    """Reserve what the start's validation and the verdict cost at worst (less what the journal holds of them),
    before any iteration: `UserError` when the budget cannot pay for them, since a search without its verdict
    would be money spent on nothing a user could trust."""
    begun = (START, "validation") in journal.evaluations
    tests = max(0, 2 - len([key for key in journal.evaluations if key[1] == "test"]))
    start, verdict = (
        worst.evaluation(0 if begun else len(splits.validation)),
        worst.evaluation(tests * len(splits.test)),
    )
    needed = start + verdict
    if not (budget.reserve("start", start) and budget.reserve("verdict", verdict)):
        raise UserError(
            f"the budget cannot pay for the starting prompts on validation and the verdict on the test split "
            f"(at worst {needed.calls:,} calls, ${needed.cost_usd:,.4f}): raise it, or give fewer tasks"
        )


def _search_settings(config: RunConfig, settings: TuneSettings) -> SearchSettings:
    return SearchSettings(
        sections=list(settings.sections),
        minibatch=settings.minibatch,
        max_proposals=settings.max_proposals,
        parallel=settings.parallel,
        examples=settings.examples,
        seed=config.experiment.seed,
    )


def _checked(
    config: RunConfig, settings: TuneSettings, backends: BackendOverrides | None, secret: RunSecret
) -> ResolvedRun:
    """The tune's run, resolved once every setting is known good, its generated tasks seeded with ``secret``;
    `UserError` for the first bad one."""
    if config.experiment.oracle_feedback:
        raise UserError(
            "tune steers by feedback and selects by train and validation grades: --oracle-feedback "
            "would let the held-out grade into the loop; leave it out"
        )
    tunable = sorted(name for name in built_in().templates if not name.startswith("tune_"))
    for section in settings.sections:
        if section not in tunable:
            raise UserError(f"--sections: {unknown_name('section', section, tunable)}")
    if not settings.sections:
        raise UserError("--sections needs at least one section, e.g. draft_system")
    for flag, value, low in (
        ("--minibatch", settings.minibatch, 1),
        ("--max-proposals", settings.max_proposals, 0),
        ("--parallel", settings.parallel, 1),
        ("--examples", settings.examples, 1),
    ):
        if value < low:
            raise UserError(f"{flag} must be at least {low}, got {value}")
    return resolve_run(config, backends=backends, secret=secret)


def _proposer_spec(
    config: RunConfig, settings: TuneSettings, given: BackendSpec | Propose | None
) -> BackendSpec | None:
    """The proposer's model (for the estimate); None for a function given in its place."""
    if given is not None:
        return given if isinstance(given, BackendSpec) else None
    return resolve(settings.proposer or config.experiment.drafter)


def _proposer(
    given: BackendSpec | Propose | None, spec: BackendSpec | None, cache: bool, payer: str, prices: PriceTable
) -> tuple[Propose, Callable[[], None]]:
    """The proposer to call, its calls priced by ``prices``: a function given as is, else an actor on the cluster
    with the proposer's model; and what stops it."""
    if given is not None and not isinstance(given, BackendSpec):
        return priced_proposals(given, prices, ""), lambda: None
    from redraft.actors import RayProposer

    assert spec is not None  # `_proposer_spec` gives one whenever no function is given
    call = CallSettings(temperature=0.7, max_tokens=PROPOSAL_MAX_TOKENS, cache=cache, payer=payer)
    actor = RayProposer(spec, call)
    return priced_proposals(actor, prices, model_of(spec)), actor.close


def _verdict(search: Search, best: PromptCandidate, prompts: str | None, out: Path) -> TuneVerdict:
    journal = search.journal
    if best.id == START:
        return unread(START, len(search.splits.test))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="redraft-verdict") as pool:  # both at once
        start, winner = pool.map(lambda c: search.scored(c, "test"), (START, best.id))
    verdict = decide(start, winner)
    if not verdict.adopted:
        return verdict
    origin = about(prompts) if prompts is not None else {}
    parent = {"parent": prompts or "built-in", "version": origin.get("version", 1)}
    return adopt(verdict, journal.candidates[best.id], parent, out)
