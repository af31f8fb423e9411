"""The launcher's namespaces and the candidate's view. Standard library only: launcher.py loads it by path.

Invariant: these layers are never silent. Each namespace that applied is named in ``layers``
(``netns``, ``mountns``, ``pidns``, ``userns``), and the allow-list view of the filesystem (view.py)
as ``view``; each that failed adds a line with its errno instead. Whether the candidate may run
without the view is the launcher's decision (``Config.require_view``). Every mount is made after
``/`` became private, so nothing propagates back to the host. Nothing here runs on import.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redraft.sandbox.launcher import Config

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_REC, MS_PRIVATE, MNT_DETACH = 16384, 1 << 18, 2

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.unshare.argtypes = [ctypes.c_int]
LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
LIBC.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


Build = Callable[[Callable[[str | None, str, str | None, int, str | None], None], str, str, str, int], None]
"""view.build: (mount, root, workdir, work options, uid)."""


def last_error(what: str) -> str:
    return f"{what}: {os.strerror(ctypes.get_errno())}"


def unshare(flags: int) -> bool:
    return int(LIBC.unshare(flags)) == 0


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def encode(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    if int(LIBC.mount(encode(source), encode(target), encode(fstype), flags, encode(data))) != 0:
        raise OSError(last_error(f"mount {target}"))


def clear_capabilities() -> bool:
    """Give up every capability (effective, permitted, inheritable); whether the kernel agreed."""
    header = CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (CapData * 2)()
    return int(LIBC.capset(ctypes.byref(header), ctypes.byref(data))) == 0


def enter_namespaces(root: bool, layers: list[str]) -> set[str]:
    """Returns the namespaces entered; the PID namespace applies to children only."""
    if not root:
        entered = enter_user_namespace(layers)
    else:
        entered = set()
        wanted = [(CLONE_NEWNET, "netns"), (CLONE_NEWNS, "mountns"), (CLONE_NEWPID, "pidns")]
        if unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID):
            entered = {name for _, name in wanted}
        else:
            for flag, name in wanted:
                if unshare(flag):
                    entered.add(name)
                else:
                    layers.append(last_error(f"{name} failed"))
    layers.extend(sorted(entered))
    return entered


def enter_user_namespace(layers: list[str]) -> set[str]:
    """A non-root caller's namespaces, inside a new user namespace mapping only its own uid and gid."""
    uid, gid = os.getuid(), os.getgid()
    for flags in (CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID, CLONE_NEWNET):
        if unshare(CLONE_NEWUSER | flags):
            entered = {"userns", "netns"}
            if flags & CLONE_NEWPID:
                entered |= {"mountns", "pidns"}
            try:
                for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                    with open(f"/proc/self/{name}", "w") as f:
                        f.write(text)
            except OSError as exc:
                layers.append(f"userns map failed: {exc}")
            return entered
    layers.append(last_error("userns+netns failed"))
    return set()


def private_view(cfg: Config, source: bytes, layers: list[str], inputs: dict[str, bytes], build: Build) -> bool:
    """Build the candidate's allow-list view (view.py) at ``cfg.view_root`` and put the source and the
    caller's input files in its work directory; whether it applied (a layer named ``view``, or the reason
    it failed: then nothing of it is left mounted)."""
    owner = f",uid={cfg.uid},gid={cfg.uid}" if cfg.root else ""
    try:
        # Without this, the mounts below would propagate back to the host.
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        build(mount, cfg.view_root, cfg.workdir, f"mode=0700,size={cfg.max_disk_bytes}{owner}", cfg.uid)
    except OSError as exc:
        layers.append(f"view failed: {exc}")
        if int(LIBC.umount2(cfg.view_root.encode(), MNT_DETACH)) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise  # the host work directory stays hidden under a half-built view: nothing may run
        return False
    workdir = cfg.view_root + cfg.workdir
    for name, data in {cfg.source: source, **inputs}.items():
        path = os.path.join(workdir, name)
        with open(path, "wb") as f:
            f.write(data)
        if cfg.root:
            os.chown(path, cfg.uid, cfg.uid)
    layers.append("view")
    return True


def read_files(directory: str, names: list[str]) -> dict[str, bytes]:
    files = {}
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            files[name] = f.read()
    return files


def collect_outputs(cfg: Config) -> dict[str, str]:
    """Copy each output file the candidate wrote out of the tmpfs into the host work directory's ``.outbox``
    (reached through the lock descriptor: the tmpfs hides its path), for the caller to read. The candidate has
    ended and its group is dead: nothing changes the files meanwhile. Regular files only, never through a
    symbolic link, never opening a FIFO, each up to its cap. Returns why each other output was not copied."""
    try:
        os.mkdir(".outbox", 0o700, dir_fd=cfg.lock_fd)
        outbox = os.open(".outbox", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cfg.lock_fd)
        inside = os.open(cfg.view_root + cfg.workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        return dict.fromkeys(cfg.outputs, f"not collected ({exc.strerror})")
    reasons: dict[str, str] = {}
    for name in cfg.outputs:
        data = read_regular(inside, name, cfg.max_collect_bytes)
        if isinstance(data, str):
            reasons[name] = data
            continue
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=outbox)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    os.close(outbox)
    os.close(inside)
    return reasons


def read_regular(directory: int, name: str, limit: int) -> bytes | str:
    """The bytes of the regular file ``name`` in ``directory``, or why not: never through a symbolic link,
    never opening a FIFO or a device, at most ``limit`` bytes (the caller reads its outputs with it too)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
    except FileNotFoundError:
        return "not written"
    except OSError as exc:
        return f"not readable ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_size > limit:
            return f"{info.st_size:,} bytes, over the limit of {limit:,}"
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else f"over the limit of {limit:,} bytes"
    finally:
        os.close(fd)


# What solutions commonly import, imported while still privileged when the standard library would
# be unreadable after the uid drop (no view: pyenv under /root).
PREIMPORTED = (
    "bisect", "collections", "copy", "datetime", "decimal", "encodings.idna", "fractions", "functools", "gzip",
    "hashlib", "heapq", "itertools", "json", "math", "operator", "random", "re", "socket", "statistics",
    "string", "typing",
)  # fmt: skip


def preimport_unreachable_stdlib() -> bool:
    """Import `PREIMPORTED` now if an unprivileged uid could not read every ``sys.path`` directory; whether it did."""
    if all(reachable(p) for p in sys.path if os.path.isdir(p)):
        return False
    for name in PREIMPORTED:
        with contextlib.suppress(ImportError):
            __import__(name)
    return True


def reachable(path: str) -> bool:
    """Whether an unprivileged uid can read ``path``, judging by the "other" bits of it and its ancestors."""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts) + 1):
        if not os.stat(os.sep.join(parts[:i]) or os.sep).st_mode & 0o001:
            return False
    return bool(os.stat(path).st_mode & 0o004)
