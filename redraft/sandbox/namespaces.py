"""The launcher's namespaces and private mounts. Standard library only: launcher.py loads it by path.

Invariant: these layers are best effort and never silent. Each namespace or mount that applied is
named in ``layers`` (``netns``, ``mountns``, ``pidns``, ``userns``, ``tmpfs``, ``python_exposed``),
and each that failed adds a line with its errno instead; the candidate still runs, under its own
mandatory layers (launcher.py). Every mount is made after ``/`` became private, so nothing
propagates back to the host. Nothing here runs on import.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
import sysconfig
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redraft.sandbox.launcher import Config

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 4096, 16384, 1 << 18

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.unshare.argtypes = [ctypes.c_int]
LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def last_error(what: str) -> str:
    return f"{what}: {os.strerror(ctypes.get_errno())}"


def unshare(flags: int) -> bool:
    return int(LIBC.unshare(flags)) == 0


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def encode(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    if int(LIBC.mount(encode(source), encode(target), encode(fstype), flags, encode(data))) != 0:
        raise OSError(last_error(f"mount {target}"))


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


def private_mounts(cfg: Config, source: bytes, layers: list[str], inputs: dict[str, bytes] | None = None) -> None:
    """Hide the world-writable directories and give the candidate a size-capped work directory."""
    try:
        # Without this, the mounts below would propagate back to the host.
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        for path in ("/tmp", "/var/tmp", "/dev/shm"):
            if os.path.isdir(path) and not os.path.islink(path):
                mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=8m")
        os.makedirs(cfg.workdir, exist_ok=True)
        if cfg.root:
            expose_python(layers)
        hide_packages(cfg.workdir, layers)
        owner = f",uid={cfg.uid},gid={cfg.uid}" if cfg.root else ""
        options = f"mode=0700,size={cfg.max_disk_bytes}{owner}"
        mount("tmpfs", cfg.workdir, "tmpfs", MS_NOSUID | MS_NODEV, options)
        layers.append("tmpfs")
    except OSError as exc:
        layers.append(f"tmpfs failed: {exc}")
    if not os.path.exists(cfg.source_path):
        # The source was read before the tmpfs hid it: write it back for the candidate.
        os.makedirs(cfg.workdir, exist_ok=True)
        with open(cfg.source_path, "wb") as f:
            f.write(source)
        if cfg.root:
            os.chown(cfg.workdir, cfg.uid, cfg.uid)
            os.chown(cfg.source_path, cfg.uid, cfg.uid)
        for name, data in (inputs or {}).items():  # and the input files the caller handed it
            path = os.path.join(cfg.workdir, name)
            with open(path, "wb") as f:
                f.write(data)
            if cfg.root:
                os.chown(path, cfg.uid, cfg.uid)


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
        inside = os.open(cfg.workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
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


def hide_packages(workdir: str, layers: list[str]) -> None:
    """Mask every directory of installed packages (the environment's and the base interpreter's
    site-packages, and the directory redraft itself is imported from: a source checkout, for an editable
    install) with an empty read-only tmpfs. A candidate may compute anything with the standard library,
    but must not read what its grader holds: a data set's hidden tests, a scenario's generator, redraft's
    own code. Modules the sandbox needs were loaded before the mounts. Never masks a directory holding
    the standard library or the work directory."""
    keep = [os.path.realpath(p) for p in (workdir, *_stdlib_paths())]
    for path in sorted(_package_paths()):
        if not os.path.isdir(path) or any(k == path or k.startswith(path + os.sep) for k in keep):
            continue
        try:
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0555,size=4k")
        except OSError as exc:
            layers.append(f"packages_hidden failed: {exc}")
            return
    layers.append("packages_hidden")


def _stdlib_paths() -> set[str]:
    """Where the standard library really is (not a virtual environment's ``lib``, which sysconfig names)."""
    return {os.path.dirname(os.__file__)} | {p for p in sys.path if p.endswith((".zip", "lib-dynload"))}


def _package_paths() -> set[str]:
    bases: tuple[dict[str, str], ...] = ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    found = {sysconfig.get_paths(vars=v)[k] for v in bases for k in ("purelib", "platlib")}
    found |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    # This file is redraft/sandbox/namespaces.py: the directory holding the redraft package.
    found.add(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return {os.path.realpath(p) for p in found}


def mount_proc() -> None:
    """A /proc of the new PID namespace (run by its PID 1): the candidate sees only its own processes."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def reachable(path: str) -> bool:
    """Whether an unprivileged uid can read ``path``, judging by the "other" bits of it and its ancestors."""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts) + 1):
        if not os.stat(os.sep.join(parts[:i]) or os.sep).st_mode & 0o001:
            return False
    return bool(os.stat(path).st_mode & 0o004)


def hidden_ancestor(path: str) -> str | None:
    """The topmost ancestor of ``path`` that an unprivileged uid cannot traverse."""
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts)):
        ancestor = os.sep.join(parts[:i])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def expose_python(layers: list[str]) -> None:
    """Make this interpreter's sys.path readable by an unprivileged uid.

    The interpreter may live under a private directory (pyenv in /root): mount an empty tmpfs over
    that directory, which also hides the rest of it, and bind the sys.path directories back in place.
    """
    needed = sorted({os.path.realpath(p) for p in sys.path if os.path.isdir(p) and not reachable(p)})
    needed = [p for p in needed if not any(p.startswith(q + os.sep) for q in needed)]
    if not needed:
        return
    # Opened before the tmpfs hides them; bound back through /proc/self/fd.
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in needed}
    masked: set[str] = set()
    for path in needed:
        ancestor = hidden_ancestor(path)
        if ancestor is not None and ancestor not in masked:
            mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
            masked.add(ancestor)
        os.makedirs(path, exist_ok=True)
        mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC, None)
        os.close(fds[path])
    layers.append("python_exposed")
