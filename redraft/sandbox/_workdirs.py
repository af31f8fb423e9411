"""Sandbox work directories: named for their owner, locked while in use, swept when abandoned.

Invariant: a work directory is ``<tmp>/redraft-sandbox-<caller pid>-<random>`` and, from just after
it is made until it is removed, an exclusive ``flock`` on the directory itself is held through one
open description, shared by the caller and (passed down) by its launcher. The lock therefore lasts
while either of them lives, and the kernel drops it when both are gone, however they ended.
`sweep_stale_workdirs` removes only directories whose lock it can take, so never a live sandbox's.

A sweeper may lock a directory in the instant between its creation and its owner's lock; the owner
then fails to lock it, or finds it gone, and makes another, so both sides stay correct.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator

from redraft.errors import SandboxError
from redraft.sandbox._limits import SANDBOX_UID

PREFIX = "redraft-sandbox-"
# The caller's pid, then mkdtemp's random part (which has no hyphen). Older sandboxes named their
# directories without a pid and without a lock: the sweep leaves those alone, live or not.
_NAME = re.compile(rf"{PREFIX}\d+-[^-]+")
_ATTEMPTS = 5


@contextlib.contextmanager
def owned_workdir() -> Iterator[tuple[str, int]]:
    """A new work directory and the descriptor holding its lock (to pass to the launcher); removed on exit."""
    path, fd = _make_and_lock()
    try:
        yield path, fd
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def _make_and_lock() -> tuple[str, int]:
    for _ in range(_ATTEMPTS):
        path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
        fd = _lock(path)
        if fd is not None:
            return path, fd
    raise SandboxError(f"could not make a locked sandbox work directory in {tempfile.gettempdir()}")


def _lock(path: str) -> int | None:
    """An open descriptor of ``path`` holding its exclusive lock, or None if a sweeper got there first."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def sweep_stale_workdirs(directory: str | None = None) -> list[str]:
    """Remove the sandbox work directories that no live sandbox owns; returns the paths removed.

    Looks in ``directory`` (default: the temporary directory sandboxes use) at directories named
    ``redraft-sandbox-<pid>-<random>`` that belong to this user (or to the sandbox uid, for root),
    and removes those whose lock nobody holds: left behind when a caller and its launcher were
    killed. Cheap: one directory listing, and one open and lock per sandbox directory found.
    """
    base = directory if directory is not None else tempfile.gettempdir()
    try:
        names = [name for name in os.listdir(base) if _NAME.fullmatch(name)]
    except OSError:
        return []
    owners = {os.geteuid(), SANDBOX_UID} if os.geteuid() == 0 else {os.geteuid()}
    removed = []
    for name in names:
        path = os.path.join(base, name)
        fd = _lock(path)
        if fd is None:
            continue  # in use (or gone, or not a directory)
        try:
            if os.fstat(fd).st_uid in owners:
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.lexists(path):
                    removed.append(path)
        finally:
            os.close(fd)
    return removed
