"""Watching one sandboxed run from the calling thread: its output read with a cap, its wall clock kept.

Invariant: the launcher is only signalled while unreaped (`_has_exited` looks without reaping), so its
pid cannot have been reused; a run past its deadline is asked to end (SIGTERM: the launcher kills the
candidate's whole tree), and a launcher that does not within `KILL_GRACE_S` is killed with its group.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time

from redraft.sandbox._limits import KillReason, Outcome, SandboxLimits

KILL_GRACE_S = 3.0
"""How long the launcher gets to kill and reap its children after SIGTERM."""
DRAIN_GRACE_S = 0.5
"""After the launcher exits, stragglers (only possible without a PID namespace) may still hold the output
pipes; reading stops after this."""


class Watch:
    """Reads a launcher's output with a cap and enforces the wall clock, from the calling thread.

    The launcher is only signalled while unreaped, so its pid cannot have been reused.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], limits: SandboxLimits, start: float, cancel_fd: int | None = None
    ) -> None:
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
        self.cancel_fd = cancel_fd
        if cancel_fd is not None:
            self.selector.register(cancel_fd, selectors.EVENT_READ)

    def run(self) -> None:
        try:
            while not self._done():
                self._enforce_deadline()
                for key, _ in self.selector.select(timeout=self._wait()):
                    if key.fd in self.buffers:
                        self._read(key.fd)
                    elif key.fd == self.cancel_fd:
                        self._cancel(key.fd)
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
        return not pipes_open or now > self.exited_at + DRAIN_GRACE_S

    def _cancel(self, fd: int) -> None:
        """The caller no longer needs the run (its tests are done): end it now, unless it already ended."""
        self.selector.unregister(fd)  # it stays readable
        self.cancel_fd = None
        if self.exited_at is None and self.killed_by is None:
            self._kill("cancelled")

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
        self.deadline = time.monotonic() + KILL_GRACE_S

    def _wait(self) -> float:
        now = time.monotonic()
        if self.exited_at is not None:
            return max(0.0, self.exited_at + DRAIN_GRACE_S - now)
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

    def outcome(self, start: float) -> Outcome:
        """Reap the launcher (after `run`) and sum up."""
        try:
            returncode = self.proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            returncode = self.proc.wait()
        duration = time.monotonic() - start
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return Outcome(
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
