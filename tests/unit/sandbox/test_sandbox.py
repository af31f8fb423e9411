"""The sandbox contains hostile candidates, and each OS layer holds on its own.

Layer variants use the private `supervisor._run` switches: ``audit_hook=False`` leaves only
the OS layers (namespaces, uid 65534, rlimits); ``namespaces=False`` leaves the
uid, the rlimits and the audit hook.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from redraft.errors import SandboxError as ErrorsSandboxError
from redraft.sandbox import SandboxError, SandboxLimits, SandboxResult, run_python, sweep_stale_workdirs
from redraft.sandbox import _supervisor as supervisor
from redraft.sandbox import _workdirs as workdirs
from tests.support.paths import REPO_ROOT
from tests.support.sandbox_processes import leftover_processes, private_tempdir, wait_for_sandbox, workdirs_of

ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not ROOT, reason="the uid drop and namespace layers are the root path")

# (namespaces, audit_hook) and what each variant proves.
LAYERS = {
    "all": (True, True),
    "os_layers_only": (True, False),
    "hook_uid_rlimits_only": (False, True),
}


def run(source: str, variant: str = "all", **limits: Any) -> SandboxResult:
    namespaces, audit_hook = LAYERS[variant]
    return supervisor._run(
        textwrap.dedent(source),
        limits=SandboxLimits(**limits),
        namespaces=namespaces,
        audit_hook=audit_hook,
    )


# ---------------------------------------------------------------- ordinary programs


def test_normal_program_returns_stdout_stderr_and_code() -> None:
    result = run_python(
        "import sys\nprint('hello', input())\nprint('warn', file=sys.stderr)\nsys.exit(3)", stdin="you\n"
    )
    assert result.stdout == "hello you\n"
    assert result.stderr == "warn\n"
    assert result.returncode == 3
    assert not result.ok and not result.timed_out and result.killed_by is None

    assert run_python("print(sum(range(10)))").ok


def test_uncaught_exception_gives_a_plain_traceback() -> None:
    result = run_python("def f():\n    return 1 / 0\nf()\n")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert "return 1 / 0" in result.stderr  # the source line is shown, as with `python main.py`
    assert '"<string>"' not in result.stderr  # no launcher frames
    assert "launcher.py" not in result.stderr


@root_only
def test_all_layers_apply_as_root() -> None:
    result = run("""
        import os
        print(os.getuid(), os.getgid(), os.getgroups())
        print(sorted(p for p in os.listdir('/proc') if p.isdigit()))
    """)
    assert result.ok, result.stderr
    assert result.stdout.splitlines()[0] == "65534 65534 []"
    assert result.stdout.splitlines()[1] == "['2']"  # own PID namespace, whose keeper (PID 1, root) it cannot see
    for layer in ("netns", "mountns", "pidns", "view", "rlimits", "uid:65534", "no_new_privs", "audit_hook"):
        assert layer in result.layers


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123")
    result = run_python("""
import os
print(sorted(os.environ.items()))
""")
    assert result.ok, result.stderr
    assert "sk-test" not in result.stdout and "sk-ant" not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout and "ANTHROPIC_API_KEY" not in result.stdout
    assert "'PATH'" in result.stdout


def test_work_dir_is_private_writable_and_removed() -> None:
    result = run_python("""
import os
open('scratch.txt', 'w').write('data')
print(os.getcwd())
print(open('scratch.txt').read())
""")
    assert result.ok, result.stderr
    workdir, content = result.stdout.split()
    assert content == "data"
    assert not os.path.exists(workdir)


@pytest.mark.parametrize("variant", ["all", "hook_uid_rlimits_only"])
def test_the_candidate_inherits_only_its_standard_streams(variant: str) -> None:
    """Not the lifeline, the status pipe, nor the lock's descriptor of the host work dir (which would
    reach under the tmpfs)."""
    result = run(
        """
        import os
        for fd in os.listdir("/proc/self/fd"):
            try:
                print(fd, os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        """,
        variant,
    )
    assert result.ok, result.stderr
    inherited = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    extra = {fd: link for fd, link in inherited.items() if int(fd) > 2 and not link.endswith("/fd")}
    assert extra == {}
    assert {"0", "1", "2"} <= inherited.keys()


def test_misconfiguration_raises_sandbox_error() -> None:
    assert SandboxError is ErrorsSandboxError  # one class, wherever it is imported from
    with pytest.raises(SandboxError, match="setrlimit"):
        run_python("print(1)", limits=SandboxLimits(max_open_files=10**12))


def test_launcher_is_a_file_in_the_installed_package() -> None:
    assert supervisor.LAUNCHER.is_file() and supervisor.LAUNCHER.name == "launcher.py"
    assert supervisor.LAUNCHER.parent == Path(supervisor.__file__).parent


def test_a_launcher_that_cannot_start_is_a_sandbox_error_not_a_failed_candidate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(supervisor, "LAUNCHER", tmp_path / "missing" / "launcher.py")
    with pytest.raises(SandboxError, match=r"before reporting.*can't open file"):
        run_python("print(1)")


def test_a_wired_run_gets_its_pipes_as_fds_3_and_4_and_no_copy_outlives_it() -> None:
    """The harness's plumbing: pipes handed down by position, their far ends at EOF once the tree is gone."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    os.write(to_child_w, b"ping")
    os.close(to_child_w)
    source = """
        import os
        os.write(4, os.read(3, 4) + b" pong")
        listed = os.listdir("/proc/self/fd")  # (through a descriptor of its own, closed by now)
        print(sorted(int(fd) for fd in listed if os.path.exists(f"/proc/self/fd/{fd}")), os.get_inheritable(3))
    """
    wiring = supervisor.Wiring(channels=(to_child_r, from_child_w))
    result = supervisor._run(textwrap.dedent(source), limits=SandboxLimits(), wiring=wiring)
    assert result.ok, result.stderr
    assert result.stdout == "[0, 1, 2, 3, 4] False\n"
    with os.fdopen(from_child_r, "rb") as replies:
        assert replies.read() == b"ping pong"  # then EOF: the launcher and keeper closed their copies
    for fd in (to_child_r, from_child_w):  # the call owned them and closed ours
        with pytest.raises(OSError):
            os.fstat(fd)


@pytest.mark.timeout(30)
def test_a_cancelled_run_ends_at_once_and_says_so() -> None:
    cancel_r, cancel_w = os.pipe()
    try:
        os.write(cancel_w, b"x")
        wiring = supervisor.Wiring(cancel_fd=cancel_r)
        result = supervisor._run("import time\ntime.sleep(60)", limits=SandboxLimits(timeout_s=20), wiring=wiring)
    finally:
        os.close(cancel_r)
        os.close(cancel_w)
    assert result.killed_by == "cancelled" and not result.timed_out and result.returncode is None
    assert result.kill_description == "cancelled" and result.duration_s < 5


# ---------------------------------------------------------------- hostile programs


@pytest.mark.timeout(30)
def test_infinite_loop_is_killed_at_the_wall_clock_limit() -> None:
    result = run("while True: pass", timeout_s=2.0)
    assert result.timed_out and result.killed_by == "timeout"
    assert result.returncode is None and not result.ok
    assert result.duration_s < 2.0 + 3.0


@pytest.mark.timeout(30)
def test_cpu_limit_stops_a_loop_before_the_wall_clock() -> None:
    result = run("while True: pass", timeout_s=20.0, cpu_s=1)
    assert not result.timed_out
    assert result.killed_by == "cpu_limit" and result.signal_name == "SIGXCPU"
    assert result.kill_description == "SIGXCPU (cpu limit)"
    assert result.returncode == -signal.SIGXCPU
    assert result.duration_s < 5.0


@pytest.mark.parametrize("variant", ["all", "os_layers_only"])
def test_memory_hog_fails_inside_the_child(variant: str) -> None:
    result = run(
        """
        chunks = []
        for _ in range(40):  # 4 GB
            chunks.append(bytearray(100_000_000))
        print("allocated everything")
        """,
        variant,
        memory_mb=256,
    )
    assert not result.ok
    assert "allocated everything" not in result.stdout
    # RLIMIT_AS turns the allocation into a MemoryError inside the child, not a kill.
    assert result.stderr.splitlines()[-1] == "MemoryError", result.stderr
    assert result.killed_by is None and result.returncode == 1
    assert result.duration_s < 10


@pytest.mark.timeout(60)
@pytest.mark.parametrize("variant", list(LAYERS))
def test_fork_bomb_ends_within_limits_and_leaves_no_process(variant: str) -> None:
    result = run(
        """
        import os
        print(os.getcwd(), flush=True)
        while True:
            os.fork()
        """,
        variant,
        timeout_s=3.0,
    )
    assert not result.ok
    assert result.duration_s < 3.0 + 4.0
    workdir = result.stdout.split()[0]
    assert leftover_processes(workdir) == []
    if LAYERS[variant][1]:
        assert "os.fork is not allowed" in result.stderr


@root_only
@pytest.mark.timeout(60)
@pytest.mark.parametrize("variant", ["os_layers_only", "uid_rlimits_only"])
def test_nproc_limit_binds_the_unprivileged_uid(variant: str) -> None:
    """Without the audit hook, RLIMIT_NPROC (binding because of uid 65534) alone stops forking."""
    source = """
        import os, time
        print(os.getcwd(), flush=True)
        for n in range(200):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
            except OSError as exc:
                print("fork failed after", n, type(exc).__name__, flush=True)
                raise SystemExit(1)
        print("forked 200")
    """
    namespaces = variant == "os_layers_only"
    result = supervisor._run(
        textwrap.dedent(source),
        limits=SandboxLimits(max_processes=16, timeout_s=10.0),
        namespaces=namespaces,
        audit_hook=False,
    )
    assert "forked 200" not in result.stdout
    workdir, _, _, _, forks, error = result.stdout.split()
    assert int(forks) < 16 and error == "BlockingIOError"
    assert result.returncode == 1 and result.duration_s < 5
    # The sleeping children die with the keeper's namespace, or with its process group.
    assert leftover_processes(workdir) == []


@root_only
@pytest.mark.timeout(30)
def test_pid_namespace_kills_processes_that_escape_the_group() -> None:
    result = run(
        """
        import os, time
        print(os.getcwd(), flush=True)
        if os.fork() == 0:
            os.setsid()  # leaves the process group that a group kill would reach
            time.sleep(60)
            os._exit(0)
        """,
        "os_layers_only",
    )
    assert result.ok, result.stderr
    assert leftover_processes(result.stdout.split()[0]) == []


@pytest.mark.parametrize("variant", list(LAYERS))
def test_writes_outside_the_work_dir_do_not_land(variant: str) -> None:
    name = f"redraft-escape-{uuid.uuid4().hex}"
    targets = [f"/tmp/{name}", str(REPO_ROOT / name), f"/var/tmp/{name}"]
    # (Neither the mount namespace nor the hook would leave /tmp to the uid alone, which allows it:
    # that combination is not tested because it is not contained.)
    result = run(
        f"""
        for target in {targets!r}:
            try:
                with open(target, 'w') as f:
                    f.write('escaped')
                print('wrote', target)
            except OSError as exc:
                print('blocked', target, type(exc).__name__)
        """,
        variant,
    )
    assert result.returncode == 0, result.stderr
    try:
        for target in targets:
            assert not os.path.exists(target), f"{target} escaped the sandbox ({variant})"
    finally:
        for target in targets:
            if os.path.exists(target):
                os.remove(target)
    # The repository is root-owned: the unprivileged uid alone refuses it.
    assert f"blocked {REPO_ROOT / name}" in result.stdout


@pytest.mark.timeout(30)
@pytest.mark.parametrize("variant", list(LAYERS))
def test_network_is_unreachable(variant: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        result = run(
            f"""
            import socket
            for address in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
                try:
                    socket.create_connection(address, timeout=2).close()
                    print("connected", address)
                except OSError as exc:
                    print("refused", address, type(exc).__name__)
            """,
            variant,
        )
        assert result.returncode == 0, result.stderr
        assert "connected" not in result.stdout
        assert result.stdout.count("refused") == 2
        server.settimeout(0.3)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing reached the listening socket
    finally:
        server.close()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_huge_output_is_capped_and_the_call_returns(stream: str) -> None:
    result = run(
        f"""
        import sys
        chunk = "x" * 1_000_000
        for _ in range(100):  # 100 MB
            sys.{stream}.write(chunk)
        """,
        max_output_bytes=64_000,
    )
    captured = getattr(result, stream)
    assert len(captured) == 64_000
    assert result.truncated and result.killed_by == "output_limit"
    assert result.kill_description == "output limit"
    assert result.returncode is None and not result.ok
    assert result.duration_s < 5


def test_a_crash_is_reported_as_its_signal() -> None:
    result = run_python("import ctypes\nctypes.string_at(0)")
    assert result.returncode == -signal.SIGSEGV and not result.ok and not result.timed_out
    assert result.killed_by == "signal" and result.signal_name == "SIGSEGV"
    assert result.kill_description == "SIGSEGV"


@pytest.mark.parametrize("variant", ["all", "os_layers_only"])
def test_file_size_limit_stops_a_big_write(variant: str) -> None:
    result = run(
        """
        try:
            with open("big.bin", "wb") as f:
                f.write(b"x" * 2_000_000)
            print("wrote")
        except OSError as exc:
            print("refused", exc.errno)
        """,
        variant,
        max_file_bytes=1_000_000,
    )
    assert result.stdout.split() == ["refused", "27"], result.stderr  # EFBIG: SIGXFSZ is ignored by Python


# ---------------------------------------------------------------- the sandbox's own lifetime

# A caller in its own process, as a verifier actor is: it runs one check (in a worker thread when
# asked, as the verifier does) and prints the result's verdict.
CALLER = """
import json, sys, threading
from redraft.sandbox import SandboxLimits, run_python

def check():
    result = run_python(sys.argv[1], limits=SandboxLimits(timeout_s=float(sys.argv[2]), cpu_s=600))
    verdict = {"killed_by": result.killed_by, "timed_out": result.timed_out, "returncode": result.returncode}
    print(json.dumps(verdict), flush=True)

if sys.argv[3] == "thread":
    worker = threading.Thread(target=check)
    worker.start()
    worker.join()
else:
    check()
"""


def start_caller(source: str, timeout_s: float, how: str = "main") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CALLER, source, str(timeout_s), how], stdout=subprocess.PIPE, text=True
    )


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("candidate", "how"), [("sleep", "main"), ("loop", "thread")])
def test_a_killed_caller_leaves_no_process_and_a_sweep_leaves_no_work_dir(candidate: str, how: str) -> None:
    with private_tempdir():  # no other test run's verifier sweeps the work dir left here on purpose
        _killed_caller_leaves_nothing(candidate, how)


def _killed_caller_leaves_nothing(candidate: str, how: str) -> None:
    source = "import time\ntime.sleep(600)" if candidate == "sleep" else "while True: pass"
    caller = start_caller(source, timeout_s=600, how=how)
    try:
        marker = wait_for_sandbox(caller)
    finally:
        caller.kill()  # SIGKILL: no finally, no cleanup in the caller
        caller.wait()
    assert leftover_processes(marker, wait_s=10) == []
    left = workdirs_of(caller.pid)
    assert len(left) == 1, left  # nobody in the caller could remove it
    # The launcher that held the directory's lock may still be closing its files on a loaded machine.
    removed: list[str] = []
    deadline = time.monotonic() + 10
    while str(left[0]) not in removed and time.monotonic() < deadline:
        removed += sweep_stale_workdirs()
        time.sleep(0.1)
    assert str(left[0]) in removed
    assert workdirs_of(caller.pid) == []


@pytest.mark.timeout(90)
def test_a_frozen_caller_s_candidate_still_stops_at_the_sandbox_s_own_deadline() -> None:
    caller = start_caller("while True: pass", timeout_s=2.0)
    try:
        marker = wait_for_sandbox(caller)
        os.kill(caller.pid, signal.SIGSTOP)
        try:
            # The launcher's deadline is the timeout plus a second; the caller can do nothing meanwhile.
            assert leftover_processes(marker, wait_s=2.0 + 10) == []
            assert "T (stopped)" in Path(f"/proc/{caller.pid}/status").read_text()
        finally:
            os.kill(caller.pid, signal.SIGCONT)
        out, _ = caller.communicate(timeout=30)
    finally:
        caller.kill()
        caller.wait()
    assert json.loads(out) == {"killed_by": "timeout", "timed_out": True, "returncode": None}
    assert workdirs_of(caller.pid) == []  # the caller, thawed, cleaned up as usual


@pytest.mark.timeout(90)
def test_a_sweep_leaves_a_live_sandbox_s_work_dir_alone() -> None:
    stale = tempfile.mkdtemp(prefix=f"{workdirs.PREFIX}{2**22 + 1}-")  # above any pid_max: a dead owner
    Path(stale, "main.py").write_text("print(1)")
    older = tempfile.mkdtemp(prefix=workdirs.PREFIX)  # an older sandbox's name: neither ours nor locked
    caller = start_caller("import time\ntime.sleep(600)", timeout_s=600)
    try:
        wait_for_sandbox(caller)
        (live,) = workdirs_of(caller.pid)
        removed = sweep_stale_workdirs()
        assert stale in removed and not os.path.exists(stale)
        assert str(live) not in removed and live.is_dir()
        assert os.path.isdir(older) and older not in removed
    finally:
        caller.kill()
        caller.wait()
        sweep_stale_workdirs()
        os.rmdir(older)


def test_the_verifier_sweeps_once_per_process_when_it_starts() -> None:
    stale = tempfile.mkdtemp(prefix=f"{workdirs.PREFIX}{2**22 + 2}-")
    code = f"""
import os, tempfile
from redraft.engine.verifier import Verifier
Verifier("arithmetic")
print(os.path.exists({stale!r}))
later = tempfile.mkdtemp(prefix={workdirs.PREFIX!r} + "{2**22 + 3}-")
Verifier("arithmetic")
print(os.path.exists(later))
os.rmdir(later)
"""
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        assert out.stdout.split() == ["False", "True"], out.stderr
    finally:
        if os.path.isdir(stale):
            os.rmdir(stale)
