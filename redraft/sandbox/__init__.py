"""Run untrusted Python source in a separate, contained process tree.

Invariant: candidate code never runs in the calling process, and every call returns a
`SandboxResult` within about ``timeout_s`` plus a few seconds, whatever the candidate does
(loops, allocates, forks, prints gigabytes, opens sockets, writes files). `run_python` raises
`SandboxError` only when the sandbox itself cannot be set up (a mandatory layer failed, or the
launcher could not start), never because of the candidate. The sandbox outlives nothing: it
keeps its own deadline and dies with its caller, even a frozen or SIGKILLed one, and the work
directory a killed caller leaves is removed by `sweep_stale_workdirs` (the verifier calls it
once per process when it starts), which never touches a live sandbox's.

The security boundary is the OS layers: the unprivileged uid, the rlimits, the empty network
namespace, the allow-list view (a ``chroot`` into a read-only tree of the standard library and its
own work directory, in a private mount namespace) and the PID namespace / process-group kill. The
audit hook is defence in depth only: it turns forbidden actions into a clear ``PermissionError`` with a
readable message, but it is not a boundary (``ctypes`` or ``_posixsubprocess`` can bypass it).
Which layers applied is recorded in `SandboxResult.layers`, so tests and callers can see it.

See docs/architecture.md, section "The sandbox: its rooms, memory, limits, and why not bubblewrap".
"""

from redraft.errors import SandboxError
from redraft.sandbox import _isolation as isolation
from redraft.sandbox._harness import Case, CaseOutcome, CaseResult, HarnessResult, kill_detail, run_tests
from redraft.sandbox._limits import SANDBOX_UID, KillReason, SandboxLimits, SandboxResult
from redraft.sandbox._supervisor import run_python
from redraft.sandbox._workdirs import sweep_stale_workdirs

__all__ = [
    "SANDBOX_UID",
    "Case",
    "CaseOutcome",
    "CaseResult",
    "HarnessResult",
    "KillReason",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "isolation",
    "kill_detail",
    "run_python",
    "run_tests",
    "sweep_stale_workdirs",
]
