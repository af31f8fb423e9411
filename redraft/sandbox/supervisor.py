"""The caller's side of the sandbox: start the launcher, read its output with a cap, keep the clock.

Invariant: the calling process never forks itself and uses no ``preexec_fn`` (``subprocess``
only, with ``start_new_session``), so `run_python` is safe from any thread of a Ray actor; the
launcher is only signalled while unreaped, so its pid cannot have been reused; every call
returns within about ``timeout_s`` plus a few seconds, whatever the candidate does; and
`SandboxError` means the sandbox itself could not start (a mandatory layer failed, or the
launcher died before reporting), never anything the candidate did.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from redraft.errors import SandboxError
from redraft.sandbox.records import SANDBOX_UID, KillReason, SandboxLimits, SandboxResult
from redraft.sandbox.workdirs import owned_workdir

LAUNCHER = Path(__file__).with_name("launcher.py")
"""The launcher program, run by path (it is installed with the package, like any module)."""

_SOURCE_NAME = "main.py"
# How long the launcher gets to kill and reap its children after SIGTERM.
_KILL_GRACE_S = 3.0
# After the launcher exits, stragglers (only possible without a PID namespace)
# may still hold the output pipes; stop reading after this.
_DRAIN_GRACE_S = 0.5
# The launcher's own deadline is the timeout plus this. It acts only when we did not: a caller that
# is frozen (stopped, swapping) or stuck; a dead caller is seen at once through the lifeline.
_LAUNCHER_GRACE_S = 1.0
_DEFAULT_LIMITS = SandboxLimits()


def run_python(source: str, *, limits: SandboxLimits = _DEFAULT_LIMITS, stdin: str = "") -> SandboxResult:
    """Run ``source`` as ``__main__`` in a fresh sandboxed interpreter and report what happened."""
    return _run(source, limits=limits, stdin=stdin)


def _run(
    source: str,
    *,
    limits: SandboxLimits,
    stdin: str = "",
    namespaces: bool = True,
    audit_hook: bool = True,
) -> SandboxResult:
    """`run_python` with layers switchable, so tests can prove each OS layer holds on its own."""
    with owned_workdir() as (workdir, lock_fd):
        return _run_in(workdir, lock_fd, source, limits, stdin, namespaces=namespaces, audit_hook=audit_hook)


def _run_in(
    workdir: str,
    lock_fd: int,
    source: str,
    limits: SandboxLimits,
    stdin: str,
    *,
    namespaces: bool,
    audit_hook: bool,
) -> SandboxResult:
    with open(os.path.join(workdir, _SOURCE_NAME), "wb") as f:
        # Lone surrogates become invalid UTF-8, which the child reports as a SyntaxError.
        f.write(source.encode("utf-8", errors="surrogateescape"))
    if os.geteuid() == 0:
        # The candidate (uid 65534) must be able to write its cwd when no tmpfs is mounted over it.
        os.chown(workdir, SANDBOX_UID, SANDBOX_UID)
        os.chmod(workdir, 0o700)
    status_r, status_w = os.pipe()
    # The lifeline: only this process holds its write end, so the kernel closes it when we end,
    # however we end; the launcher then kills the tree.
    lifeline_r, lifeline_w = os.pipe()
    try:
        fds = {"status_fd": status_w, "lifeline_fd": lifeline_r, "lock_fd": lock_fd}
        config = _config(workdir, limits, fds, namespaces=namespaces, audit_hook=audit_hook)
        try:
            with tempfile.TemporaryFile() as stdin_file:
                # A file, not a pipe: a large stdin cannot deadlock against a child that does not read it.
                stdin_file.write(stdin.encode("utf-8", errors="surrogateescape"))
                stdin_file.seek(0)
                start = time.monotonic()
                proc = _start_launcher(workdir, config, stdin_file.fileno(), pass_fds=tuple(fds.values()))
        finally:
            os.close(status_w)
            os.close(lifeline_r)
        supervisor = _Supervisor(proc, limits, start)
        supervisor.run()
        outcome = supervisor.outcome(start)
        status = _read_status(status_r)
    finally:
        os.close(status_r)
        os.close(lifeline_w)
    return _result(outcome, status, limits)


def _config(
    workdir: str, limits: SandboxLimits, fds: dict[str, int], *, namespaces: bool, audit_hook: bool
) -> dict[str, Any]:
    """The launcher's settings (its ``Config``); ``fds`` are the descriptors it inherits, by role."""
    return {
        **fds,
        "workdir": workdir,
        "source": _SOURCE_NAME,
        "deadline_s": limits.timeout_s + _LAUNCHER_GRACE_S,
        "namespaces": namespaces,
        "audit_hook": audit_hook,
        "uid": SANDBOX_UID,
        "cpu_s": limits.cpu_s,
        "memory_bytes": limits.memory_mb * 1024 * 1024,
        "max_processes": limits.max_processes,
        "max_file_bytes": limits.max_file_bytes,
        "max_disk_bytes": limits.max_disk_mb * 1024 * 1024,
        "max_open_files": limits.max_open_files,
    }


def _start_launcher(
    workdir: str, config: dict[str, Any], stdin_fd: int, *, pass_fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    # -I: no env vars, user site or script directory on sys.path; -B: no .pyc; -u: output written
    # before a kill is kept.
    command = [sys.executable, "-I", "-B", "-u", "-X", "utf8", str(LAUNCHER), json.dumps(config)]
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
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise SandboxError(f"cannot start the sandbox interpreter: {exc}") from exc


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """What the caller saw from outside: output, timing and whether it had to kill."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    killed_by: KillReason | None
    duration_s: float
    launcher_returncode: int


class _Supervisor:
    """Reads a launcher's output with a cap and enforces the wall clock, from the calling thread.

    The launcher is only signalled while unreaped, so its pid cannot have been reused.
    """

    def __init__(self, proc: subprocess.Popen[bytes], limits: SandboxLimits, start: float) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.cap = limits.max_output_bytes
        self.out_fd, self.err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        self.buffers = {self.out_fd: bytearray(), self.err_fd: bytearray()}
        self.truncated = False
        self.killed_by: KillReason | None = None
        self.deadline = start + limits.timeout_s
        """When to act next: the wall-clock limit, then the end of the launcher's grace to clean up."""
        self.exited_at: float | None = None
        self.selector = selectors.DefaultSelector()
        for fd in self.buffers:
            self.selector.register(fd, selectors.EVENT_READ)
        self.pidfd = _pidfd(proc.pid)
        if self.pidfd is not None:
            self.selector.register(self.pidfd, selectors.EVENT_READ)

    def run(self) -> None:
        try:
            while not self._done():
                self._enforce_deadline()
                for key, _ in self.selector.select(timeout=self._wait()):
                    if key.fd in self.buffers:
                        self._read(key.fd)
        finally:
            self.selector.close()
            if self.pidfd is not None:
                os.close(self.pidfd)

    def _done(self) -> bool:
        now = time.monotonic()
        if self.exited_at is None and _has_exited(self.proc.pid):
            self.exited_at = now
            if self.pidfd is not None:
                self.selector.unregister(self.pidfd)  # stays readable from now on
        if self.exited_at is None:
            return False
        pipes_open = any(key.fd in self.buffers for key in self.selector.get_map().values())
        return not pipes_open or now > self.exited_at + _DRAIN_GRACE_S

    def _enforce_deadline(self) -> None:
        if self.exited_at is not None or time.monotonic() < self.deadline:
            return
        if self.killed_by is None:
            self._kill("timeout")
        else:
            # The launcher did not clean up in time: kill its group (itself) as a last resort.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.deadline = float("inf")

    def _kill(self, reason: KillReason) -> None:
        """Ask the launcher to SIGKILL the candidate's whole tree, and give it a grace period."""
        self.killed_by = reason
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        self.deadline = time.monotonic() + _KILL_GRACE_S

    def _wait(self) -> float:
        now = time.monotonic()
        if self.exited_at is not None:
            return max(0.0, self.exited_at + _DRAIN_GRACE_S - now)
        if self.pidfd is None:
            return 0.05  # no exit notification: poll
        return min(1.0, max(0.0, self.deadline - now))

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, 65536)
        if not chunk:
            self.selector.unregister(fd)
            return
        buffer = self.buffers[fd]
        room = self.cap - len(buffer)
        buffer += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.truncated = True
            if self.killed_by is None:
                self._kill("output_limit")

    def outcome(self, start: float) -> _Outcome:
        """Reap the launcher (after `run`) and sum up."""
        try:
            returncode = self.proc.wait(timeout=_KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            returncode = self.proc.wait()
        duration = time.monotonic() - start
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return _Outcome(
            stdout=bytes(self.buffers[self.out_fd]),
            stderr=bytes(self.buffers[self.err_fd]),
            truncated=self.truncated,
            killed_by=self.killed_by,
            duration_s=duration,
            launcher_returncode=returncode,
        )


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (None where pidfds are missing)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(pid: int) -> bool:
    """Whether the launcher exited, without reaping it (an unreaped pid cannot be reused)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _read_status(fd: int) -> list[dict[str, Any]]:
    """The JSON lines the launcher, keeper and candidate setup wrote (never the candidate's code)."""
    os.set_blocking(fd, False)
    data = bytearray()
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    records: list[dict[str, Any]] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records


def _result(outcome: _Outcome, status: list[dict[str, Any]], limits: SandboxLimits) -> SandboxResult:
    if outcome.killed_by is None and any(r.get("stopped") == "deadline" for r in status):
        # The launcher kept the clock for us (we were frozen): the same timeout.
        outcome = dataclasses.replace(outcome, killed_by="timeout")
    errors = [str(r["error"]) for r in status if "error" in r]
    if errors and outcome.killed_by is None:
        raise SandboxError("sandbox setup failed: " + "; ".join(errors))
    if not status and outcome.killed_by is None:
        # Not even the launcher's first report: the sandbox never started, whatever the candidate is.
        last = outcome.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:]
        detail = f": {last[0]}" if last else ""
        raise SandboxError(f"the sandbox launcher exited {outcome.launcher_returncode} before reporting{detail}")
    layers = tuple(str(layer) for r in status for layer in r.get("layers", []))
    exits = [r for r in status if "returncode" in r]
    returncode: int | None = None
    cpu_s = 0.0
    killed_by = outcome.killed_by
    signal_name: str | None = None
    if exits:
        returncode = int(exits[-1]["returncode"])
        cpu_s = float(exits[-1].get("cpu_s", 0.0))
        if killed_by is None and returncode < 0:
            killed_by, signal_name = _signal_reason(-returncode, cpu_s, limits)
    elif killed_by is None:
        # Only when the candidate shares our uid (and killed the keeper), or someone killed the launcher.
        killed_by = "sandbox_died"
    return SandboxResult(
        returncode=None if outcome.killed_by is not None else returncode,
        stdout=outcome.stdout.decode("utf-8", errors="replace"),
        stderr=outcome.stderr.decode("utf-8", errors="replace"),
        timed_out=outcome.killed_by == "timeout",
        killed_by=killed_by,
        signal_name=signal_name,
        duration_s=outcome.duration_s,
        cpu_s=cpu_s,
        truncated=outcome.truncated,
        layers=layers,
    )


def _signal_reason(signum: int, cpu_s: float, limits: SandboxLimits) -> tuple[KillReason, str]:
    """Which rule a candidate killed by ``signum`` broke, and the signal's name."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return "signal", f"signal {signum}"
    if signum == signal.SIGXCPU:
        return "cpu_limit", name
    if signum == signal.SIGKILL:
        return ("cpu_limit" if cpu_s >= limits.cpu_s else "memory_limit"), name
    if signum == signal.SIGXFSZ:
        return "file_size_limit", name
    return "signal", name
