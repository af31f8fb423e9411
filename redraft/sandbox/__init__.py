"""Run untrusted Python source in a separate, contained process tree.

Invariant: candidate code never runs in the calling process, and every call returns a
`SandboxResult` within about ``timeout_s`` plus a few seconds, whatever the candidate does
(loops, allocates, forks, prints gigabytes, opens sockets, writes files). `run_python` raises
`SandboxError` only when the sandbox itself cannot be set up (a mandatory layer failed, or the
launcher could not start), never because of the candidate.

Layout: `supervisor` is the caller's side (starts the launcher, caps output, keeps the wall
clock, builds the result); `launcher` (with `namespaces`) is the program of the three sandbox
processes, launcher -> keeper (PID 1 of a new PID namespace) -> candidate, run by path in a fresh
``python -I`` with the standard library only; `records` holds the limits, the result and the
typed `KillReason`. Each module's docstring states what it guarantees.

The security boundary is the OS layers: the unprivileged uid, the rlimits, the empty network
namespace, the private mounts and the PID namespace / process-group kill. The audit hook is
defence in depth only: it turns forbidden actions into a clear ``PermissionError`` with a
readable message, but it is not a boundary (``ctypes`` or ``_posixsubprocess`` can bypass it).
Which layers applied is recorded in `SandboxResult.layers`, so tests and callers can see it.

Known limits: all sandboxes on a machine share uid 65534, so ``max_processes`` counts their
processes together; when the namespaces are unavailable (a non-root caller without user
namespaces) a candidate that calls ``setsid`` in a forked child can outlive the call.
"""

from redraft.errors import SandboxError
from redraft.sandbox.records import SANDBOX_UID, KillReason, SandboxLimits, SandboxResult
from redraft.sandbox.supervisor import run_python

__all__ = ["SANDBOX_UID", "KillReason", "SandboxError", "SandboxLimits", "SandboxResult", "run_python"]
