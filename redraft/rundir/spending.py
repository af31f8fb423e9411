"""How a run's model calls were spent and what each kind bought, read from its frames.

A strategy that chooses its calls (``adaptive``) sends each draft request with an
`Intent`: a fresh sample, a revision, or a revision with a critique, chosen in a
feedback state against the task's best score then. The draft's verification says
whether it raised that best. A critique is charged to the critiqued revisions of
the round it served. Reports read these, and a resumed run rebuilds what its
strategy had learned from them, so the trace is the one record of both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from redraft.protocols.messages import Action, CritiqueRequest, DraftRequest, FeedbackState, Verification
from redraft.rundir.frames import Frame, KnownFrame

Call = Literal["draft", "critique"]


@dataclass(frozen=True, slots=True)
class Spent:
    """One model call a strategy chose: a draft (with what it bought) or the critique a round's revisions carried."""

    task_id: str
    round: int
    sample: int
    """The draft's sample (for a critique: the first revision of its round that carried it)."""
    call: Call
    action: Action
    state: FeedbackState
    improved: bool | None
    """Whether the draft raised its task's best feedback score (None: a critique, the first round, or a draft
    that never came back verified)."""


def spending(task_id: str, frames: Iterable[Frame]) -> list[Spent]:
    """The calls of one task that carried an intent, in trace order."""
    intents: dict[tuple[int, int], DraftRequest] = {}
    scores: dict[tuple[int, int], float] = {}
    critiques = 0
    spent: list[Spent] = []
    for frame in frames:
        if not isinstance(frame, KnownFrame):
            continue
        message = frame.message
        if isinstance(message, CritiqueRequest):
            critiques += 1
        elif isinstance(message, DraftRequest) and message.intent is not None and message.stage is None:
            intents[(message.round, message.sample)] = message
            if critiques and message.intent.action == "critique":
                spent += [_critique(task_id, message)] * critiques
                critiques = 0
        elif isinstance(message, Verification) and message.stage is None:
            scores[(message.round, message.sample)] = message.score
    for (round_, sample), request in intents.items():
        intent = request.intent
        assert intent is not None
        score = scores.get((round_, sample))
        improved = None if score is None or intent.best_score is None else score > intent.best_score
        spent.append(Spent(task_id, round_, sample, "draft", intent.action, intent.state, improved))
    return spent


def _critique(task_id: str, request: DraftRequest) -> Spent:
    assert request.intent is not None
    return Spent(task_id, request.round, request.sample, "critique", "critique", request.intent.state, None)


@dataclass(frozen=True, slots=True)
class Row:
    """The calls of one action in one feedback state, over a run."""

    state: FeedbackState
    action: Action
    drafts: int
    critiques: int
    raised: int
    """Drafts that raised their task's best score."""
    judged: int
    """Drafts whose outcome is known (verified, after the first round)."""

    @property
    def calls(self) -> int:
        return self.drafts + self.critiques

    @property
    def raised_per_call(self) -> float:
        """What a call of this kind bought: drafts that raised the best, per call spent on them."""
        return self.raised / self.calls if self.calls else 0.0


def spending_table(spent: Sequence[Spent]) -> list[Row]:
    """The calls by (feedback state, action), in the order the states and actions are declared."""
    drafts: Counter[tuple[FeedbackState, Action]] = Counter()
    critiques: Counter[tuple[FeedbackState, Action]] = Counter()
    raised: Counter[tuple[FeedbackState, Action]] = Counter()
    judged: Counter[tuple[FeedbackState, Action]] = Counter()
    for s in spent:
        cell = (s.state, s.action)
        (drafts if s.call == "draft" else critiques)[cell] += 1
        raised[cell] += s.improved is True
        judged[cell] += s.improved is not None
    cells = sorted(set(drafts) | set(critiques), key=_order)
    return [Row(st, a, drafts[(st, a)], critiques[(st, a)], raised[(st, a)], judged[(st, a)]) for st, a in cells]


def over_the_batch(tasks: Sequence[Sequence[Spent]], parts: int = 4) -> list[tuple[range, Counter[Action]]]:
    """The calls of each action in each of ``parts`` consecutive shares of the tasks, in the order they
    finished, each with the tasks' indices: how the choice moved as the batch taught the strategy."""
    size = max(1, -(-len(tasks) // parts))
    shares = [range(k, min(k + size, len(tasks))) for k in range(0, len(tasks), size)]
    return [(share, Counter(s.action for i in share for s in tasks[i])) for share in shares]


def _order(cell: tuple[FeedbackState, Action]) -> tuple[int, int]:
    return get_args(FeedbackState).index(cell[0]), get_args(Action).index(cell[1])
