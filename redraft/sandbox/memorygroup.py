"""The sandbox's memory bound for its whole process tree: a memory cgroup, where the machine lets us make one.

Standard library only: launcher.py loads it by path. ``RLIMIT_AS`` bounds each process of the tree, so a
candidate that forks five children holds five times it. A memory cgroup bounds their sum: the launcher
makes one beside its own cgroup (cgroup v2's ``memory.max``, or the cgroup v1 memory controller's
``memory.limit_in_bytes``; swap held at the same bound), the keeper joins it before it forks the candidate,
so every process of the tree is charged to it, and when the sum passes the limit the kernel reclaims,
then kills a process of the tree (never one outside it). The launcher removes the group once the tree
is gone, and the groups of launchers that died before removing theirs (their pid is in the name).

Where no memory controller can be written (not root; a cgroup v2 whose memory controller is not
delegated to us; no cgroup file system), `make` makes nothing and the per-process limit stays alone: the
run's layers say which applied, ``memcg:v2``, ``memcg:v1`` or neither.

Invariant: a group is made only whole (its limit written) or not at all; nothing here raises.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import NamedTuple

PREFIX = "redraft-sandbox-"
_LIMIT_FILES = {
    "v2": ("memory.max", "memory.swap.max"),
    "v1": ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
}
"""Per version: the file of the memory bound, and that of memory and swap together (absent without swap)."""


class MemoryGroup(NamedTuple):
    """One sandbox's memory cgroup, made; ``procs_fd`` joins a process to it (the keeper writes ``0``). A named
    tuple, not a dataclass: this module is loaded by path, outside ``sys.modules``, where dataclasses fail."""

    path: str
    version: str
    procs_fd: int

    @property
    def layer(self) -> str:
        return f"memcg:{self.version}"


def join(group: MemoryGroup | None) -> str | None:
    """Move the calling process (and so every process it forks after) into ``group``; why it could not, if not."""
    if group is None:
        return None
    try:
        os.write(group.procs_fd, b"0")
    except OSError as exc:
        return f"joining the memory cgroup {group.path}: {exc.strerror}"
    finally:
        os.close(group.procs_fd)
    return None


def remove(group: MemoryGroup | None) -> None:
    """Remove ``group`` once its processes are gone (the kernel takes a moment to let go of the last)."""
    if group is None:
        return
    with contextlib.suppress(OSError):
        os.close(group.procs_fd)  # the launcher's copy
    for _ in range(50):
        try:
            os.rmdir(group.path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def make(memory_bytes: int) -> MemoryGroup | None:
    """A new group bounding its processes' memory, all together, to ``memory_bytes``; None where none can be
    made here."""
    for parent, version in _parents():
        _sweep(parent)
        path = os.path.join(parent, f"{PREFIX}{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
        except OSError:
            continue
        group = _limited(path, version, memory_bytes)
        if group is not None:
            return group
        with contextlib.suppress(OSError):
            os.rmdir(path)
    return None


def _limited(path: str, version: str, memory_bytes: int) -> MemoryGroup | None:
    limit, with_swap = _LIMIT_FILES[version]
    try:
        _write(os.path.join(path, limit), str(memory_bytes))
        if os.path.exists(os.path.join(path, with_swap)):
            _write(os.path.join(path, with_swap), "0" if version == "v2" else str(memory_bytes))
        return MemoryGroup(
            path=path, version=version, procs_fd=os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
        )
    except OSError:
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _parents() -> list[tuple[str, str]]:
    """Where our own cgroup is, in each hierarchy that has a memory controller we may use: v2 first."""
    own = _own_cgroups()
    found: list[tuple[str, str]] = []
    for root, mount, fstype, options in _cgroup_mounts():
        if fstype == "cgroup2" and "" in own:
            place = _under(mount, root, own[""])
            if place is not None and _v2_memory(place):
                found.append((place, "v2"))
        elif fstype == "cgroup" and "memory" in options.split(",") and "memory" in own:
            place = _under(mount, root, own["memory"])
            if place is not None:
                found.append((place, "v1"))
    return sorted(found, key=lambda f: f[1] != "v2")


def _own_cgroups() -> dict[str, str]:
    """Our cgroup's path in each hierarchy, by its controllers ("" for v2's unified one)."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as file:
        for line in file:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _cgroup_mounts() -> list[tuple[str, str, str, str]]:
    """(root in the hierarchy, mount point, file system type, super options) of each cgroup mount."""
    mounts: list[tuple[str, str, str, str]] = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as file:
        for line in file:
            before, _, after = line.rstrip("\n").partition(" - ")
            fields, tail = before.split(" "), after.split(" ")
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                mounts.append((_unescaped(fields[3]), _unescaped(fields[4]), tail[0], tail[2]))
    return mounts


def _unescaped(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _under(mount: str, root: str, own: str) -> str | None:
    """Our cgroup's directory under a mount of its hierarchy whose root is ``root``; None if it is not under it."""
    if root == "/":
        return mount + own.rstrip("/") if own != "/" else mount
    if own == root or own.startswith(root.rstrip("/") + "/"):
        return mount + own[len(root) :]
    return None


def _v2_memory(place: str) -> bool:
    """Whether groups made under ``place`` get the memory controller (enabling it for them where we may)."""
    try:
        with open(os.path.join(place, "cgroup.subtree_control")) as file:
            if "memory" in file.read().split():
                return True
        _write(os.path.join(place, "cgroup.subtree_control"), "+memory")
        return True
    except OSError:  # not delegated to us, or processes in ``place`` forbid it (cgroup v2's no-internal-process rule)
        return False


def _sweep(parent: str) -> None:
    """Remove the groups of launchers that are gone (killed before removing theirs); empty ones only."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if not name.startswith(PREFIX):
                continue
            try:
                os.kill(int(name[len(PREFIX) :].split("-")[0]), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))
            except (ValueError, PermissionError):
                continue
