"""A tune's cost, estimated before the first call: what one task through the loop costs (the run's own
estimate, `redraft.actors.driver.estimate`, over the train split), and what one proposal costs at most; on a
resume, of what the journal does not hold yet (`work_left`), beside what it has spent."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from redraft.actors.driver import estimate
from redraft.backends.base import BackendSpec
from redraft.backends.pricing import PriceTable, load_prices
from redraft.config import RunConfig
from redraft.engine.estimate import Estimate, Spend, duration, model_of
from redraft.engine.proposer import PROPOSAL_MAX_TOKENS
from redraft.engine.resolution import BackendOverrides
from redraft.protocols.messages import Task, Usage
from redraft.protocols.tuning import Proposal, ProposeRequest
from redraft.tuning._budget import Costs, TuneBudget, Work, scaled
from redraft.tuning._journal import TuneJournal
from redraft.tuning._search import START, Propose
from redraft.tuning._splits import Splits, write_tasks

if TYPE_CHECKING:
    from redraft.tuning._api import TuneSettings

PROPOSAL_INPUT_TOKENS = 6_000
"""A proposer's prompt at most: the section, its history and the examples, each cut to its limit."""


@dataclass(frozen=True)
class TuneCosts:
    worst: Costs
    expected: Costs
    free: bool
    """Every model is local or scripted."""
    seconds_per_call: tuple[float, float] = (0.0, 0.0)
    """Wall seconds a call of the loop takes, expected and at worst: the run's estimate's wall time over its calls
    (`redraft.engine.estimate.Estimate.wall`), so each model's speed and the tasks in flight are its."""

    def summary(self, settings: TuneSettings, splits: Splits, journal: TuneJournal) -> str:
        """The estimate in one line: of the whole tune, or on a resume of what is left, beside what was spent."""
        left = work_left(journal, settings.max_proposals)
        sizes = (settings.minibatch, len(splits.validation), len(splits.test))
        worst, expected = self.worst.tune(*sizes, left), self.expected.tune(*sizes, left)
        head = (
            f"tune: {len(splits.train)} train, {len(splits.validation)} validation, {len(splits.test)} test tasks; "
            f"up to {settings.max_proposals} proposals, {settings.parallel} at once"
        )
        if journal.evaluations or journal.proposals:
            done = settings.max_proposals - left.iterations
            spent = "" if self.free else f", ${journal.spent().spent_usd:,.4f} spent"
            head += f"; resuming: {done} of {settings.max_proposals} iterations done{spent}; of what is left"
        calls = f"{expected.calls:,} calls expected, {worst.calls:,} at most"
        time = (
            f"about {duration(expected.calls * self.seconds_per_call[0])} expected, "
            f"{duration(worst.calls * self.seconds_per_call[1])} at most"
        )
        if self.free:
            return f"{head}; estimate: {time}; {calls} (the models cost no USD)"
        usd = f"expected ${expected.cost_usd:,.4f}, worst case ${worst.cost_usd:,.4f}"
        return f"{head}; estimate: {time}; {usd}; {calls}"

    def warnings(self, settings: TuneSettings, splits: Splits, budget: TuneBudget, journal: TuneJournal) -> list[str]:
        """A line per budget that what was spent and the worst case of what is left are over."""
        left = work_left(journal, settings.max_proposals)
        return budget.over(
            journal.spent() + self.worst.tune(settings.minibatch, len(splits.validation), len(splits.test), left)
        )


def work_left(journal: TuneJournal, proposals: int) -> Work:
    """What the tune of ``journal`` has left to pay for, with ``proposals`` iterations in all."""
    tests = sum(on == "test" for _, on in journal.evaluations)
    return Work(
        start=int((START, "validation") not in journal.evaluations),
        iterations=max(0, proposals - sum(k < proposals for k in journal.iterations)),
        tests=max(0, 2 - tests),
    )


def estimate_costs(
    config: RunConfig,
    splits: Splits,
    tasks: Mapping[str, Task],
    backends: BackendOverrides | None,
    proposer: BackendSpec | None,
) -> TuneCosts:
    """Per-task costs from the run's estimate over the train split; the proposal's at its limits."""
    with tempfile.TemporaryDirectory(prefix="redraft-tune-estimate-") as scratch:  # nothing lands under --out
        train = write_tasks([tasks[i] for i in splits.train], Path(scratch) / "train.jsonl")
        # The split is written as JSON lines with the fields' own names: the user's --columns mapped the source.
        # Its out, the scratch: a run's estimate asks what its --out holds, and the tune's is no run's.
        scratch_run = config.replace(tasks=str(train), columns=None, limit=None, out=str(Path(scratch) / "run"))
        made = estimate(scratch_run, backends=backends)
    per = 1 / max(1, made.tasks)
    prices = load_prices(config.runtime.prices)
    proposal = Usage(input_tokens=PROPOSAL_INPUT_TOKENS, output_tokens=PROPOSAL_MAX_TOKENS, calls=1)
    model = model_of(proposer) if proposer is not None else "scripted"  # a function in its place calls no model
    proposal = prices.priced(model, proposal)
    return TuneCosts(
        worst=Costs(task=scaled(made.worst.total, per), proposal=proposal),
        expected=Costs(task=scaled(made.expected.total, per), proposal=scaled(proposal, 0.5)),
        free=made.free and prices.free(model),
        seconds_per_call=(_per_call(made, made.expected), _per_call(made, made.worst)),
    )


def _per_call(made: Estimate, spend: Spend) -> float:
    return made.wall(spend) / max(1, spend.total.calls)


def priced_proposals(propose: Propose, prices: PriceTable, model: str) -> Propose:
    """``propose`` with each proposal's calls priced where every role's are (`PriceTable.priced`), by the model the
    reply names (``model``, the proposer's, when it names none), so the tune's budget and report count them."""

    def priced(request: ProposeRequest) -> Proposal:
        proposal = propose(request)
        usage = prices.priced(proposal.model or model, proposal.usage)
        return msgspec.structs.replace(proposal, usage=usage)

    return priced
