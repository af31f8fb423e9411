"""A budget in money, and the stronger model a run may escalate to: checked and priced once, where the run is
resolved.

A money budget (``--usd-per-task``) is spent as the price table prices each call, so every model the run's
strategy calls must have a price there (or be free): an unpriced one would spend nothing, and the budget would
bound nothing. An escalation (``--escalate``) is weighed in calls of the drafter's model, so the drafter must
cost something (`redraft.strategies.Escalation`). Each refusal is one line that says what to give.
"""

from __future__ import annotations

from redraft.backends.base import BackendSpec
from redraft.backends.pricing import PriceTable
from redraft.config import Experiment
from redraft.errors import UserError
from redraft.strategies import Escalation, Strategy


def model_of(spec: BackendSpec) -> str:
    """The model name a backend's calls are priced by (its spec string when it names none)."""
    return str(getattr(spec, "model", spec.spec))


def check_escalation(experiment: Experiment, strategy: Strategy) -> None:
    """`UserError` for ``--escalate`` on a strategy that does not choose its calls, or with a budget that cannot
    weigh two prices (calls or tokens)."""
    if experiment.escalate is None:
        return
    if not strategy.shares_batch:
        raise UserError(
            f"--escalate is an action of a strategy that chooses its calls (adaptive); {experiment.strategy} "
            "has no place for it"
        )
    given = [flag for flag, value in (("--calls-per-task", experiment.calls_per_task), ("--tokens-per-task",
             experiment.tokens_per_task)) if value is not None]  # fmt: skip
    if given:
        raise UserError(
            f"--escalate buys calls at another model's price, which {given[0]} cannot weigh: "
            "give the budget in money (--usd-per-task)"
        )


def check_priced(prices: PriceTable, models: dict[str, BackendSpec | None], money: bool) -> None:
    """`UserError` for a model with no price when the budget is in money (``money``), naming the first one."""
    if not money:
        return
    for role, spec in models.items():
        if spec is not None and not prices.known(model := model_of(spec)):
            raise UserError(
                f"--usd-per-task spends what the price table says each call costs, and the {role}'s model "
                f"{model} has no price there: add it with --prices FILE"
            )


def escalation(prices: PriceTable, drafter: BackendSpec, escalate: BackendSpec | None) -> Escalation | None:
    """The run's escalation, priced; `UserError` for a model with no price, or a drafter that costs nothing."""
    if escalate is None:
        return None
    cheap, strong = model_of(drafter), model_of(escalate)
    check_priced(prices, {"drafter": drafter, "escalation": escalate}, True)
    drafter_price, strong_price = prices.price_of(cheap), prices.price_of(strong)
    if drafter_price is None or prices.free(cheap) or not (drafter_price.input or drafter_price.output):
        raise UserError(
            f"--escalate weighs {strong}'s price against the drafter's, and the drafter's model {cheap} costs "
            "nothing: give it a price with --prices FILE"
        )
    strong_usd = (0.0, 0.0) if strong_price is None else (strong_price.input, strong_price.output)
    return Escalation(model=strong, drafter_usd=(drafter_price.input, drafter_price.output), escalated_usd=strong_usd)
