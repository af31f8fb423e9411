"""The candidate's view of the filesystem: an allow-list. Standard library only: launcher.py loads it by path.

Invariant: once `build` returned, the directory ``root`` holds everything the candidate will see after
the keeper's ``chroot`` into it, and nothing else of the host:

- the standard library, read-only, at its own path (every installed-packages directory inside it masked
  by an empty read-only tmpfs), and the directories of the system's shared libraries its extension
  modules link against (``/lib/<multiarch>``, ``/lib64``...), read-only;
- the work directory, at its own path: a size-capped tmpfs holding the source and the caller's input files;
- ``/tmp`` and ``/dev/shm``: small empty tmpfs mounts of its own;
- ``/dev/null``, ``zero``, ``full``, ``random``, ``urandom`` (bound from the host) and the ``fd``, ``stdin``,
  ``stdout``, ``stderr`` links into ``/proc/self``;
- ``/etc/passwd`` and ``/etc/group`` naming root and the sandbox uid only (written here, not the host's);
- ``/proc``: an empty mount point, where the keeper (PID 1 of the new PID namespace) mounts a proc of
  that namespace, showing no other user's process (`mount_proc`).

See docs/architecture.md, section "The sandbox's view: what is out of reach".
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
from collections.abc import Callable

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384

Mount = Callable[[str | None, str, str | None, int, str | None], None]
"""``mount(source, target, fstype, flags, data)``, raising OSError (namespaces.mount)."""

DEVICES = ("null", "zero", "full", "random", "urandom")
LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
PASSWD = "root:x:0:0:root:/:/nonexistent\nnobody:x:{uid}:{uid}:nobody:/nonexistent:/nonexistent\n"
GROUP = "root:x:0:\nnogroup:x:{uid}:\n"
SCRATCH = (("/tmp", "mode=1777,size=8m"), ("/dev/shm", "mode=1777,size=8m"))
PROC_OPTIONS = ("hidepid=invisible,subset=pid", "hidepid=invisible", "hidepid=2", None)
"""Tried in turn: a proc showing only the caller's own processes and nothing of the host's kernel, where
the kernel knows those options (5.8 and later), down to a plain proc of the PID namespace."""


def build(mount: Mount, root: str, workdir: str, work_options: str, uid: int) -> None:
    """Make ``root`` (a directory of the caller's own) the candidate's whole filesystem; see the module
    docstring. ``workdir`` is the candidate's work directory, at the same path inside the view, mounted
    with ``work_options``; the caller writes the candidate's files into it afterwards (at ``root + workdir``).
    """
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path in readonly_paths():
        bind(mount, path, root, readonly=True)
    for path in sorted(package_paths()):
        inside = root + path
        if os.path.isdir(inside):  # a site-packages inside a bound standard library: masked
            mount("tmpfs", inside, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0555,size=4k")
    make_devices(mount, root)
    for path, options in SCRATCH:
        os.makedirs(root + path, mode=0o755, exist_ok=True)
        mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, options)
    os.makedirs(root + "/etc", mode=0o755, exist_ok=True)
    for name, text in (("passwd", PASSWD), ("group", GROUP)):
        with open(f"{root}/etc/{name}", "w") as f:
            f.write(text.format(uid=uid))
    os.makedirs(root + "/proc", mode=0o555, exist_ok=True)
    os.makedirs(root + workdir, mode=0o755, exist_ok=True)
    mount("tmpfs", root + workdir, "tmpfs", MS_NOSUID | MS_NODEV, work_options)
    # The root itself read-only: the candidate writes in its work directory and scratch mounts only.
    mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def bind(mount: Mount, path: str, root: str, *, readonly: bool) -> None:
    """Bind the host's ``path`` at the same path under ``root`` (read-only when asked)."""
    target = root + path
    if os.path.isdir(path):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        with open(target, "a"):
            pass
    mount(path, target, None, MS_BIND | MS_REC, None)
    if readonly:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def make_devices(mount: Mount, root: str) -> None:
    os.makedirs(root + "/dev", mode=0o755, exist_ok=True)
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            bind(mount, f"/dev/{name}", root, readonly=False)
    for name, target in LINKS.items():
        os.symlink(target, f"{root}/dev/{name}")


def readonly_paths() -> list[str]:
    """The host directories the view holds read-only: the standard library and the system's shared libraries.

    Real paths, outermost first, none inside another (a directory inside one already bound is in the view)."""
    wanted = {os.path.realpath(p) for p in (*stdlib_paths(), *library_paths()) if os.path.exists(p)}
    ordered = sorted(wanted, key=len)
    kept: list[str] = []
    for path in ordered:
        if not any(path == k or path.startswith(k + os.sep) for k in kept):
            kept.append(path)
    return kept


def stdlib_paths() -> set[str]:
    """Where the standard library really is (not a virtual environment's ``lib``, which sysconfig names)."""
    return {os.path.dirname(os.__file__)} | {p for p in sys.path if p.endswith((".zip", "lib-dynload"))}


def library_paths() -> set[str]:
    """Where the dynamic linker finds the libraries that the standard library's extension modules need
    (libssl, libffi, libz...): the multiarch directories, or ``lib64``, never a whole ``/usr/lib``
    (which holds other Pythons' packages)."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    found = {"/lib64", "/usr/lib64"}
    if arch:
        found |= {f"/lib/{arch}", f"/usr/lib/{arch}"}
    return found


def package_paths() -> set[str]:
    """Every directory of installed packages this interpreter knows (masked where a bound path holds one)."""
    bases: tuple[dict[str, str], ...] = ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    found = {sysconfig.get_paths(vars=v)[k] for v in bases for k in ("purelib", "platlib")}
    found |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    return {os.path.realpath(p) for p in found}


def mount_proc(mount: Mount, root: str) -> str:
    """A /proc of the new PID namespace at ``root``'s ``/proc`` (run by its PID 1); returns the options that
    applied (``plain`` for none)."""
    error: OSError | None = None
    for options in PROC_OPTIONS:
        try:
            mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)
        except OSError as exc:
            error = exc
            continue
        return options or "plain"
    raise error or OSError("mount proc")


def enter(root: str) -> None:
    """Make ``root`` this process's root directory (the keeper's, inherited by the candidate it forks)."""
    os.chroot(root)
    os.chdir("/")
    with contextlib.suppress(OSError):
        os.environ.pop("PWD", None)
