"""Critic strategies: the rules of play (which roles act in a round, in what order, how often).

The shared machinery (ranking, the round context, revisions, the registry) is in
`redraft.strategies._base`; the built-in strategies live in one small module per
family and register on import, as a third-party strategy would.
"""

from redraft.strategies import (  # noqa: F401 - each registers its own
    _adaptive,
    _critique,
    _feedback,
    _plan_execute,
    _sampling,
    _stepwise,
)
from redraft.strategies._adaptive import feedback_state, ledger_name
from redraft.strategies._base import (
    STRATEGIES,
    CriticRole,
    RoundContext,
    RoundOutcome,
    Scored,
    Share,
    Strategy,
    agreement,
    attach,
    attempt_of,
    contenders,
    get_strategy,
    needs_feedback,
    rank,
    revision_of,
    sample_and_verify,
    severity,
    strategy,
    strategy_names,
    with_critiques,
)
from redraft.strategies._escalation import Escalation
from redraft.strategies._ledger import CallOutcome, Ledger, Tally

__all__ = [
    "STRATEGIES",
    "CallOutcome",
    "CriticRole",
    "Escalation",
    "Ledger",
    "RoundContext",
    "RoundOutcome",
    "Scored",
    "Share",
    "Strategy",
    "Tally",
    "agreement",
    "attach",
    "attempt_of",
    "contenders",
    "feedback_state",
    "get_strategy",
    "ledger_name",
    "needs_feedback",
    "rank",
    "revision_of",
    "sample_and_verify",
    "severity",
    "strategy",
    "strategy_names",
    "with_critiques",
]
