"""What lies under the viewer's root: every run directory, comparison, tune and judge card, newest first.

A directory's kind is told by its marks (`redraft.rundir.kinds`); its state by its ``writer.lock`` and its
``summary.json``: *running* while a live writer holds the lock (`redraft.rundir.lock`; a holder on another
host, which this one cannot see, counts as running), *finished* when its summary counts every task its
records hold, *interrupted* otherwise. The walk stops at each directory it recognises (a comparison's lanes
are listed on the comparison's page, not beside it) and never follows a symbolic link out of the root.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from redraft.rundir import COMPARISON, JUDGE_CARD, RUN, TUNE, DirKind
from redraft.rundir.layout import LIVE, MANIFEST, SUMMARY, read_object
from redraft.rundir.lock import LOCK, gone, read_holder, this_process

State = Literal["running", "finished", "interrupted"]
KINDS = (RUN, COMPARISON, TUNE, JUDGE_CARD)
MAX_DEPTH = 4
"""How deep under the root the walk looks for directories."""


@dataclass(frozen=True)
class Found:
    """A directory redraft wrote, under the root."""

    path: Path
    rel: str
    """Its path relative to the root, with ``/`` (``.`` for the root itself)."""
    kind: DirKind
    modified: float
    """When it last changed (its newest mark's mtime): the list's order."""


def walk(root: Path) -> Iterator[Found]:
    """Every directory of a known kind under ``root`` (itself included), at most `MAX_DEPTH` deep."""
    yield from _walk(root, root, 0)


def _walk(root: Path, here: Path, depth: int) -> Iterator[Found]:
    try:
        entries = {e.name: e for e in os.scandir(here)}
    except OSError:
        return
    kind = next((k for k in KINDS if any(mark in entries for mark in k.marks)), None)
    if kind is not None:
        times = [_mtime(entries[mark]) for mark in kind.marks if mark in entries]
        rel = here.relative_to(root).as_posix()
        yield Found(here, rel, kind, max(times))
        return
    if depth >= MAX_DEPTH:
        return
    for name in sorted(entries):
        entry = entries[name]
        if not name.startswith(".") and entry.is_dir(follow_symlinks=False):
            yield from _walk(root, here / name, depth + 1)


def found_at(root: Path, path: Path) -> Found | None:
    """``path`` (inside ``root``, both resolved) as the directory of the kind its marks say, or None."""
    try:
        names = {entry.name for entry in os.scandir(path)}
    except OSError:
        return None
    kind = next((k for k in KINDS if any(mark in names for mark in k.marks)), None)
    return None if kind is None else Found(path, path.relative_to(root).as_posix(), kind, 0.0)


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def listed(root: Path) -> list[Found]:
    """`walk`, newest first."""
    return sorted(walk(root), key=lambda f: -f.modified)


def writer_alive(path: Path) -> bool:
    """Whether a live writer holds ``path`` (its lock names a process that has not ended, or one on another host
    this one cannot see)."""
    holder = read_holder(path / LOCK)
    if holder is None:
        return False
    return gone(holder, this_process()) is not True


def run_state(path: Path, done: int) -> State:
    """A run directory's state, ``done`` the tasks its records hold."""
    if writer_alive(path):
        return "running"
    summary = read_object(path / SUMMARY)
    return "finished" if summary and summary.get("tasks") == done else "interrupted"


def total_tasks(path: Path) -> int | None:
    """The tasks a run was asked for (its config's ``limit``), or None when its manifest does not say."""
    limit = (read_object(path / MANIFEST).get("config") or {}).get("limit")
    return limit if isinstance(limit, int) and limit > 0 else None


def inside(root: Path, rel: str) -> Path | None:
    """``root/rel`` when it resolves (symbolic links followed) to a place inside ``root``, else None: how every
    path a request names is checked."""
    base = root.resolve()
    if "\x00" in rel:
        return None
    target = (base / rel).resolve()
    return target if target == base or base in target.parents else None


class InFlight(msgspec.Struct, frozen=True):
    """A running run's tasks out, as its driver last wrote them (``live.json``, `redraft.actors._live.recorded`)."""

    in_flight: int
    rounds: dict[int, int]
    """Tasks in their loop, by round."""
    grading: int
    calls: int
    tokens: int
    tasks: dict[str, int | None]
    """The tasks out by id (up to the first thousand) with the round each is in, None while graded."""


def in_flight(path: Path) -> InFlight | None:
    """What a running run's driver last said is in flight; None when it said nothing (a run written before 0.2, a
    run on a host that is not this one's to say) or what it wrote is not of that shape."""
    try:
        return msgspec.convert(read_object(path / LIVE), InFlight, strict=False)
    except msgspec.ValidationError:
        return None
