"""Which directories redraft writes into: a new or empty one, or one of the same kind to resume, never a
directory of something else (a repository's docs, a folder of photos, another kind's directory).

A kind is told by the files it makes (`DirKind.marks`): a run by its ``manifest.json`` (or its journals),
a comparison by its ``comparison.json`` or its lanes' folders, a tune by ``tune-manifest.json``, ``splits.json`` or
its ``evaluations``, a judge card by ``judge-card.json``. A directory holding only what a run may leave before
its first mark (`LEFTOVERS`: the lock, Ray's log) counts as empty. Nothing lands in a docs tree either: a
directory inside the ``docs_dir`` of an ``mkdocs.yml`` above it is refused, empty or not, since the site would
publish it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from redraft.errors import UserError
from redraft.rundir.layout import MANIFEST, RAY_LOG, RESULTS, TRACE
from redraft.rundir.lock import LOCK


@dataclass(frozen=True)
class DirKind:
    """A kind of directory redraft writes, and the entries that show a directory is one."""

    name: str
    marks: tuple[str, ...]


RUN = DirKind("run", (MANIFEST, RESULTS, TRACE))
COMPARISON = DirKind("comparison", ("comparison.json", "arms", "baseline"))
TUNE = DirKind("tune", ("tune-manifest.json", "splits.json", "evaluations"))
JUDGE_CARD = DirKind("judge card", ("judge-card.json",))
KINDS = (RUN, COMPARISON, TUNE, JUDGE_CARD)

LEFTOVERS = frozenset({LOCK, RAY_LOG, ".DS_Store"})
"""Entries that do not make a directory someone's: what a command may leave before its first mark."""


def check_kind(root: Path, kind: DirKind, what: str = "--out") -> None:
    """`UserError` (one line naming what is there) unless ``root`` is missing, empty, or a ``kind``'s; and
    unless it lies outside every mkdocs site's docs. Writes nothing."""
    _outside_docs(root, what)
    try:
        entries = sorted(e.name for e in root.iterdir() if not _leftover(e.name))
    except (FileNotFoundError, NotADirectoryError):
        return
    if not entries or any(mark in entries for mark in kind.marks):
        return
    for other in KINDS:
        marked = [mark for mark in other.marks if mark in entries]
        if other is not kind and marked:
            raise UserError(
                f"{what} {root} is a {other.name}'s directory (it holds {marked[0]}), not a {kind.name}'s: "
                "give a new or empty directory"
            )
    raise UserError(
        f"{what} {root} is not empty and is not a {kind.name}'s directory (no {kind.marks[0]}; it holds "
        f"{_listed(entries)}): give a new or empty directory, or a {kind.name}'s to resume it"
    )


def _leftover(name: str) -> bool:
    return name in LEFTOVERS or name.startswith(".redraft-write-test-")


def _listed(entries: list[str]) -> str:
    shown = ", ".join(entries[:4])
    return shown if len(entries) <= 4 else f"{shown} and {len(entries) - 4} more"


_DOCS_DIR = re.compile(r"^docs_dir:\s*['\"]?([^'\"#\s]+)", re.MULTILINE)


def _outside_docs(root: Path, what: str) -> None:
    """Refuse ``root`` inside the docs an ``mkdocs.yml`` above it builds (its ``docs_dir``, ``docs`` unless set)."""
    place = Path(os.path.realpath(root))
    for above in place.parents:
        for name in ("mkdocs.yml", "mkdocs.yaml"):
            config = above / name
            if not config.is_file():
                continue
            try:
                found = _DOCS_DIR.search(config.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
            docs = above / (found.group(1) if found else "docs")
            if place == docs or docs in place.parents:
                raise UserError(
                    f"{what} {root} is inside {docs}, the docs {config} publishes: a run's files would be on the "
                    "site; give a directory outside the docs"
                )


def check_run(root: Path) -> None:
    """`UserError` (one line) when ``root`` is another kind's directory and no run's: what writes beside a run's
    files (a report) writes only into a run's directory, never into a comparison's (whose lanes are its runs), a
    tune's or a judge card's. A directory of no kind is left to `redraft.rundir.RunReader` to refuse."""
    try:
        entries = {e.name for e in root.iterdir()}
    except OSError:
        return
    if any(mark in entries for mark in RUN.marks):
        return
    other = next((kind for kind in KINDS if any(mark in entries for mark in kind.marks)), None)
    if other is not None:
        lanes = "; its lanes' runs are its arms/NAME and baseline directories" if other is COMPARISON else ""
        raise UserError(f"{root} is a {other.name}'s directory, not a run's{lanes}: give a run directory")
