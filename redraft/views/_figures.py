"""What a report aggregates as a run streams past: bounded top-N lists, and the pass rate per round."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Row = TypeVar("Row")


@dataclass
class Top(Generic[Row]):
    """The ``n`` largest rows by key, kept in a bounded heap while streaming."""

    n: int
    heap: list[tuple[Any, int, Row]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, key: Any, row: Row) -> None:
        item = (key, -next(self.seq), row)  # ties: the earlier task wins (rows themselves are never compared)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, item)
        elif item > self.heap[0]:
            heapq.heapreplace(self.heap, item)

    def rows(self) -> list[Row]:
        return [row for _, _, row in sorted(self.heap, reverse=True)]


@dataclass
class RoundCurve:
    """Per round, the share of tasks whose best so far passes; a task that stopped keeps its final state."""

    tasks: int = 0
    direct: Counter[int] = field(default_factory=Counter)
    """Round r: tasks decided at r whose best so far passed."""
    final: Counter[int] = field(default_factory=Counter)
    """Length L: tasks decided for L rounds whose final state passed (carried to later rounds)."""
    lengths: Counter[int] = field(default_factory=Counter)

    def add(self, passed_by_round: list[bool]) -> None:
        """One task: whether its best so far passed after each decided round (none: it counts as failed)."""
        self.tasks += 1
        for r, passed in enumerate(passed_by_round):
            self.direct[r] += passed
        self.lengths[len(passed_by_round)] += 1
        if passed_by_round and passed_by_round[-1]:
            self.final[len(passed_by_round)] += 1

    def depth(self) -> int:
        return max((n for n in self.lengths if self.lengths[n]), default=0)

    def rates(self, depth: int) -> list[float]:
        """The pass rate after each of ``depth`` rounds, over every task added."""
        rates, carried = [], 0
        for r in range(depth):
            carried += self.final[r]  # tasks that stopped after r rounds keep their final state
            rates.append((self.direct[r] + carried) / self.tasks if self.tasks else 0.0)
        return rates

    def still_refining(self, depth: int) -> list[float]:
        """The share of tasks decided in each of ``depth`` rounds."""
        return [
            sum(v for n, v in self.lengths.items() if n > r) / self.tasks if self.tasks else 0.0 for r in range(depth)
        ]
