"""A tune's cost, estimated before the first call: what one task through the loop costs (the run's own
estimate, `redraft.actors.driver.estimate`, over the train split), and what one proposal costs at most."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from redraft.actors.driver import estimate
from redraft.backends.base import BackendSpec
from redraft.backends.pricing import load_prices
from redraft.config import RunConfig
from redraft.engine.estimate import model_of
from redraft.engine.proposer import PROPOSAL_MAX_TOKENS
from redraft.engine.setup import BackendOverrides
from redraft.protocols.messages import Task, Usage
from redraft.tuning._budget import Budget, Costs, scaled
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

    def summary(self, settings: TuneSettings, splits: Splits) -> str:
        sizes = (settings.minibatch, len(splits.validation), len(splits.test), settings.max_proposals)
        worst, expected = self.worst.tune(*sizes), self.expected.tune(*sizes)
        head = (
            f"tune: {len(splits.train)} train, {len(splits.validation)} validation, {len(splits.test)} test tasks; "
            f"up to {settings.max_proposals} proposals, {settings.parallel} at once"
        )
        calls = f"{expected.calls:,} calls expected, {worst.calls:,} at most"
        if self.free:
            return f"{head}; estimate: {calls} (the models cost no USD)"
        return f"{head}; estimate: expected ${expected.cost_usd:,.4f}, worst case ${worst.cost_usd:,.4f}; {calls}"

    def warnings(self, settings: TuneSettings, splits: Splits, budget: Budget) -> list[str]:
        sizes = (settings.minibatch, len(splits.validation), len(splits.test), settings.max_proposals)
        return budget.over(self.worst.tune(*sizes))


def estimate_costs(
    config: RunConfig,
    out: Path,
    splits: Splits,
    tasks: Mapping[str, Task],
    backends: BackendOverrides | None,
    proposer: BackendSpec | None,
) -> TuneCosts:
    """Per-task costs from the run's estimate over the train split; the proposal's at its limits."""
    train = write_tasks([tasks[i] for i in splits.train], out / "tasks" / "train.jsonl")
    # The split is written as JSON lines with the fields' own names: the user's --columns mapped the source file.
    made = estimate(config.replace(tasks=str(train), columns=None, limit=None), backends=backends)
    per = 1 / max(1, made.tasks)
    proposal = Usage(input_tokens=PROPOSAL_INPUT_TOKENS, output_tokens=PROPOSAL_MAX_TOKENS, calls=1)
    price = load_prices(config.runtime.prices).cost(model_of(proposer), proposal) if proposer is not None else 0.0
    proposal = Usage(
        input_tokens=proposal.input_tokens, output_tokens=proposal.output_tokens, calls=1, cost_usd=price or 0.0
    )
    return TuneCosts(
        worst=Costs(task=scaled(made.worst.total, per), proposal=proposal),
        expected=Costs(task=scaled(made.expected.total, per), proposal=scaled(proposal, 0.5)),
        free=made.free and not price,
    )
