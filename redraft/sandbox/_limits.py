"""The typed records of one sandboxed run: its limits, its result, and the rule that stopped it.

Invariant: why a run was stopped is the `KillReason` literal in `SandboxResult.killed_by`
(plus the signal's name in ``signal_name``); callers match on those, never on words.
`SandboxResult.kill_description` is the same decision in words, for people only. `result_of` makes
that decision, once, from what the caller saw (`Outcome`) and what the launcher reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
from dataclasses import dataclass, field
from typing import Any, Literal

from redraft.errors import SandboxError

KillReason = Literal[
    "timeout", "output_limit", "cpu_limit", "memory_limit", "file_size_limit", "signal", "sandbox_died", "cancelled"
]
"""Why a run ended early.

- ``timeout``: the wall-clock limit; the sandbox killed the whole tree.
- ``output_limit``: stdout or stderr went past ``max_output_bytes``; the sandbox killed the tree.
- ``cpu_limit``: RLIMIT_CPU (SIGXCPU, or SIGKILL at the hard limit).
- ``memory_limit``: a SIGKILL before the CPU limit was used up. That is an inference (most likely
  the kernel's OOM killer), hence "memory?" in words; RLIMIT_AS itself shows as a ``MemoryError``.
- ``file_size_limit``: RLIMIT_FSIZE (SIGXFSZ; Python ignores it, so this is rare).
- ``signal``: any other signal ended the candidate (``signal_name`` says which, e.g. SIGSEGV).
- ``sandbox_died``: the sandbox's own keeper ended without reporting (possible only when the
  candidate shares the caller's uid and kills it, or someone kills the launcher).
- ``cancelled``: the caller no longer needed the run and ended it (a harnessed run ends the
  candidate's process once the tests are done): not a rule the candidate broke.
"""

SANDBOX_UID = 65534
"""The unprivileged uid/gid (``nobody``) a root caller drops the candidate to."""


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Resource limits of one sandboxed run."""

    timeout_s: float = 10.0
    """Wall-clock limit; the whole process tree is killed after it."""
    cpu_s: int = 10
    """RLIMIT_CPU of the candidate (SIGXCPU at the limit, SIGKILL one second later)."""
    memory_mb: int = 512
    """RLIMIT_AS of the candidate: allocations beyond it raise MemoryError."""
    max_processes: int = 32
    """RLIMIT_NPROC; binds because a root caller's candidate runs as uid 65534."""
    max_output_bytes: int = 64_000
    """stdout and stderr are each kept up to this; going past it kills the candidate."""
    max_file_bytes: int = 10_000_000
    """RLIMIT_FSIZE: the largest file the candidate may write."""
    max_disk_mb: int = 64
    """Size of the tmpfs work directory (when the mount namespace is available)."""
    max_open_files: int = 128
    """RLIMIT_NOFILE."""
    max_input_bytes: int = 8_000_000
    """The input files a run is handed, all together (`redraft.sandbox._files`)."""
    max_collect_bytes: int = 2_000_000
    """An output file larger than this is not collected."""


@dataclass(frozen=True, kw_only=True)
class SandboxResult:
    """What a sandboxed run did. ``returncode`` is None when the sandbox killed it."""

    returncode: int | None
    """The candidate's exit code, negative for a signal; None if killed for timeout or output."""
    stdout: str
    stderr: str
    timed_out: bool
    killed_by: KillReason | None
    """Which rule stopped the run early; None when the candidate ended on its own (any exit code)."""
    signal_name: str | None = None
    """The signal that ended the candidate (``SIGXCPU``, ``SIGSEGV``...); None when it exited or
    the sandbox killed it for ``timeout`` or ``output_limit``."""
    duration_s: float
    cpu_s: float = 0.0
    """CPU time the candidate used (0 when it was killed before reporting)."""
    truncated: bool = False
    """stdout or stderr went past ``max_output_bytes`` and was cut."""
    layers: tuple[str, ...] = ()
    """The containment layers that applied, e.g. ``netns``, ``uid:65534``, ``audit_hook``."""
    files: dict[str, bytes] = field(default_factory=dict)
    """The output files asked for and collected, by name (`redraft.sandbox._files`)."""
    uncollected: dict[str, str] = field(default_factory=dict)
    """Each output file asked for and not collected, with why (not written, not a regular file, too large)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def kill_description(self) -> str | None:
        """``killed_by`` in words ("timeout", "output limit", "SIGXCPU (cpu limit)", "SIGSEGV"), for people."""
        signal_name = self.signal_name or "SIGKILL"
        match self.killed_by:
            case None:
                return None
            case "timeout":
                return "timeout"
            case "output_limit":
                return "output limit"
            case "cpu_limit":
                return f"{signal_name} (cpu limit)"
            case "memory_limit":
                return f"{signal_name} (memory?)"
            case "file_size_limit":
                return f"{signal_name} (file size limit)"
            case "signal":
                return self.signal_name or "signal"
            case "sandbox_died":
                return "sandbox keeper died"
            case "cancelled":
                return "cancelled"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the caller saw from outside: output, timing and whether it had to kill."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    killed_by: KillReason | None
    duration_s: float
    launcher_returncode: int


def result_of(
    outcome: Outcome, status: list[dict[str, Any]], limits: SandboxLimits, workdir: str = ""
) -> SandboxResult:
    """The run's result from what the caller saw and the launcher's status lines; `SandboxError` if it never started.

    The work directory's path in stderr reads as relative (``File "main.py"``): a traceback says the same from
    one run to the next, so feedback that quotes it is the same prompt again (and its cached answer), and no
    temporary path of the machine reaches a trace. Stdout is the program's own, as it printed it."""
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
            killed_by, signal_name = signal_reason(-returncode, cpu_s, limits)
    elif killed_by is None:
        # Only when the candidate shares our uid (and killed the keeper), or someone killed the launcher.
        killed_by = "sandbox_died"
    return SandboxResult(
        returncode=None if outcome.killed_by is not None else returncode,
        stdout=outcome.stdout.decode("utf-8", errors="replace"),
        stderr=_relative(outcome.stderr.decode("utf-8", errors="replace"), workdir),
        timed_out=outcome.killed_by == "timeout",
        killed_by=killed_by,
        signal_name=signal_name,
        duration_s=outcome.duration_s,
        cpu_s=cpu_s,
        truncated=outcome.truncated,
        layers=layers,
        uncollected={str(k): str(v) for r in status for k, v in dict(r.get("uncollected", {})).items()},
    )


def _relative(text: str, workdir: str) -> str:
    return text.replace(f"{workdir}/", "").replace(workdir, ".") if workdir else text


def signal_reason(signum: int, cpu_s: float, limits: SandboxLimits) -> tuple[KillReason, str]:
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


def read_status(fd: int) -> list[dict[str, Any]]:
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
