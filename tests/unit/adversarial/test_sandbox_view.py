"""The candidate's filesystem is an allow-list: what a hostile program can name, read and write.

Each attack is also run without the view (no namespaces, the weaker mode a user must name), where it
must succeed: so every assertion here can fail, and fails the day the view stops hiding what it hides.
"""

from __future__ import annotations

import functools
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import redraft
from redraft.config import RunConfig
from redraft.engine.resolution import resolve_run
from redraft.errors import SandboxError, UserError
from redraft.sandbox import SandboxLimits, SandboxResult, _isolation, view
from redraft.sandbox import _supervisor as supervisor
from redraft.scenarios.builtin.humaneval import HumanEval
from redraft.scenarios.builtin.pipeline import Pipeline
from tests.support.grade_hunters import generator_hunter, humaneval_thief, planted

ROOT = os.geteuid() == 0
LIMITS = SandboxLimits(timeout_s=30.0, cpu_s=20, max_output_bytes=1_000_000)
pytestmark = pytest.mark.skipif(not ROOT, reason="the view as the root caller builds it (CI runs as root)")


def run(source: str, *, view_on: bool = True) -> SandboxResult:
    """``source`` in the sandbox with the view, or without any namespace (the weaker mode)."""
    result = supervisor._run(textwrap.dedent(source), limits=LIMITS, namespaces=view_on)
    assert ("view" in result.layers) == view_on, result.layers
    return result


@pytest.fixture
def plants() -> Iterator[list[Path]]:
    with planted() as copies:
        yield copies


def test_every_file_the_candidate_can_name_is_the_standard_library_a_system_library_or_its_own() -> None:
    """A walk of the whole filesystem from inside: nothing outside the allow-list is there at all."""
    allowed = [*view.readonly_paths(), "/etc/passwd", "/etc/group", "/tmp", "/dev/shm"]
    source = f"""
        import os
        allowed = {allowed!r} + [os.getcwd()]
        seen = outside = 0
        for where, dirs, files in os.walk("/"):
            if where in ("/proc", "/dev"):
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(where, name)
                seen += 1
                if not any(path == a or path.startswith(a + "/") for a in allowed):
                    outside += 1
                    print("OUTSIDE", path)
        print("SEEN", seen, "OUTSIDE", outside)
        print("ROOT", sorted(os.listdir("/")))
    """
    inside = run(source)
    assert inside.ok, inside.stderr
    assert "OUTSIDE 0" in inside.stdout and "SEEN 0" not in inside.stdout, inside.stdout[-2000:]
    tops = {"dev", "etc", "proc", "tmp"} | {path.split("/")[1] for path in view.readonly_paths()}
    assert f"ROOT {sorted(tops)}" in inside.stdout
    without = run(source, view_on=False)
    assert "OUTSIDE 0" not in without.stdout  # the control: the host's own files are all there


def test_the_host_s_files_processes_and_settings_are_not_in_reach() -> None:
    """The paths of the issue: the launcher's settings in /proc/1/cmdline, /etc/passwd, /opt, /home, the
    cgroup tree, redraft's own directory and every installed package."""
    package = str(Path(redraft.__file__).resolve().parent.parent)
    names = ["/proc/1/cmdline", "/proc/1/environ", "/opt", "/home", "/sys/fs/cgroup", package, *sys.path[1:]]
    source = f"""
        import os
        for path in {names!r}:
            try:
                print(path, "LISTED" if os.path.isdir(path) and os.listdir(path) else open(path, "rb").read(64))
            except OSError as exc:
                print(path, "REFUSED", type(exc).__name__)
        print("PASSWD", open("/etc/passwd").read().count(":x:"))
        print("PIDS", sorted(p for p in os.listdir("/proc") if p.isdigit()))
        print("CMDLINE", open("/proc/self/cmdline", "rb").read().count(b"workdir"))
    """
    inside = run(source)
    assert inside.ok, inside.stderr
    lines = inside.stdout.splitlines()
    stdlib = os.path.dirname(os.__file__)
    for line, name in zip(lines, names, strict=False):
        if name.startswith(stdlib) and "site-packages" not in name:
            continue  # the standard library itself is in the view, by design
        assert "REFUSED" in line or line.endswith("b''"), line
    assert "PASSWD 2" in lines  # the view's own two lines, not the host's accounts
    assert "PIDS ['2']" in lines  # itself: not its keeper, not the launcher, nothing of the host
    assert "CMDLINE 0" in lines  # the launcher's settings come through a pipe, not its command line
    without = run(source, view_on=False)
    assert "LISTED" in without.stdout and "PASSWD 2" not in without.stdout.splitlines()


def test_copies_of_a_grade_s_data_elsewhere_on_the_machine_are_not_found(plants: list[Path]) -> None:
    """Another environment's HumanEval data set and another checkout's pipeline generator, readable by the
    sandbox's uid on the host: the hostile programs of the issue find them without the view, and not with it."""
    hunter = humaneval_thief("add") + "\nprint(add(2, 3))\n"
    assert "FOUND" in run(hunter, view_on=False).stdout.splitlines()
    assert run(hunter).stdout.splitlines() == ["NOT FOUND", "None"]
    generator = generator_hunter()
    assert str(plants[1]) in run(generator, view_on=False).stderr
    assert "FOUND []" in run(generator).stderr


def test_the_view_is_read_only_but_the_work_directory_and_scratch_space() -> None:
    source = f"""
        import os
        for path in ("/planted.py", {os.path.join(os.path.dirname(os.__file__), "planted.py")!r}, "/etc/passwd"):
            try:
                open(path, "a").close()
                print("WROTE", path)
            except OSError as exc:
                print("REFUSED", exc.errno)
        for path in ("mine.txt", "/tmp/scratch.txt"):
            open(path, "w").write("x")
            print("WROTE", path)
    """
    result = supervisor._run(textwrap.dedent(source), limits=LIMITS, audit_hook=False)  # the OS alone refuses
    assert result.ok, result.stderr
    # EROFS: the view's root and its binds are read-only; the view's passwd is root's besides (EACCES first).
    assert result.stdout.splitlines()[:3] == ["REFUSED 30", "REFUSED 30", "REFUSED 13"]
    assert result.stdout.splitlines()[3:] == ["WROTE mine.txt", "WROTE /tmp/scratch.txt"]


def test_the_launcher_refuses_to_run_a_candidate_without_the_view_unless_the_weaker_mode_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = supervisor._config

    def no_view_yet_required(*args: object, **kwargs: object) -> dict[str, object]:
        return made(*args, **kwargs) | {"require_view": True}  # type: ignore[arg-type]

    monkeypatch.setattr(supervisor, "_config", no_view_yet_required)
    with pytest.raises(SandboxError, match="no allow-list view of the filesystem"):
        supervisor._run("print('ran')", limits=LIMITS, namespaces=False)
    monkeypatch.setattr(supervisor, "_config", made)
    monkeypatch.setenv(_isolation.WEAK_ENV, "weak")
    settings = supervisor._config("/w", LIMITS, {}, namespaces=True, audit_hook=True, wiring=supervisor._NO_WIRING)
    assert settings["require_view"] is False


@pytest.mark.parametrize("scenario", ["humaneval", "pipeline"])
def test_a_run_that_executes_candidates_is_refused_in_one_line_where_the_view_cannot_be_built(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_isolation, "view_problem", lambda: "unshare: Operation not permitted")
    with pytest.raises(UserError) as refused:
        resolve_run(RunConfig.build(scenario=scenario))
    message = str(refused.value)
    assert "\n" not in message and f"{_isolation.WEAK_ENV}=weak" in message and "Operation not permitted" in message
    resolve_run(RunConfig.build(scenario="arithmetic"))  # a scenario that executes nothing is never refused
    monkeypatch.setattr(_isolation, "view_problem", lambda: None)
    resolve_run(RunConfig.build(scenario=scenario))


def test_the_view_is_there_on_this_machine() -> None:
    assert _isolation.view_problem() is None


def test_every_executing_scenario_grades_a_thief_as_a_failure(
    plants: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attacks through the scenarios' own feedback and grade: humaneval's data set and pipeline's generator.
    Without the view (the control) the thief passes the hidden tests and the hunter finds the generator."""
    humaneval = HumanEval(limits=SandboxLimits(timeout_s=30.0, cpu_s=20))
    task = next(t for t in humaneval.tasks(seed=0) if t.task_id == "HumanEval/53")
    text = f"```python\n{humaneval_thief('add')}\n```"
    pipeline = Pipeline()
    case = next(iter(pipeline.tasks(seed=0)))
    hunt = f"```python\n{generator_hunter()}\n```"
    grade = humaneval.grade(task, text)
    assert grade is not None and not grade.passed and grade.score == 0.0, grade
    assert not all(c.passed for c in humaneval.check(task, text))
    runs = pipeline.check(case, hunt)[0]
    assert not runs.passed and "FOUND []" in runs.detail, runs.detail
    monkeypatch.setattr(supervisor, "_run", functools.partial(supervisor._run, namespaces=False))
    stolen = humaneval.grade(task, text)
    assert stolen is not None and stolen.passed
    assert str(plants[1]) in pipeline.check(case, hunt)[0].detail
