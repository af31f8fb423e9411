"""The tune's proposer is priced where every role's calls are (`PriceTable.priced`): its proposals carry their
cost into the journal, the report's spend and the tune's budget (``--budget-usd``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from redraft.backends.pricing import default_prices
from redraft.config import Budgets
from redraft.protocols.messages import Usage
from redraft.protocols.tuning import Proposal, ProposeRequest
from redraft.tuning._budget import Costs, TuneBudget
from redraft.tuning._costs import priced_proposals
from tests.unit.tuning.test_search import Evaluator, search

PROPOSAL = Usage(input_tokens=6_000, output_tokens=1_000, calls=1)
"""$0.0015 at gpt-4o-mini's list price: 6,000 × $0.15 + 1,000 × $0.60 per million tokens."""


def paid_proposer(request: ProposeRequest) -> Proposal:
    """An edit, as a proposer on gpt-4o-mini answers it: its usage unpriced, its model named."""
    text = f"{request.text}\nBe exact ({request.seed})."
    return Proposal(section=request.section, text=text, reason="clarify", usage=PROPOSAL, model="gpt-4o-mini")


def test_each_proposal_is_priced_by_the_table_and_the_journal_counts_it(tmp_path: Path) -> None:
    propose = priced_proposals(paid_proposer, default_prices(), "gpt-4o-mini")  # type: ignore[arg-type]
    made = search(tmp_path, Evaluator("noise"), propose, proposals=3, parallel=1)  # type: ignore[arg-type]
    made.run()
    costs = [p.proposal.usage.cost_usd for p in made.journal.proposals.values()]
    assert costs == [1_500 / 1e6] * 3
    assert made.journal.spent().spent_usd == pytest.approx(0.0045, rel=1e-12)  # the evaluations here cost nothing


def test_the_budget_in_usd_ends_the_search_once_the_proposals_have_spent_it(tmp_path: Path) -> None:
    propose = priced_proposals(paid_proposer, default_prices(), "gpt-4o-mini")  # type: ignore[arg-type]
    made = search(tmp_path, Evaluator("noise"), propose, proposals=6, parallel=1)  # type: ignore[arg-type]
    worst = default_prices().priced("gpt-4o-mini", PROPOSAL)
    made.costs = Costs(task=Usage(calls=1), proposal=worst)
    made.budget = TuneBudget(limits=Budgets(budget_usd=0.004), paid=made.journal.spent)
    made.run()
    # Two proposals paid ($0.0030); a third would bring it to $0.0045, over $0.004.
    assert len(made.journal.iterations) == 2
    assert made.journal.spent().spent_usd == pytest.approx(0.0030, rel=1e-12)


def test_a_proposal_that_names_no_model_is_priced_as_the_proposers() -> None:
    def unnamed(request: ProposeRequest) -> Proposal:
        return Proposal(section=request.section, text="x", reason="r", usage=PROPOSAL)

    request = ProposeRequest(
        section="draft_system",
        text="$instructions",
        placeholders=[],
        limit=100,
        history=[],
        examples=[],
        feedback=0.0,
        seed=0,
    )
    priced = priced_proposals(unnamed, default_prices(), "gpt-4o-mini")(request)
    assert priced.usage.cost_usd == 1_500 / 1e6 and priced.usage.calls == 1
