"""What a run shows while it goes, beyond its finished tasks: the tasks in flight by the round each is in, the
model calls and tokens of every round that landed (finished tasks' and those still in flight), and the model
hosts' own account (`redraft.actors._hosts`), which moves with every call.

The rounds are read off the checkpoints the arbiters stream back (one a finished round): each reply's ``round``
and ``usage``, and nothing else of the frame is decoded. A task redone after the machinery failed under it
streams its replayed rounds again, and they count again: the figures are the calls the run saw land, for a
person watching, never what a budget is held to (that is the run directory's account).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import msgspec

from redraft.actors._hosts import HostState
from redraft.protocols.messages import Usage


class _Peek(msgspec.Struct, kw_only=True):
    """The fields of a frame the tally reads (a reply's; the rest of the frame is skipped)."""

    kind: str = ""
    round: int = -1
    usage: Usage | None = None


_peek = msgspec.msgpack.Decoder(_Peek)
_REPLIES = frozenset({"draft", "verification", "critique", "reflection"})


@dataclass(frozen=True)
class Live:
    """A run as it goes, for the progress line."""

    rounds: dict[int, int]
    """Tasks in their loop, by the round each is in (0 the first)."""
    grading: int
    """Tasks whose loop ended, being graded."""
    calls: int
    """Model calls in the rounds that landed."""
    tokens: int
    """The tokens those calls made (output tokens)."""
    hosts: list[HostState] = field(default_factory=list)
    """The model hosts' own account (none for a run on providers)."""

    @property
    def in_flight(self) -> int:
        return sum(self.rounds.values()) + self.grading


class LiveTally:
    """The calls and tokens of the rounds landed so far (see the module docstring)."""

    def __init__(self) -> None:
        self.calls = self.tokens = 0

    def landed(self, frames: list[bytes]) -> int:
        """Count a checkpoint's replies; the round its task is in next (one past the last round it holds, or -1
        when it holds none)."""
        last = -1
        for frame in frames:
            peek = _peek.decode(frame)
            if peek.kind in _REPLIES and peek.usage is not None:
                self.calls += peek.usage.calls
                self.tokens += peek.usage.output_tokens
            last = max(last, peek.round)
        return last + 1 if last >= 0 else -1

    def live(self, rounds: Counter[int], grading: int, hosts: list[HostState]) -> Live:
        return Live(dict(sorted(rounds.items())), grading, self.calls, self.tokens, hosts)
