"""A tune's one budget (``--budget-calls``, ``--budget-usd``, ``--budget-tokens``) over every evaluation and
proposal, and its estimate before the first call.

Work reserves its worst case before it starts (an iteration: two minibatch evaluations, a validation
evaluation and a proposal; the verdict: both prompts on the test split), and what has been paid for is
the journal's record (`redraft.tuning._journal.TuneJournal.spent`). An iteration starts only if what is
paid, what is reserved and its own worst case fit in the budget; the verdict's reservation is made
first, so a budget can always pay for the verdict of what it bought. So the budget is never overrun by
more than the estimate's error on a worst case, and never by an iteration it could not afford.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from redraft.config import Budgets
from redraft.protocols.messages import Usage


def scaled(usage: Usage, factor: float) -> Usage:
    """``usage`` times ``factor`` (counts rounded up: a worst case)."""
    return Usage(
        input_tokens=math.ceil(usage.input_tokens * factor),
        output_tokens=math.ceil(usage.output_tokens * factor),
        calls=math.ceil(usage.calls * factor),
        cost_usd=usage.cost_usd * factor,
    )


@dataclass(frozen=True)
class Costs:
    """Worst cases: one task through the loop, one proposal."""

    task: Usage
    proposal: Usage

    def evaluation(self, tasks: int) -> Usage:
        return scaled(self.task, tasks)

    def iteration(self, minibatch: int, validation: int) -> Usage:
        return self.evaluation(2 * minibatch + validation) + self.proposal

    def tune(self, minibatch: int, validation: int, test: int, left: Work) -> Usage:
        """The worst case of what the tune has ``left`` to do: the start on validation (unless recorded), the
        iterations not recorded, each kept, and the verdict's test evaluations not recorded."""
        every = scaled(self.iteration(minibatch, validation), left.iterations)
        return self.evaluation(left.start * validation + left.tests * test) + every


@dataclass(frozen=True)
class Work:
    """What a tune has left to pay for (all of it for a new tune; on a resume, what its journal does not hold)."""

    start: int
    """1 when the starting prompts have not run on validation yet, else 0."""
    iterations: int
    """Iterations not recorded, up to ``--max-proposals``."""
    tests: int
    """The verdict's evaluations on the test split not recorded (of 2: the start and the winner)."""


_LIMITS = (("budget_calls", "calls"), ("budget_usd", "spent_usd"), ("budget_tokens", "total_tokens"))
"""Each limit and the `Usage` figure it holds: USD is what the tune paid (the proposer's calls included), the
response cache's savings left out, as a run's budget counts it."""


@dataclass
class TuneBudget:
    """What may still be reserved, given the limits, what is paid and what is reserved."""

    limits: Budgets
    paid: Callable[[], Usage]
    """What has been paid for so far (the journal's ``spent``)."""
    reserved: dict[str, Usage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, key: str, worst: Usage) -> bool:
        """Reserve ``worst`` for ``key`` if it fits under every limit; whether it did."""
        with self._lock:
            held = sum(self.reserved.values(), Usage()) + worst + self.paid()
            for setting, unit in _LIMITS:
                limit = getattr(self.limits, setting)
                if limit is not None and getattr(held, unit) > limit:
                    return False
            self.reserved[key] = worst
            return True

    def release(self, key: str) -> None:
        """The work of ``key`` has ended: what it paid is in the journal now."""
        with self._lock:
            self.reserved.pop(key, None)

    def over(self, worst: Usage) -> list[str]:
        """A line per limit ``worst`` is over (for the estimate's warnings)."""
        lines = []
        for setting, unit in _LIMITS:
            limit = getattr(self.limits, setting)
            if limit is not None and getattr(worst, unit) > limit:
                flag = "--" + setting.replace("_", "-")
                lines.append(
                    f"the worst case is over {flag} {limit:g}: the budget ends the search before --max-proposals"
                )
        return lines
