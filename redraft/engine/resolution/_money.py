"""A run's money, resolved once: its price table (read once), its share of a batch's budget, and the stronger
model it may escalate to, priced.

A money budget (``--usd-per-task``) is spent as the price table prices each call, so every model the run's
strategy calls must have a price there (or be free): an unpriced one would spend nothing, and the budget would
bound nothing. An escalation (``--escalate``) is weighed in calls of the drafter's model, so the drafter must
cost something (`redraft.strategies.Escalation`). A batch's budget is given once, in calls, tokens or money,
to a strategy that spends it. Each refusal is one line that says what to give.
"""

from __future__ import annotations

from dataclasses import dataclass

from redraft.backends.base import BackendSpec
from redraft.backends.pricing import Price, PriceTable, load_prices
from redraft.config import Experiment, RunConfig
from redraft.engine.resolution._roles import RoleSetup
from redraft.errors import UserError
from redraft.strategies import Escalation, Share, Strategy


@dataclass(frozen=True)
class Money:
    """What a run's calls cost and what it may spend, resolved once (see the module docstring)."""

    prices: PriceTable
    """The price table (``--prices`` over the built-in one), read once: every reader of the run takes it here."""
    share: Share | None
    """Each task's share of the batch's budget, for a strategy that spends to it (``adaptive``)."""
    escalation: Escalation | None
    """The stronger model (``--escalate``), with both models' prices."""


@dataclass(frozen=True)
class Quote:
    """What the price table says of one model a run calls: its price (None: not in the table) and whether its
    calls cost nothing (a local or scripted model)."""

    model: str
    price: Price | None
    free: bool

    @property
    def known(self) -> bool:
        return self.free or self.price is not None


def resolve_money(config: RunConfig, strategy: Strategy, setup: RoleSetup) -> Money:
    """The money of the run whose roles ``setup`` resolved: the price table read once and each of its models
    quoted from it; `UserError` on the first bad budget, price file or unpriced model."""
    experiment = config.experiment
    check_share(experiment, strategy)
    check_escalation(experiment, strategy)
    critic = setup.critic if strategy.critic_role == "critic" else None
    named = {"drafter": setup.drafter, "critic": critic, "escalation": setup.escalate}
    models = {role: model_of(spec) for role, spec in named.items() if spec is not None}
    prices = load_prices(config.runtime.prices)
    quotes = {role: Quote(model, prices.price_of(model), prices.free(model)) for role, model in models.items()}
    money = experiment.usd_per_task is not None
    check_priced({role: quotes[role] for role in ("drafter", "critic") if role in quotes}, money)
    return Money(prices=prices, share=share(experiment), escalation=escalation(quotes))


def model_of(spec: BackendSpec) -> str:
    """The model name a backend's calls are priced by (its spec string when it names none)."""
    return str(getattr(spec, "model", spec.spec))


def check_share(experiment: Experiment, strategy: Strategy) -> None:
    """`UserError` for a batch budget the strategy does not spend, two at once, or tokens too few for a draft."""
    given = (
        ("--calls-per-task", experiment.calls_per_task),
        ("--tokens-per-task", experiment.tokens_per_task),
        ("--usd-per-task", experiment.usd_per_task),
    )
    flags = [flag for flag, value in given if value is not None]
    if not flags:
        return
    if not strategy.shares_batch:
        raise UserError(
            f"{flags[0]} is the budget of a strategy that chooses its calls (adaptive); "
            f"{experiment.strategy} spends --samples drafts a round for up to --max-rounds rounds"
        )
    if len(flags) > 1:
        raise UserError(
            "give the batch's budget in calls (--calls-per-task), in tokens (--tokens-per-task) or in money "
            f"(--usd-per-task), one of them, not {' and '.join(flags)}"
        )
    tokens = experiment.tokens_per_task
    if tokens is not None and tokens < experiment.max_tokens:
        raise UserError(
            f"--tokens-per-task {tokens} cannot pay for one draft of up to --max-tokens {experiment.max_tokens} "
            "tokens (and its prompt)"
        )


def share(experiment: Experiment) -> Share | None:
    """Each task's share of the batch's budget (`check_share` has passed)."""
    if experiment.calls_per_task is not None:
        return Share(experiment.calls_per_task, "calls")
    if experiment.tokens_per_task is not None:
        return Share(float(experiment.tokens_per_task), "tokens")
    if experiment.usd_per_task is not None:
        return Share(experiment.usd_per_task, "usd")
    return None


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


def check_priced(quotes: dict[str, Quote], money: bool) -> None:
    """`UserError` for a model with no price when the budget is in money (``money``), naming the first one."""
    if not money:
        return
    for role, quote in quotes.items():
        if not quote.known:
            raise UserError(
                f"--usd-per-task spends what the price table says each call costs, and the {role}'s model "
                f"{quote.model} has no price there: add it with --prices FILE"
            )


def escalation(quotes: dict[str, Quote]) -> Escalation | None:
    """The run's escalation (the ``escalation`` quote beside the ``drafter``'s), priced; `UserError` for a model
    with no price, or a drafter that costs nothing."""
    strong = quotes.get("escalation")
    if strong is None:
        return None
    cheap = quotes["drafter"]
    check_priced({"drafter": cheap, "escalation": strong}, True)
    if cheap.price is None or cheap.free or not (cheap.price.input or cheap.price.output):
        raise UserError(
            f"--escalate weighs {strong.model}'s price against the drafter's, and the drafter's model {cheap.model} "
            "costs nothing: give it a price with --prices FILE"
        )
    strong_usd = (0.0, 0.0) if strong.price is None else (strong.price.input, strong.price.output)
    return Escalation(model=strong.model, drafter_usd=(cheap.price.input, cheap.price.output), escalated_usd=strong_usd)
