"""What every arbiter of a run is given, resolved once: its rules with one value each (`ArbiterSettings`)."""

from __future__ import annotations

from redraft.backends.pricing import load_prices
from redraft.config import RunConfig
from redraft.engine._rules import ArbiterSettings
from redraft.engine.resolution._money import Money, share
from redraft.protocols.messages import RoleName


def settings_of(config: RunConfig, money: Money, paced: frozenset[RoleName]) -> ArbiterSettings:
    """The strategy, K, the seed, convergence and revision mode of ``config``, the run's resolved ``money`` (its
    prices, share and escalation) and the roles whose calls pace themselves (``paced``: its `Cast`'s)."""
    experiment = config.experiment
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


def arbiter_settings(config: RunConfig) -> ArbiterSettings:
    """The settings of an arbiter of ``config`` without its roles resolved (a loop of scripted roles, in tests and
    benchmarks): the price table ``--prices`` names and the batch's share, no escalation, no paced role."""
    money = Money(prices=load_prices(config.runtime.prices), share=share(config.experiment), escalation=None)
    return settings_of(config, money, frozenset())
