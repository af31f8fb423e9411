"""Critic strategies: which roles act in a round, in what order, how often.

The shared machinery (ranking, the round context, the registry) is in
`redraft.protocols.strategies.base`; the built-in strategies live in one small
module per family and register on import, as a third-party strategy would.
"""

from redraft.protocols.strategies import critique, feedback, sampling, stepwise
from redraft.protocols.strategies.base import (
    MAX_CONTENDERS,
    STRATEGIES,
    CriticRole,
    RoundContext,
    RoundOutcome,
    Scored,
    Strategy,
    agreement,
    attach,
    contenders,
    get_strategy,
    needs_feedback,
    rank,
    sample_and_verify,
    strategy,
    strategy_names,
    with_critiques,
)

__all__ = [
    "MAX_CONTENDERS",
    "STRATEGIES",
    "CriticRole",
    "RoundContext",
    "RoundOutcome",
    "Scored",
    "Strategy",
    "agreement",
    "attach",
    "contenders",
    "critique",
    "feedback",
    "get_strategy",
    "needs_feedback",
    "rank",
    "sample_and_verify",
    "sampling",
    "stepwise",
    "strategy",
    "strategy_names",
    "with_critiques",
]
