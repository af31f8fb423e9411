"""The caller's side of the sandbox: start the launcher, hand it its settings, watch it (`redraft.sandbox._watch`).

Invariant: the calling process never forks itself and uses no ``preexec_fn`` (``subprocess``
only, with ``start_new_session``), so `run_python` is safe from any thread of a Ray actor; the
launcher is only signalled while unreaped, so its pid cannot have been reused; every call
returns within about ``timeout_s`` plus a few seconds, whatever the candidate does; and
`SandboxError` means the sandbox itself could not start (a mandatory layer failed, or the
launcher died before reporting), never anything the candidate did.

A wired run (`run_wired`, for harness.py) is the same run plus a `Wiring`: pipe ends handed to
the candidate's program as fds 3, 4, ... (this process closes its copies as soon as the launcher
has them, exactly once), standard-library modules it preloads, and a descriptor whose becoming
readable ends the run at once (``cancelled``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from redraft.errors import SandboxError
from redraft.sandbox._files import check_exchange, collect, write_inputs
from redraft.sandbox._isolation import weak_allowed
from redraft.sandbox._limits import (
    SANDBOX_UID,
    SandboxLimits,
    SandboxResult,
    read_status,
    result_of,
)
from redraft.sandbox._watch import Watch
from redraft.sandbox._workdirs import owned_workdir

LAUNCHER = Path(__file__).with_name("launcher.py")
"""The launcher program, run by path (it is installed with the package, like any module)."""

_SOURCE_NAME = "main.py"
# The launcher's own deadline is the timeout plus this. It acts only when we did not: a caller that
# is frozen (stopped, swapping) or stuck; a dead caller is seen at once through the lifeline.
_LAUNCHER_GRACE_S = 1.0
_DEFAULT_LIMITS = SandboxLimits()


def run_python(
    source: str,
    *,
    limits: SandboxLimits = _DEFAULT_LIMITS,
    stdin: str = "",
    files: Mapping[str, bytes] | None = None,
    outputs: Sequence[str] = (),
) -> SandboxResult:
    """Run ``source`` as ``__main__`` in a fresh sandboxed interpreter and report what happened.

    ``files`` are put in its working directory first; the ``outputs`` it wrote there are collected
    (`SandboxResult.files`, see `redraft.sandbox._files`). `ValueError` for a name that is not a plain file name.
    """
    exchange = Exchange(dict(files or {}), tuple(outputs))
    check_exchange(exchange.files, exchange.outputs, _SOURCE_NAME, limits)
    return _run(source, limits=limits, stdin=stdin, exchange=exchange)


@dataclasses.dataclass(frozen=True)
class Exchange:
    """The files a run is handed and the ones collected from it."""

    files: dict[str, bytes] = dataclasses.field(default_factory=dict)
    outputs: tuple[str, ...] = ()


_NO_EXCHANGE = Exchange()


@dataclasses.dataclass(frozen=True)
class Wiring:
    """What a harnessed run (harness.py) adds to a plain one; `run_python` has none of it."""

    channels: tuple[int, ...] = ()
    """Pipe ends handed to the candidate's program as fds 3, 4, ...; `_run` owns them from the call on and
    closes its copies as soon as the launcher has them (so their far ends see EOF when the tree ends)."""
    preload: tuple[str, ...] = ()
    """Standard-library modules beside launcher.py the candidate process loads before its source runs."""
    cancel_fd: int | None = None
    """Readable when the caller no longer needs the run: the tree is then killed (``cancelled``)."""


_NO_WIRING = Wiring()


def run_wired(source: str, *, limits: SandboxLimits, stdin: str, wiring: Wiring) -> SandboxResult:
    """`run_python` with a harnessed run's wiring (for harness.py): every layer on, as always."""
    return _run(source, limits=limits, stdin=stdin, wiring=wiring)


def _run(
    source: str,
    *,
    limits: SandboxLimits,
    stdin: str = "",
    namespaces: bool = True,
    audit_hook: bool = True,
    wiring: Wiring = _NO_WIRING,
    exchange: Exchange = _NO_EXCHANGE,
) -> SandboxResult:
    """`run_python` with layers switchable (so tests can prove each OS layer holds on its own), and wired."""
    handed = _Handed(wiring.channels)
    try:
        with owned_workdir() as (workdir, lock_fd):
            write_inputs(workdir, exchange.files)
            result = _run_in(workdir, lock_fd, source, limits, stdin, handed, namespaces, audit_hook, wiring, exchange)
            if not exchange.outputs:
                return result
            from_outbox = "view" in result.layers  # the launcher copied them out of the candidate's view
            files, uncollected = collect(
                workdir, exchange.outputs, limits.max_collect_bytes, from_outbox=from_outbox, reasons=result.uncollected
            )
            return dataclasses.replace(result, files=files, uncollected=uncollected)
    finally:
        handed.close()


class _Handed:
    """Descriptors this call owns until the launcher has them: closed exactly once, whatever happens.

    Once, because a second close could hit a descriptor another thread has opened since under that number.
    """

    def __init__(self, fds: tuple[int, ...]) -> None:
        self.fds = list(fds)

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


def _run_in(
    workdir: str,
    lock_fd: int,
    source: str,
    limits: SandboxLimits,
    stdin: str,
    handed: _Handed,
    namespaces: bool,
    audit_hook: bool,
    wiring: Wiring,
    exchange: Exchange = _NO_EXCHANGE,
) -> SandboxResult:
    _write_source(workdir, source)
    status_r, status_w = os.pipe()
    # The lifeline: only this process holds its write end, so the kernel closes it when we end,
    # however we end; the launcher then kills the tree.
    lifeline_r, lifeline_w = os.pipe()
    handed.fds += [status_w, lifeline_r]
    try:
        fds = {"status_fd": status_w, "lifeline_fd": lifeline_r, "lock_fd": lock_fd}
        config = _config(workdir, limits, fds, namespaces=namespaces, audit_hook=audit_hook, wiring=wiring)
        config |= {"inputs": list(exchange.files), "outputs": list(exchange.outputs)}
        try:
            with tempfile.TemporaryFile() as stdin_file:
                # A file, not a pipe: a large stdin cannot deadlock against a child that does not read it.
                stdin_file.write(stdin.encode("utf-8", errors="surrogateescape"))
                stdin_file.seek(0)
                start = time.monotonic()
                pass_fds = (*fds.values(), *wiring.channels)
                proc = _start_launcher(workdir, config, stdin_file.fileno(), pass_fds=pass_fds)
        finally:
            handed.close()
        supervisor = Watch(proc, limits, start, wiring.cancel_fd)
        supervisor.run()
        outcome = supervisor.outcome(start)
        status = read_status(status_r)
    finally:
        os.close(status_r)
        os.close(lifeline_w)
    return result_of(outcome, status, limits, workdir)


def _write_source(workdir: str, source: str) -> None:
    with open(os.path.join(workdir, _SOURCE_NAME), "wb") as f:
        # Lone surrogates become invalid UTF-8, which the child reports as a SyntaxError.
        f.write(source.encode("utf-8", errors="surrogateescape"))
    if os.geteuid() == 0:
        # The candidate (uid 65534) must be able to write its cwd when no tmpfs is mounted over it.
        os.chown(workdir, SANDBOX_UID, SANDBOX_UID)
        os.chmod(workdir, 0o700)


def _config(
    workdir: str, limits: SandboxLimits, fds: dict[str, int], *, namespaces: bool, audit_hook: bool, wiring: Wiring
) -> dict[str, Any]:
    """The launcher's settings (its ``Config``); ``fds`` are the descriptors it inherits, by role."""
    return {
        **fds,
        "workdir": workdir,
        "source": _SOURCE_NAME,
        "deadline_s": limits.timeout_s + _LAUNCHER_GRACE_S,
        "namespaces": namespaces,
        "require_view": namespaces and not weak_allowed(),
        "audit_hook": audit_hook,
        "uid": SANDBOX_UID,
        "cpu_s": limits.cpu_s,
        "memory_bytes": limits.memory_mb * 1024 * 1024,
        "max_processes": limits.max_processes,
        "max_file_bytes": limits.max_file_bytes,
        "max_disk_bytes": limits.max_disk_mb * 1024 * 1024,
        "max_open_files": limits.max_open_files,
        "channel_fds": list(wiring.channels),
        "preload": list(wiring.preload),
        "max_collect_bytes": limits.max_collect_bytes,
    }


def _start_launcher(
    workdir: str, config: dict[str, Any], stdin_fd: int, *, pass_fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    # -I: no env vars, user site or script directory on sys.path; -B: no .pyc; -u: output written
    # before a kill is kept. The settings go through a pipe: a command line is readable by anyone who sees
    # the process (the candidate sees its keeper, whose command line this is).
    settings_r, settings_w = os.pipe()
    with os.fdopen(settings_w, "wb") as pipe:
        pipe.write(json.dumps(config).encode())  # far below a pipe's capacity: never blocks
    command = [sys.executable, "-I", "-B", "-u", "-X", "utf8", str(LAUNCHER), str(settings_r)]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    try:
        return subprocess.Popen(
            command,
            stdin=stdin_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=env,
            start_new_session=True,
            pass_fds=(*pass_fds, settings_r),
        )
    except OSError as exc:
        raise SandboxError(f"cannot start the sandbox interpreter: {exc}") from exc
    finally:
        os.close(settings_r)
