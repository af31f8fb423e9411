"""Run untrusted Python source in a separate, contained process tree.

Invariant: candidate code never runs in the calling process, and every call returns a
`SandboxResult` within about ``timeout_s`` plus a few seconds, whatever the candidate does
(loops, allocates, forks, prints gigabytes, opens sockets, writes files). `run_python` raises
`SandboxError` only when the sandbox itself cannot be set up (a mandatory layer failed, or the
launcher could not start), never because of the candidate. The sandbox outlives nothing: it
keeps its own deadline and dies with its caller, even a frozen or SIGKILLed one, and the work
directory a killed caller leaves is removed by `sweep_stale_workdirs` (the verifier calls it
once per process when it starts), which never touches a live sandbox's.

Layout: `supervisor` is the caller's side (starts the launcher, caps output, keeps the wall
clock); `workdirs` names, locks and sweeps the work directories; `launcher` (with `namespaces`
and `audithook`) is the program of the three sandbox processes, launcher -> keeper (PID 1 of a
new PID namespace) -> candidate, run by path in a fresh ``python -I`` with the standard library
only, in an allow-list view of the filesystem (`view`: the standard library, its work directory and
inputs, a few devices; `_isolation` says where the view cannot be built and reads the user's opt-out);
`records` holds the limits, the result and the typed `KillReason`. `harness` tests a
candidate's function with two such runs at once, the candidate's process (`callserver`) and a
test process of trusted code only (`testrunner`), joined by pipes that carry plain data only
(`plaindata`): a pass needs the test process's per-run secret. It is the rule for every scenario
that executes candidate code, in feedback and in grade. Each module's docstring states what it
guarantees.

Memory is bounded per process (RLIMIT_AS) and, where the machine lets us make a memory cgroup (root, and
cgroup v2's memory controller delegated or cgroup v1's mounted), for the whole tree (`memorygroup`): the
candidate's children share its limit. Where no group can be made, each process keeps its own limit alone
(the run's layers then hold no ``memcg:``).

The security boundary is the OS layers: the unprivileged uid, the rlimits, the empty network
namespace, the allow-list view (a ``chroot`` into a read-only tree of the standard library and its
own work directory, in a private mount namespace) and the PID namespace / process-group kill. The
audit hook is defence in depth only: it turns forbidden actions into a clear ``PermissionError`` with a
readable message, but it is not a boundary (``ctypes`` or ``_posixsubprocess`` can bypass it).
Which layers applied is recorded in `SandboxResult.layers`, so tests and callers can see it.

Known limits: all sandboxes on a machine share uid 65534, so ``max_processes`` counts their
processes together; when the namespaces are unavailable (a non-root caller without user
namespaces) a candidate that calls ``setsid`` in a forked child can outlive the call; a process
forked (without exec) from the caller while a sandbox runs holds the lifeline's write end too,
so if the caller dies that sandbox stops at its own deadline rather than at once.

Why not bubblewrap: it offers the same containment, but it could replace only `namespaces` and
`view`; the rlimits, the uid drop, the audit hook, the exit report, the output cap and the clock
would stay ours. What it replaces it does worse for this
use: ``--uid 65534`` as root maps to root outside, so RLIMIT_NPROC does not bind;
``--die-with-parent`` is PR_SET_PDEATHSIG, which kills a sandbox when the thread that started it
ends, its caller alive; it creates the parents of bound directories with mode 0700 (a workaround
per path); and it costs more per run, not less. Being optional, it would mean two
implementations to keep secure for no guarantee gained.
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
