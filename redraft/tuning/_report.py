"""A tune's report: ``tune.json`` (every figure, for tools) and ``tune.html`` (the same, to look at).

Both hold the verdict; the splits' sizes; each candidate's lineage (its parent, the section its edit
rewrote, the edit as a diff, the proposer's stated reason) and its scores on each set it ran on
(minibatch, validation, test); every iteration, refused edits with why; and the spend, split between
the evaluations and the proposer. The page plots each candidate's validation figure by iteration, once
there are two to compare. Iterations are counted from 1, as the terminal counts them: candidate c<n> is
the child of iteration n (the journal keeps its own count from 0).
"""

from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from redraft.config import RunConfig
from redraft.protocols.messages import Usage
from redraft.rundir.history import text_diff
from redraft.tuning._edits import text_of
from redraft.tuning._journal import TuneJournal
from redraft.tuning._splits import SPLITS, Splits
from redraft.tuning._verdict import TuneVerdict
from redraft.views.templating import render

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from redraft.tuning._api import TuneSettings

TUNE_JSON, TUNE_HTML = "tune.json", "tune.html"


class CandidateRow(msgspec.Struct, kw_only=True):
    id: str
    parent: str | None
    iteration: int | None
    """The iteration that proposed it, from 1 (None for the start)."""
    section: str | None
    reason: str
    file: str
    diff: list[str]
    """The edit as a unified diff of its section against the parent's."""
    minibatch: float | None = None
    """Its mean figure on the minibatch it was proposed on."""
    parent_minibatch: float | None = None
    kept: bool | None = None
    validation: float | None = None
    test: float | None = None


class IterationRow(msgspec.Struct, kw_only=True):
    number: int
    """From 1, as the terminal says "iteration 3 of 8"."""
    parent: str
    section: str
    child: str | None
    kept: bool
    parent_score: float | None
    child_score: float | None
    validation: float | None
    refused: str | None
    detail: str
    reason: str


class TuneSpend(msgspec.Struct, kw_only=True):
    total: Usage
    evaluations: Usage
    proposals: Usage
    evaluation_runs: int


class TuneReport(msgspec.Struct, kw_only=True):
    scenario: str
    strategy: str
    drafter: str
    proposer: str
    sections: list[str]
    splits: dict[str, int]
    split_seed: int
    verdict: TuneVerdict
    candidates: list[CandidateRow]
    iterations: list[IterationRow]
    refused: dict[str, int]
    spend: TuneSpend
    train_labels: str | None = None
    """The run whose people's labels were the train evidence (``--train-labels``); None: train was split by seed."""


def build(
    journal: TuneJournal, splits: Splits, verdict: TuneVerdict, config: RunConfig, settings: TuneSettings
) -> TuneReport:
    """The report of a tune from its journal."""
    iterations = [journal.iterations[k] for k in sorted(journal.iterations)]
    proposals = journal.proposals
    rows = [
        IterationRow(
            number=i.number + 1,
            parent=i.parent,
            section=i.section,
            child=i.child,
            kept=i.kept,
            parent_score=i.parent_score,
            child_score=i.child_score,
            validation=i.validation,
            refused=proposals[i.number].proposal.refused if i.number in proposals else None,
            detail=proposals[i.number].proposal.detail if i.number in proposals else i.note,
            reason=proposals[i.number].proposal.reason if i.number in proposals else "",
        )
        for i in iterations
    ]
    evaluations = sum((e.usage for e in journal.evaluations.values()), Usage())
    proposed = sum((p.proposal.usage for p in proposals.values()), Usage())
    e = config.experiment
    return TuneReport(
        scenario=e.scenario,
        strategy=e.strategy,
        drafter=e.drafter,
        proposer=_proposer(journal) or settings.proposer or e.drafter,
        sections=list(settings.sections),
        splits={name: len(splits.of(name)) for name in SPLITS},
        split_seed=splits.seed,
        train_labels=None if settings.train_labels is None else str(settings.train_labels),
        verdict=verdict,
        candidates=_candidates(journal),
        iterations=rows,
        refused=dict(Counter(r.refused for r in rows if r.refused)),
        spend=TuneSpend(
            total=evaluations + proposed,
            evaluations=evaluations,
            proposals=proposed,
            evaluation_runs=len(journal.evaluations),
        ),
    )


def _proposer(journal: TuneJournal) -> str | None:
    """The model the proposals came from, as it named itself (None: no proposal had one, e.g. a function)."""
    models = Counter(p.proposal.model for p in journal.proposals.values() if p.proposal.model)
    return models.most_common(1)[0][0] if models else None


def _candidates(journal: TuneJournal) -> list[CandidateRow]:
    by_child = {i.child: i for i in journal.iterations.values() if i.child is not None}
    rows = []
    for c in sorted(journal.candidates.values(), key=lambda c: -1 if c.iteration is None else c.iteration):
        diff: list[str] = []
        if c.parent is not None and c.section is not None:
            before = text_of(journal.candidates[c.parent].entries, c.section)[1]
            diff = text_diff(before, text_of(c.entries, c.section)[1], f"{c.parent}:{c.section}", f"{c.id}:{c.section}")
        step = by_child.get(c.id)
        validation = journal.evaluations.get((c.id, "validation"))
        test = journal.evaluations.get((c.id, "test"))
        rows.append(
            CandidateRow(
                id=c.id,
                parent=c.parent,
                iteration=None if c.iteration is None else c.iteration + 1,
                section=c.section,
                reason=c.reason,
                file=c.file,
                diff=diff,
                minibatch=step.child_score if step else None,
                parent_minibatch=step.parent_score if step else None,
                kept=step.kept if step else None,
                validation=validation.mean if validation else None,
                test=test.mean if test else None,
            )
        )
    return rows


def write_report(
    out: Path, journal: TuneJournal, splits: Splits, verdict: TuneVerdict, config: RunConfig, settings: TuneSettings
) -> tuple[Path, Path]:
    """``tune.json`` and ``tune.html`` under ``out``."""
    report = build(journal, splits, verdict, config, settings)
    json_path = out / TUNE_JSON
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(report)) + b"\n")
    html_path = out / TUNE_HTML
    html_path.write_text(render("tune.html.j2", title="redraft tune", r=report, plot=_plot(report)), encoding="utf-8")
    return json_path, html_path


def _plot(report: TuneReport) -> str | None:
    """Each candidate's validation figure by iteration (kept ones), as a base64 PNG; None with fewer than two to
    compare (the page says so) or without matplotlib."""
    try:
        from redraft.views.plots import png
    except ImportError:
        return None
    fig = validation_figure(report)
    return None if fig is None else base64.b64encode(png(fig)).decode()


def validation_figure(report: TuneReport) -> Figure | None:
    """The plot of `_plot`: the iterations on whole-number ticks from the start (0) to the last, the figures on
    their whole range, 0 to 1; None with fewer than two points, where axes would only frame one dot."""
    from redraft.views.plots import count_axis, figure

    shown = [(c.iteration or 0, c.validation, c.id) for c in report.candidates if c.validation is not None]
    if len(shown) < 2:
        return None
    fig, ax = figure()
    ax.plot([x for x, _, _ in shown], [y for _, y, _ in shown], "o", color="#2f6db5", clip_on=False)
    for x, y, name in shown:
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    last = max(len(report.iterations), *(x for x, _, _ in shown))
    ax.set_xlim(-0.5, last + 0.5)
    count_axis(ax.xaxis)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("iteration (0: the starting prompts)")
    ax.set_ylabel("mean validation figure")
    return fig
