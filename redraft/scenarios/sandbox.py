"""Run untrusted Python source in a separate, contained process.

Invariant: candidate code never runs in the calling process, and every call
returns a `SandboxResult` within about ``timeout_s`` plus a few seconds, whatever
the candidate does (loops, allocates, forks, prints gigabytes, opens sockets,
writes files). `run_python` raises `SandboxError` only when the sandbox itself
cannot be set up (a mandatory layer failed), never because of the candidate.

Process tree (all three are forks of one fresh ``python -I`` interpreter; the
calling process never forks itself and uses no ``preexec_fn``, so it is safe to
call from a threaded Ray actor):

- *launcher* (stays privileged): enters new network, mount and PID namespaces
  (a non-root caller gets them inside a new user namespace), masks the
  world-writable directories (/tmp, /var/tmp, /dev/shm) with small tmpfs mounts,
  mounts a size-capped tmpfs as the work directory and, when the interpreter
  lives in a directory uid 65534 cannot enter (pyenv under /root), hides that
  directory behind a tmpfs with only ``sys.path`` bound back in; then it forks
  the keeper and waits.
  On SIGTERM from the caller it SIGKILLs the keeper's process group. It reaps
  everything, so no zombie is left behind (this machine's PID 1 does not reap).
- *keeper* (PID 1 of the new PID namespace, still privileged so the candidate
  cannot signal it): forks the candidate and reports its exit status and CPU
  time. When it exits the kernel kills every process left in the namespace,
  including ones that escaped the process group with ``setsid``.
- *candidate*: sets rlimits (CPU, AS, NPROC, FSIZE, NOFILE, CORE=0), drops to
  uid/gid 65534 when running as root (``RLIMIT_NPROC`` does not bind root),
  sets ``no_new_privs``, clears capabilities, installs the audit-hook prelude and
  only then compiles and runs the candidate's source.

The security boundary is the OS layers: the unprivileged uid, the rlimits, the
empty network namespace, the private mounts and the PID namespace / process-group
kill. The audit hook is defence in depth only: it turns forbidden actions into a
clear ``PermissionError`` with a readable message, but it is not a boundary
(``ctypes`` or ``_posixsubprocess`` can bypass it). Which layers applied is
recorded in `SandboxResult.layers`, so tests and callers can see it.

Known limits: all sandboxes on a machine share uid 65534, so ``max_processes``
counts their processes together; when the namespaces are unavailable (a
non-root caller without user namespaces) a candidate that calls ``setsid`` in a
forked child can outlive the call.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from redraft.errors import RedraftError

SANDBOX_UID = 65534
"""The unprivileged uid/gid (``nobody``) a root caller drops the candidate to."""

_SOURCE_NAME = "main.py"
# How long the launcher gets to kill and reap its children after SIGTERM.
_KILL_GRACE_S = 3.0
# After the launcher exits, stragglers (only possible without a PID namespace)
# may still hold the output pipes; stop reading after this.
_DRAIN_GRACE_S = 0.5


class SandboxError(RedraftError):
    """The sandbox could not be set up on this machine (a deployment problem, not the candidate's)."""


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


@dataclass(frozen=True, kw_only=True)
class SandboxResult:
    """What a sandboxed run did. ``returncode`` is None when the sandbox killed it."""

    returncode: int | None
    """The candidate's exit code, negative for a signal; None if killed for timeout or output."""
    stdout: str
    stderr: str
    timed_out: bool
    killed_by: str | None
    """Why the run was stopped early: "timeout", "output limit", "SIGXCPU (cpu limit)", ..."""
    duration_s: float
    cpu_s: float = 0.0
    """CPU time the candidate used (0 when it was killed before reporting)."""
    truncated: bool = False
    """stdout or stderr went past ``max_output_bytes`` and was cut."""
    layers: tuple[str, ...] = ()
    """The containment layers that applied, e.g. ``netns``, ``uid:65534``, ``audit_hook``."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_python(source: str, *, limits: SandboxLimits = SandboxLimits(), stdin: str = "") -> SandboxResult:
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
    workdir = tempfile.mkdtemp(prefix="redraft-sandbox-")
    try:
        return _run_in(workdir, source, limits, stdin, namespaces=namespaces, audit_hook=audit_hook)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_in(
    workdir: str, source: str, limits: SandboxLimits, stdin: str, *, namespaces: bool, audit_hook: bool
) -> SandboxResult:
    root = os.geteuid() == 0
    with open(os.path.join(workdir, _SOURCE_NAME), "wb") as f:
        # Lone surrogates become invalid UTF-8, which the child reports as a SyntaxError.
        f.write(source.encode("utf-8", errors="surrogateescape"))
    if root:
        # The candidate (uid 65534) must be able to write its cwd when no tmpfs is mounted over it.
        os.chown(workdir, SANDBOX_UID, SANDBOX_UID)
        os.chmod(workdir, 0o700)
    status_r, status_w = os.pipe()
    config = {
        "workdir": workdir,
        "source": _SOURCE_NAME,
        "status_fd": status_w,
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
    # -I: no env vars, user site or cwd on sys.path; -B: no .pyc; -u: output written before a kill is kept.
    command = [sys.executable, "-I", "-B", "-u", "-X", "utf8", "-c", _LAUNCHER, json.dumps(config)]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    with tempfile.TemporaryFile() as stdin_file:
        # A file, not a pipe: a large stdin cannot deadlock against a child that does not read it.
        stdin_file.write(stdin.encode("utf-8", errors="surrogateescape"))
        stdin_file.seek(0)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                stdin=stdin_file,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                start_new_session=True,
                pass_fds=(status_w,),
            )
        except OSError as exc:
            os.close(status_r)
            raise SandboxError(f"cannot start the sandbox interpreter: {exc}") from exc
        finally:
            os.close(status_w)
        try:
            supervisor = _Supervisor(proc, limits, start)
            supervisor.run()
            outcome = supervisor.outcome(start)
        finally:
            status = _read_status(status_r)
            os.close(status_r)
    return _result(outcome, status, limits)


@dataclass
class _Outcome:
    """What the caller saw from outside: output, timing and whether it had to kill."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    killed_by: str | None
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
        self.killed_by: str | None = None
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

    def _kill(self, reason: str) -> None:
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
                self._kill("output limit")

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
    errors = [str(r["error"]) for r in status if "error" in r]
    if errors and outcome.killed_by is None:
        raise SandboxError("sandbox setup failed: " + "; ".join(errors))
    layers = tuple(str(layer) for r in status for layer in r.get("layers", []))
    exits = [r for r in status if "returncode" in r]
    returncode: int | None
    cpu_s = 0.0
    killed_by = outcome.killed_by
    if exits:
        returncode = int(exits[-1]["returncode"])
        cpu_s = float(exits[-1].get("cpu_s", 0.0))
        if killed_by is None and returncode < 0:
            killed_by = _signal_reason(-returncode, cpu_s, limits)
    else:
        # Killed by us, or (only when the candidate shares our uid) the keeper was killed.
        returncode = None
        killed_by = killed_by or f"sandbox keeper died (launcher exit {outcome.launcher_returncode})"
    return SandboxResult(
        returncode=None if outcome.killed_by is not None else returncode,
        stdout=outcome.stdout.decode("utf-8", errors="replace"),
        stderr=outcome.stderr.decode("utf-8", errors="replace"),
        timed_out=outcome.killed_by == "timeout",
        killed_by=killed_by,
        duration_s=outcome.duration_s,
        cpu_s=cpu_s,
        truncated=outcome.truncated,
        layers=layers,
    )


def _signal_reason(signum: int, cpu_s: float, limits: SandboxLimits) -> str:
    """A readable cause for a candidate killed by ``signum``."""
    if signum == signal.SIGXCPU:
        return "SIGXCPU (cpu limit)"
    if signum == signal.SIGKILL:
        return "SIGKILL (cpu limit)" if cpu_s >= limits.cpu_s else "SIGKILL (memory?)"
    if signum == signal.SIGXFSZ:
        return "SIGXFSZ (file size limit)"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# The code of the three sandbox processes. It runs in a fresh `python -I`, where redraft itself may
# not be importable, so it uses the standard library only. It reads its configuration from argv[1].
_LAUNCHER = r'''
import builtins
import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import time
import traceback
import types

CFG = json.loads(sys.argv[1])
STATUS_FD = CFG["status_fd"]
WORKDIR = CFG["workdir"]
SOURCE_PATH = os.path.join(WORKDIR, CFG["source"])
ROOT = os.geteuid() == 0
UID = CFG["uid"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38

PREIMPORTED = (
    "bisect", "collections", "copy", "datetime", "decimal", "encodings.idna", "fractions", "functools",
    "hashlib", "heapq", "itertools", "json", "math", "operator", "random", "re", "socket", "statistics",
    "string", "typing",
)

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.unshare.argtypes = [ctypes.c_int]
LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
LIBC.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


def report(**fields):
    os.write(STATUS_FD, (json.dumps(fields) + "\n").encode())


def fail(message):
    # A mandatory layer is missing: refuse to run the candidate at all.
    report(error=message)
    os._exit(70)  # EX_SOFTWARE


def last_error(what):
    return f"{what}: {os.strerror(ctypes.get_errno())}"


def unshare(flags):
    return LIBC.unshare(flags) == 0


def encode(text):
    return None if text is None else text.encode()


def mount(source, target, fstype, flags, data):
    if LIBC.mount(encode(source), encode(target), encode(fstype), flags, encode(data)) != 0:
        raise OSError(last_error(f"mount {target}"))


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(layers):
    """Returns the namespaces entered; the PID namespace applies to children only."""
    entered = set()
    if ROOT:
        wanted = [(CLONE_NEWNET, "netns"), (CLONE_NEWNS, "mountns"), (CLONE_NEWPID, "pidns")]
        if unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID):
            entered = {name for _, name in wanted}
        else:
            for flag, name in wanted:
                if unshare(flag):
                    entered.add(name)
                else:
                    layers.append(last_error(f"{name} failed"))
    else:
        uid, gid = os.getuid(), os.getgid()
        for flags in (CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID, CLONE_NEWNET):
            if unshare(CLONE_NEWUSER | flags):
                entered = {"userns", "netns"}
                if flags & CLONE_NEWPID:
                    entered |= {"mountns", "pidns"}
                try:
                    write_file("/proc/self/setgroups", "deny")
                    write_file("/proc/self/uid_map", f"{uid} {uid} 1")
                    write_file("/proc/self/gid_map", f"{gid} {gid} 1")
                except OSError as exc:
                    layers.append(f"userns map failed: {exc}")
                break
        else:
            layers.append(last_error("userns+netns failed"))
    layers.extend(sorted(entered))
    return entered


def private_mounts(source, layers):
    """Hide the world-writable directories and give the candidate a size-capped work directory."""
    try:
        # Without this, the mounts below would propagate back to the host.
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        for path in ("/tmp", "/var/tmp", "/dev/shm"):
            if os.path.isdir(path) and not os.path.islink(path):
                mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=8m")
        os.makedirs(WORKDIR, exist_ok=True)
        if ROOT:
            expose_python(layers)
        owner = f",uid={UID},gid={UID}" if ROOT else ""
        mount("tmpfs", WORKDIR, "tmpfs", MS_NOSUID | MS_NODEV,
              f"mode=0700,size={CFG['max_disk_bytes']}{owner}")
        layers.append("tmpfs")
    except OSError as exc:
        layers.append(f"tmpfs failed: {exc}")
    if not os.path.exists(SOURCE_PATH):
        os.makedirs(WORKDIR, exist_ok=True)
        with open(SOURCE_PATH, "wb") as f:
            f.write(source)
        if ROOT:
            os.chown(WORKDIR, UID, UID)
            os.chown(SOURCE_PATH, UID, UID)


def reachable(path):
    """Whether uid UID can read ``path``, judging by the "other" permission bits of it and its ancestors."""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts) + 1):
        st = os.stat(os.sep.join(parts[:i]) or os.sep)
        if not st.st_mode & 0o001:
            return False
    return bool(os.stat(path).st_mode & 0o004)


def hidden_ancestor(path):
    """The topmost ancestor of ``path`` that uid UID cannot traverse."""
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts)):
        ancestor = os.sep.join(parts[:i])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def expose_python(layers):
    """Make this interpreter's sys.path readable by the unprivileged uid.

    The interpreter may live under a private directory (pyenv in /root): mount an empty tmpfs over
    that directory, which also hides the rest of it, and bind the sys.path directories back in place.
    """
    needed = sorted({os.path.realpath(p) for p in sys.path if os.path.isdir(p) and not reachable(p)})
    needed = [p for p in needed if not any(p.startswith(q + os.sep) for q in needed)]
    if not needed:
        return
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in needed}
    masked = set()
    for path in needed:
        ancestor = hidden_ancestor(path)
        if ancestor is not None and ancestor not in masked:
            mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
            masked.add(ancestor)
        os.makedirs(path, exist_ok=True)
        mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC, None)
        os.close(fds[path])
    layers.append("python_exposed")


def launcher():
    # SIGTERM (the caller's "kill it") and SIGCHLD are taken synchronously with sigwaitinfo.
    waited = {signal.SIGTERM, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open(SOURCE_PATH, "rb") as f:
        source = f.read()
    layers = []
    entered = enter_namespaces(layers) if CFG["namespaces"] else set()
    if "mountns" in entered:
        private_mounts(source, layers)
    report(layers=layers)
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    keeper_pid = os.fork()
    if keeper_pid == 0:
        keeper(source, "pidns" in entered and "mountns" in entered)
    # Both sides set the group, so whichever runs first, it is in place before anyone signals it.
    with contextlib.suppress(OSError):
        os.setpgid(keeper_pid, keeper_pid)
    os.close(STATUS_FD)
    keeper_status = None
    while keeper_status is None:
        info = signal.sigwaitinfo(waited)
        if info.si_signo == signal.SIGTERM:
            kill_group(keeper_pid)
        while True:
            # Peek without reaping: the keeper's pid (and so its group id) stays ours until we reap it.
            try:
                child = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if child is None:
                break
            if child.si_pid == keeper_pid:
                kill_group(keeper_pid)
                _, keeper_status = os.waitpid(keeper_pid, 0)
            else:
                os.waitpid(child.si_pid, 0)
    reap_orphans()
    code = os.waitstatus_to_exitcode(keeper_status)
    os._exit(code if code >= 0 else 128 - code)


def kill_group(pgid):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def reap_orphans():
    # Orphans of the killed group were reparented to us (the subreaper): reap them as they die, or
    # they would stay zombies under a PID 1 that does not reap. Give up on ones that do not die
    # (setsid escapees, possible only without the PID namespace).
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def keeper(source, fresh_proc):
    # Runs as PID 1 of the new PID namespace when there is one; never returns.
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.setpgid(0, 0)
    if fresh_proc:
        with contextlib.suppress(OSError):
            # A /proc of the new PID namespace: the candidate sees only its own processes.
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    candidate_pid = os.fork()
    if candidate_pid == 0:
        candidate(source)
        sys.exit(0)
    while True:
        pid, status, usage = os.wait4(-1, 0)
        if pid == candidate_pid:
            break
    report(returncode=os.waitstatus_to_exitcode(status), cpu_s=usage.ru_utime + usage.ru_stime)
    os._exit(0)


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_privileges(layers):
    limits = [
        (resource.RLIMIT_CPU, CFG["cpu_s"], CFG["cpu_s"] + 1),
        (resource.RLIMIT_AS, CFG["memory_bytes"], CFG["memory_bytes"]),
        (resource.RLIMIT_NPROC, CFG["max_processes"], CFG["max_processes"]),
        (resource.RLIMIT_FSIZE, CFG["max_file_bytes"], CFG["max_file_bytes"]),
        (resource.RLIMIT_NOFILE, CFG["max_open_files"], CFG["max_open_files"]),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    try:
        for kind, soft, hard in limits:
            resource.setrlimit(kind, (soft, hard))
    except (OSError, ValueError) as exc:
        fail(f"setrlimit: {exc}")
    layers.append("rlimits")
    if ROOT:
        try:
            os.setgroups([])
            os.setresgid(UID, UID, UID)
            os.setresuid(UID, UID, UID)
        except OSError as exc:
            fail(f"dropping to uid {UID}: {exc}")
        if os.getresuid() != (UID, UID, UID) or os.getresgid() != (UID, UID, UID) or os.getgroups():
            fail(f"still privileged after dropping to uid {UID}")
        layers.append(f"uid:{UID}")
    if LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail(last_error("no_new_privs"))
    layers.append("no_new_privs")
    # A non-root caller's user namespace granted full capabilities inside it: give them up.
    header = CapHeader(0x20080522, 0)
    data = (CapData * 2)()
    if LIBC.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        fail(last_error("capset"))


def install_audit_hook():
    real = os.path.realpath
    allowed = real(WORKDIR) + os.sep
    devnull = os.devnull
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    denied = frozenset({
        "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
        "subprocess.Popen", "pty.spawn",
        "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
        "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function",
    })
    # Events that change the file system, and which of their arguments are paths.
    path_events = {
        "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1),
        "os.symlink": (1,), "os.link": (1,), "os.chmod": (0,), "os.chown": (0,),
        "os.truncate": (0,), "os.utime": (0,), "shutil.rmtree": (0,), "os.mkfifo": (0,),
        "os.mknod": (0,),
    }

    def inside(path):
        if isinstance(path, int) or path is None:
            return True  # an already open descriptor
        full = real(os.fsdecode(path))
        return full == devnull or (full + os.sep).startswith(allowed)

    def hook(event, args):
        if event in denied:
            raise PermissionError(f"redraft sandbox: {event} is not allowed")
        if event == "open" and args[2] & write_flags and not inside(args[0]):
            raise PermissionError(f"redraft sandbox: writing {args[0]!r} outside the work directory")
        if event in path_events and not all(inside(args[i]) for i in path_events[event]):
            raise PermissionError(f"redraft sandbox: {event} outside the work directory")

    sys.addaudithook(hook)


def candidate(source):
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.chdir(WORKDIR)
    layers = []
    if ROOT and not all(reachable(p) for p in sys.path if os.path.isdir(p)):
        # Without the mount namespace the standard library may be unreadable after the drop:
        # import what solutions commonly use while still privileged.
        for name in PREIMPORTED:
            with contextlib.suppress(ImportError):
                __import__(name)
        layers.append("preimported")
    drop_privileges(layers)
    if CFG["audit_hook"]:
        install_audit_hook()
        layers.append("audit_hook")
    report(layers=layers)
    os.close(STATUS_FD)
    main = types.ModuleType("__main__")
    main.__file__ = SOURCE_PATH
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = [SOURCE_PATH]
    try:
        exec(compile(source, SOURCE_PATH, "exec", dont_inherit=True), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        # Drop this launcher's own frame so the traceback reads like a plain `python main.py`.
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        sys.exit(1)


launcher()
'''
