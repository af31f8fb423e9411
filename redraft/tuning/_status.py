"""Where a tune stands, as one typed record its caller draws as one line (`TuneStatus`): the phase, iterations
recorded of ``--max-proposals``, evaluations and proposals recorded, and what they spent. It is the tune's, not
its evaluations': an evaluation is an ordinary run, and its own tasks' counts are not added up here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from redraft.protocols.messages import Usage
from redraft.tuning._journal import Record, TuneJournal
from redraft.tuning._search import START

TunePhase = Literal["start", "search", "verdict"]
"""The starting prompts on validation, the iterations, the verdict on the test split."""


@dataclass(frozen=True)
class TuneStatus:
    phase: TunePhase
    iterations: int
    """Iterations recorded (refused edits included)."""
    of: int
    """``--max-proposals``: the iterations the search may run."""
    evaluations: int
    """Evaluations recorded (each a run of one candidate over one set of tasks)."""
    proposals: int
    spent: Usage
    """What the recorded evaluations and proposals spent."""


@dataclass
class StatusTracker:
    """Tells ``tell`` the tune's status whenever its journal records something or its phase changes."""

    of: int
    tell: Callable[[TuneStatus], None] | None
    journal: TuneJournal | None = None
    phase: TunePhase = "start"

    def recorded(self, record: Record) -> None:
        self.now()

    def enter(self, phase: TunePhase) -> None:
        self.phase = phase
        self.now()

    def now(self) -> None:
        journal = self.journal
        if self.tell is None or journal is None:
            return
        iterations = sum(k < self.of for k in journal.iterations)
        started = (START, "validation") in journal.evaluations  # the search begins by scoring the start
        self.tell(
            TuneStatus(
                phase="start" if self.phase == "search" and not started else self.phase,
                iterations=iterations,
                of=self.of,
                evaluations=len(journal.evaluations),
                proposals=len(journal.proposals),
                spent=journal.spent(),
            )
        )
