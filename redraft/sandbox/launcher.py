"""The sandbox's own processes: launcher, keeper and candidate. Standard library only; run by path.

`redraft.sandbox._supervisor` runs this file as ``python -I -B -u -X utf8 launcher.py CONFIG_JSON``
in a fresh isolated interpreter, where redraft itself may not be importable: it imports nothing
but the standard library, and importing it does nothing (``-I`` also keeps this file's directory
off ``sys.path``, so the candidate cannot import its neighbours by accident). All three processes
(launcher, keeper, candidate) are forks of that one interpreter.

Invariants: no candidate code runs unless every mandatory layer (rlimits, the uid drop,
``no_new_privs``, capabilities, and the view when ``require_view``) applied: a failure is
reported as ``{"error": ...}`` and the process exits 70. The status pipe carries JSON lines
written by this file's own code only: the candidate's copy is closed before its source is
compiled. The candidate inherits its standard streams and its ``channel_fds`` only, and the
launcher and keeper close their copies of those after forking, so a pipe's far end sees EOF as
soon as the candidate's tree ends. Each namespace and the view that applied (or failed, with its
errno) is reported in ``layers``.

See docs/architecture.md, section "The sandbox's three processes".
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import fcntl
import importlib.util
import json
import os
import resource
import select
import signal
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn


def load_sibling(name: str) -> types.ModuleType:
    """A module beside this file, loaded by path (``-I`` keeps this directory off sys.path, on purpose)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"redraft_sandbox_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from redraft.sandbox import audithook, memorygroup, namespaces, view
else:
    audithook = load_sibling("audithook")
    memorygroup = load_sibling("memorygroup")
    namespaces = load_sibling("namespaces")
    view = load_sibling("view")

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
EX_SOFTWARE = 70

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


@dataclass(frozen=True, kw_only=True)
class Config:
    """One run's settings, as the supervisor writes them to the pipe named by argv[1]."""

    workdir: str
    source: str
    """The candidate's file name inside ``workdir``."""
    status_fd: int
    lifeline_fd: int
    """The read end of a pipe whose write end only the caller holds: it closes when the caller ends."""
    lock_fd: int
    """The work directory's open descriptor holding its ``flock`` (see workdirs.py); kept until we exit."""
    deadline_s: float
    """This launcher's own wall-clock limit, from its start: the caller's timeout plus a grace."""
    namespaces: bool
    require_view: bool
    """Refuse to run the candidate unless the allow-list view (view.py) applied: a mandatory layer."""
    audit_hook: bool
    uid: int
    cpu_s: int
    memory_bytes: int
    max_processes: int
    max_file_bytes: int
    max_disk_bytes: int
    max_open_files: int
    channel_fds: list[int] = field(default_factory=list)
    """Pipes for the candidate's program (a harnessed run, see harness.py), handed to it as fds 3, 4, ...
    in this order; the launcher and keeper close their copies, so the far end sees EOF when it ends."""
    preload: list[str] = field(default_factory=list)
    """Modules beside this file (standard library only) the launcher loads before any mount, privileged, as
    ``redraft_sandbox_<name>`` in ``sys.modules``, in this order: the candidate has them when its source runs."""
    inputs: list[str] = field(default_factory=list)  # put in ``workdir`` by the caller, carried under its tmpfs
    outputs: list[str] = field(default_factory=list)  # copied out from under the tmpfs when the candidate ends
    max_collect_bytes: int = 0
    root: bool = False
    """Whether the launcher started as root (fixed before the candidate drops its uid)."""

    @classmethod
    def read(cls, fd: int) -> Config:
        """The settings the supervisor wrote to the pipe ``fd`` (never the command line, which any process that
        sees ours can read), read whole and closed."""
        with os.fdopen(fd, "rb") as pipe:
            return cls(**json.loads(pipe.read()), root=os.geteuid() == 0)

    @property
    def source_path(self) -> str:
        return os.path.join(self.workdir, self.source)

    @property
    def view_root(self) -> str:
        """Where the candidate's view is built (the host work directory, ours alone): its root after the chroot."""
        return self.workdir


def report(cfg: Config, **fields: object) -> None:
    with contextlib.suppress(BrokenPipeError):  # a caller that is gone reads nothing
        os.write(cfg.status_fd, (json.dumps(fields) + "\n").encode())


def fail(cfg: Config, message: str) -> NoReturn:
    """A mandatory layer is missing: refuse to run the candidate at all."""
    report(cfg, error=message)
    os._exit(EX_SOFTWARE)


def prctl(option: int, value: int) -> bool:
    return int(LIBC.prctl(option, value, 0, 0, 0)) == 0


# ---------------------------------------------------------------- launcher: the process tree

# Taken synchronously with sigtimedwait, whose timeout is the launcher's own deadline: SIGTERM (the
# caller's "kill it"), SIGIO (the caller's end of the lifeline closed) and SIGCHLD.
WAITED = {signal.SIGTERM, signal.SIGIO, signal.SIGCHLD}


def main(argv: list[str]) -> NoReturn:
    started = time.monotonic()
    cfg = Config.read(int(argv[1]))
    signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)
    watch_lifeline(cfg.lifeline_fd)
    if caller_gone(cfg.lifeline_fd):
        os._exit(EX_SOFTWARE)  # nobody to run it for
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open(cfg.source_path, "rb") as f:
        source = f.read()
    inputs = namespaces.read_files(cfg.workdir, cfg.inputs)  # as the source, before a tmpfs hides them
    # Loaded now, privileged and before the mounts: the package may be out of the uid's reach, or under a
    # directory a tmpfs is about to hide (a checkout in /tmp). The candidate inherits them through the fork.
    for name in cfg.preload:
        sys.modules[f"redraft_sandbox_{name}"] = load_sibling(name)
    group = memorygroup.make(cfg.memory_bytes)  # before the namespaces and the view: the host's cgroup tree
    layers: list[str] = [group.layer] if group is not None else []
    entered = namespaces.enter_namespaces(cfg.root, layers) if cfg.namespaces else set()
    viewed = "mountns" in entered and namespaces.private_view(cfg, source, layers, inputs, view.build)
    report(cfg, layers=layers)
    if cfg.require_view and not viewed:
        fail(cfg, "no allow-list view of the filesystem (" + (layers[-1] if layers else "no namespaces") + ")")
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    keeper_pid = os.fork()
    if keeper_pid == 0:
        keeper(cfg, source, group, viewed=viewed, fresh_proc="pidns" in entered)
    close_all(cfg.channel_fds)
    # Both sides set the group, so whichever runs first, it is in place before anyone signals it.
    with contextlib.suppress(OSError):
        os.setpgid(keeper_pid, keeper_pid)
    keeper_status = wait_for_keeper(cfg, keeper_pid, deadline=started + cfg.deadline_s)
    reap_orphans()
    memorygroup.remove(group)
    if viewed and cfg.outputs:
        report(cfg, uncollected=namespaces.collect_outputs(cfg))
    code = os.waitstatus_to_exitcode(keeper_status)
    os._exit(code if code >= 0 else 128 - code)


def watch_lifeline(fd: int) -> None:
    """Have the kernel send us SIGIO when the caller's end of the lifeline closes, however the caller ends.

    A pipe rather than PR_SET_PDEATHSIG, which fires when the *thread* that started us ends, the
    caller alive: the caller may be one thread of a Ray actor. The write end closes only with the
    caller process itself.
    """
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)


def caller_gone(lifeline_fd: int) -> bool:
    """The caller never writes to the lifeline: readable means its end is closed."""
    return bool(select.select([lifeline_fd], [], [], 0)[0])


def wait_for_keeper(cfg: Config, keeper_pid: int, *, deadline: float) -> int:
    """Reap children until the keeper exits; returns its wait status.

    The keeper's group is killed when the caller asks (SIGTERM), when the caller is gone, or at this
    launcher's own deadline: the tree outlives neither its caller nor its time, even if the caller is
    frozen or dead. The reason is reported (the supervisor turns ``deadline`` into a timeout).
    """
    stopping = False
    while True:
        info = signal.sigtimedwait(WAITED, max(0.0, deadline - time.monotonic()))
        if not stopping and (reason := stop_reason(info, cfg.lifeline_fd, deadline)) is not None:
            stopping = True
            report(cfg, stopped=reason)
        if stopping:
            kill_group(keeper_pid)
            deadline = time.monotonic() + 0.1  # and again until the keeper is reaped
        status = reap_children(keeper_pid)
        if status is not None:
            return status


def stop_reason(info: signal.struct_siginfo | None, lifeline_fd: int, deadline: float) -> str | None:
    if info is None or time.monotonic() >= deadline:
        return "deadline"
    if info.si_signo == signal.SIGTERM:
        return "caller_asked"
    if caller_gone(lifeline_fd):
        return "caller_gone"
    return None


def reap_children(keeper_pid: int) -> int | None:
    """Reap every child that exited; the keeper's wait status once it has (after killing its group)."""
    while True:
        # Peek without reaping: the keeper's pid (and so its group id) stays ours until we reap it.
        try:
            child = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if child is None:
            return None
        if child.si_pid == keeper_pid:
            kill_group(keeper_pid)
            return os.waitpid(keeper_pid, 0)[1]
        os.waitpid(child.si_pid, 0)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def reap_orphans() -> None:
    """Reap the killed group's orphans (reparented to us, the subreaper) as they die.

    Otherwise they would stay zombies under a PID 1 that does not reap. Gives up on ones that do not
    die (setsid escapees, possible only without the PID namespace).
    """
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def keeper(
    cfg: Config, source: bytes, group: memorygroup.MemoryGroup | None, *, viewed: bool, fresh_proc: bool
) -> NoReturn:
    """PID 1 of the new PID namespace when there is one, in the tree's memory cgroup if any; never returns."""
    if (error := memorygroup.join(group)) is not None:  # before anything of the tree is charged elsewhere
        fail(cfg, error)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # its parent, the launcher, is single-threaded
    prctl(PR_SET_DUMPABLE, 0)  # a candidate of the same uid (a non-root caller) cannot read or trace it
    # The host work directory's descriptor would reach outside the view: the candidate must not inherit it.
    os.close(cfg.lock_fd)
    os.close(cfg.lifeline_fd)
    os.setpgid(0, 0)
    if viewed:
        if fresh_proc:
            with contextlib.suppress(OSError):
                view.mount_proc(namespaces.mount, cfg.view_root)
        view.enter(cfg.view_root)
    candidate_pid = os.fork()
    if candidate_pid == 0:
        candidate(cfg, source)
    close_all(cfg.channel_fds)
    while True:
        pid, status, usage = os.wait4(-1, 0)
        if pid == candidate_pid:
            break
    report(cfg, returncode=os.waitstatus_to_exitcode(status), cpu_s=usage.ru_utime + usage.ru_stime)
    os._exit(0)


# ---------------------------------------------------------------- candidate


def drop_privileges(cfg: Config, layers: list[str]) -> None:
    limits = [
        (resource.RLIMIT_CPU, cfg.cpu_s, cfg.cpu_s + 1),
        (resource.RLIMIT_AS, cfg.memory_bytes, cfg.memory_bytes),
        (resource.RLIMIT_NPROC, cfg.max_processes, cfg.max_processes),
        (resource.RLIMIT_FSIZE, cfg.max_file_bytes, cfg.max_file_bytes),
        (resource.RLIMIT_NOFILE, cfg.max_open_files, cfg.max_open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    try:
        for kind, soft, hard in limits:
            resource.setrlimit(kind, (soft, hard))
    except (OSError, ValueError) as exc:
        fail(cfg, f"setrlimit: {exc}")
    layers.append("rlimits")
    if cfg.root:
        uid = cfg.uid
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            fail(cfg, f"dropping to uid {uid}: {exc}")
        if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
            fail(cfg, f"still privileged after dropping to uid {uid}")
        layers.append(f"uid:{uid}")
    if not prctl(PR_SET_NO_NEW_PRIVS, 1):
        fail(cfg, namespaces.last_error("no_new_privs"))
    layers.append("no_new_privs")
    # A non-root caller's user namespace granted full capabilities inside it: give them up.
    if not namespaces.clear_capabilities():
        fail(cfg, namespaces.last_error("capset"))


def candidate(cfg: Config, source: bytes) -> NoReturn:
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.chdir(cfg.workdir)
    layers: list[str] = []
    if cfg.root and namespaces.preimport_unreachable_stdlib():
        layers.append("preimported")
    drop_privileges(cfg, layers)
    if cfg.audit_hook:
        audithook.install_audit_hook(cfg.workdir)
        layers.append("audit_hook")
    report(cfg, layers=layers)
    os.close(cfg.status_fd)
    place_channels(cfg.channel_fds)
    run_source(cfg.source_path, source)
    sys.exit(0)


def place_channels(fds: list[int]) -> None:
    """Move ``fds`` to 3, 4, ...: first above every target, so that no move overwrites one still to come."""
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3 + len(fds)) for fd in fds]
    close_all(fds)
    for target, fd in enumerate(moved, start=3):
        os.dup2(fd, target, inheritable=False)
        os.close(fd)


def run_source(path: str, source: bytes) -> None:
    """Run ``source`` as ``__main__``, the way ``python main.py`` would."""
    main_module = types.ModuleType("__main__")
    main_module.__file__ = path
    main_module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_module
    sys.argv = [path]
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main_module.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        # Drop this file's own frame so the traceback reads like a plain `python main.py`.
        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv)
