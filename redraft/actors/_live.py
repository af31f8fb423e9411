"""What a run shows while it goes, beyond its finished tasks: the tasks in flight by the round each is in, the
model calls and tokens of every round that landed (finished tasks' and those still in flight), and the model
hosts' own account (`redraft.actors._hosts`), which moves with every call.

The rounds are read off the checkpoints the arbiters stream back (one a finished round): each reply's ``round``
and ``usage``, and nothing else of the frame is decoded. A task redone after the machinery failed under it
streams its replayed rounds again, and they count again: the figures are the calls the run saw land, for a
person watching, never what a budget is held to (that is the run directory's account).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from redraft.actors._hosts import HostState
from redraft.protocols.messages import Usage
from redraft.rundir.layout import LIVE, write_json


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
    tasks: dict[str, int | None] = field(default_factory=dict)
    """Each task out, by id: the round it is in, or None while it is graded."""

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

    def live(self, out: Iterable[tuple[str, int | None]], hosts: list[HostState]) -> Live:
        """The run as it goes, from the tasks ``out`` (each id with its round, None while graded)."""
        tasks = dict(out)
        rounds = Counter(r for r in tasks.values() if r is not None)
        grading = len(tasks) - rounds.total()
        return Live(dict(sorted(rounds.items())), grading, self.calls, self.tokens, hosts, tasks)


LiveHook = Callable[[Live], None]
"""Told the run as it goes on every turn of the dispatch loop."""
LISTED = 1_000
"""The tasks in flight ``live.json`` names one by one (a batch can have thousands out; the counts hold them all)."""


EVERY_S = 2.0
"""How often, at most, ``live.json`` is written."""


def recorded(root: Path, then: LiveHook | None, *, every_s: float | None = None) -> LiveHook:
    """A hook that writes the run as it goes to ``root/live.json`` (at most every ``every_s``, `EVERY_S` unless
    given; replaced whole, so a reader never sees half of it), for whoever watches the directory (``redraft
    view``), then tells ``then``."""
    last, every = [-float("inf")], EVERY_S if every_s is None else every_s

    def tell(live: Live) -> None:
        if time.monotonic() - last[0] >= every:
            last[0] = time.monotonic()
            state = {
                "at": time.time(),
                "in_flight": live.in_flight,
                "rounds": {str(r): n for r, n in live.rounds.items()},
                "grading": live.grading,
                "calls": live.calls,
                "tokens": live.tokens,
                "tasks": dict(sorted(live.tasks.items())[:LISTED]),
            }
            with contextlib.suppress(OSError):  # the watchers' file: the run's own writes say when the directory fails
                write_json(root / LIVE, state)
        if then is not None:
            then(live)

    return tell
