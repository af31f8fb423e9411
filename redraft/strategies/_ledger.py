"""What the `adaptive` strategy learns across a batch, and the calls its tasks share: one `Ledger` per batch.

The ledger keeps, for each feedback state and action, how many calls were made
and how many raised their task's best feedback score, and a bank of model calls:
a task that stops under its share of the batch's budget leaves the rest there,
and a task still failing borrows from it. Every arbiter of a run reaches the one
ledger of its batch through `redraft.services` (a named actor on a cluster, a
plain object in one process).

Every entry is keyed (a call by task, round and sample; a loan by task and round;
a deposit by task) and a key written twice keeps its last value, so a task the
machinery redoes counts once however often it reports. The same keyed facts are in
the run directory's frames (each draft's `Intent` and its verification), so a
resumed run rebuilds its ledger from them (`Ledger.prime`) before any task runs.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Iterable
from typing import NamedTuple

from redraft.protocols.messages import Action, FeedbackState

ACTIONS: tuple[Action, ...] = typing.get_args(Action)
STATES: tuple[FeedbackState, ...] = typing.get_args(FeedbackState)


class CallOutcome(NamedTuple):
    """One call's outcome: whether the draft it asked for raised its task's best feedback score."""

    key: str
    """``task/round/sample``: the same call reported twice is one observation."""
    state: FeedbackState
    action: Action
    improved: bool


class Tally(NamedTuple):
    """Calls of one kind in one state, and how many of them raised the task's best score."""

    wins: int = 0
    tries: int = 0

    def plus(self, improved: bool, sign: int = 1) -> Tally:
        return Tally(self.wins + sign * improved, self.tries + sign)


Table = dict[tuple[FeedbackState, Action], Tally]
"""What was learned: a `Tally` per (feedback state, action); a pair never tried is absent."""


class Ledger:
    """The statistics and the bank of one batch (see the module docstring)."""

    def __init__(self, observations: Iterable[CallOutcome] = (), settled: dict[str, float] | None = None) -> None:
        """A ledger that already knows ``observations`` and ``settled`` deposits (see `prime`)."""
        self._observed: dict[str, CallOutcome] = {}
        self._table: Table = {}
        self._deposits: dict[str, float] = {}
        self._loans: dict[str, float] = {}
        self.prime(observations, settled or {})

    def record(self, observations: Iterable[CallOutcome]) -> Table:
        """Add calls' outcomes (a key seen before is replaced, not added); what is learned so far."""
        for seen in observations:
            before = self._observed.get(seen.key)
            if before is not None:
                self._count(before, -1)
            self._observed[seen.key] = seen
            self._count(seen, 1)
        return dict(self._table)

    def table(self) -> Table:
        return dict(self._table)

    def borrow(self, key: str, want: float) -> float:
        """Up to ``want`` calls from the bank for the loan ``key`` (task and round); what was lent (the same
        again if the key was lent before: a redone task borrows once)."""
        if key in self._loans:
            return self._loans[key]
        granted = max(0.0, min(want, self.balance()))
        self._loans[key] = granted
        return granted

    def settle(self, task_id: str, net: float) -> None:
        """A task ended: ``net`` is its share plus what it borrowed, less what it spent (negative: it spent
        more than that, which a resumed run's rebuilt bank records as such)."""
        self._deposits[task_id] = net

    def balance(self) -> float:
        """Calls in the bank: what finished tasks left, less what tasks borrowed."""
        return sum(self._deposits.values()) - sum(self._loans.values())

    def prime(self, observations: Iterable[CallOutcome], settled: dict[str, float]) -> None:
        """Rebuild from a run directory's finished tasks: their calls' outcomes, and each one's share less
        what it spent (what it borrowed is part of what it spent, and no loan of it is outstanding)."""
        self.record(observations)
        self._deposits.update(settled)

    def _count(self, seen: CallOutcome, sign: int) -> None:
        cell = (seen.state, seen.action)
        tally = self._table.get(cell, Tally()).plus(seen.improved, sign)
        if tally.tries:
            self._table[cell] = tally
        else:
            self._table.pop(cell, None)


def table_rows(table: Table) -> list[tuple[FeedbackState, Action, Tally]]:
    """Every (state, action) of ``table`` in the order of their declarations, for people to read."""
    return [(s, a, table[(s, a)]) for s, a in itertools.product(STATES, ACTIONS) if (s, a) in table]
