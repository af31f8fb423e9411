"""What every arbiter of a run is given, resolved once: its rules with one value each (`ArbiterSettings`)."""

from __future__ import annotations

from redraft.backends.pricing import load_prices
from redraft.config import RunConfig
from redraft.engine._rules import ArbiterSettings
from redraft.engine.resolution._money import Money, share
from redraft.protocols.messages import RoleName


def arbiter_settings(
    config: RunConfig, money: Money | None = None, paced: frozenset[RoleName] = frozenset()
) -> ArbiterSettings:
    """The strategy, K, the seed, convergence, revision mode, the run's ``money`` (its prices, share and
    escalation; without it, the price table ``--prices`` names, the share, and no escalation) and the roles whose
    calls pace themselves (``paced``: its `Cast`'s)."""
    experiment = config.experiment
    money = money or Money(prices=load_prices(config.runtime.prices), share=share(experiment), escalation=None)
    return ArbiterSettings(
        paced_roles=paced,
        strategy=experiment.strategy,
        samples=experiment.samples,
        seed=experiment.seed,
        repeat=experiment.repeat,
        convergence=config.convergence(),
        prices=money.prices,
        revision_mode="patch" if experiment.patch else "rewrite",
        share=money.share,
        escalation=money.escalation,
    )
