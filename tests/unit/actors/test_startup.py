"""A local Ray that fails to start is started once more with longer waits, then the command stops in one line
(exit 1, no traceback), whichever command started it. ``ray.init`` is replaced: no Ray starts here."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from redraft.actors import _startup
from redraft.errors import ClusterError, UserError
from tests.unit.test_cli import in_process

TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of the raylet failed to startup "
    "or the GCS has become overloaded."
)
WAITS = ("RAY_gcs_server_port_wait_time_s", "RAY_raylet_start_wait_time_s")
NICENESS = "RAY_worker_niceness"


class FakeInit:
    """``ray.init``: raises ``failures`` in turn, then returns; records what each call saw of Ray's waits."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> None:
        import ray._private.services as services

        waits = {name: os.environ.get(name) for name in WAITS}
        niceness = os.environ.get(NICENESS)
        self.calls.append({"kwargs": kwargs, "waits": waits, "get_node": services.get_node, "niceness": niceness})
        if self.failures:
            raise self.failures.pop(0)


@pytest.fixture
def init(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeInit]:
    """Install a `FakeInit` as ``ray.init`` (Ray never initialized, its shutdown a no-op)."""
    import ray

    for name in (*WAITS, NICENESS, _startup.NICENESS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "shutdown", lambda: None)

    def install(*failures: BaseException) -> FakeInit:
        fake = FakeInit(*failures)
        monkeypatch.setattr(ray, "init", fake)
        return fake

    return install


def test_a_local_ray_that_timed_out_starting_is_started_once_more_with_longer_waits(
    init: Callable[..., FakeInit],
) -> None:
    import ray._private.services as services

    lookup = services.get_node
    fake = init(Exception(TIMED_OUT))
    _startup.ensure_ray(None)
    first, second = fake.calls
    assert first["kwargs"]["address"] == second["kwargs"]["address"] == "local"
    assert first["waits"] == dict.fromkeys(WAITS) and first["get_node"] is lookup  # Ray's own waits, first
    assert second["waits"] == dict.fromkeys(WAITS, str(int(_startup.RETRY_WAIT_S)))
    assert second["get_node"] is not lookup  # the node's lookup keeps asking for the longer wait
    assert services.get_node is lookup and all(name not in os.environ for name in WAITS)  # all put back


@pytest.mark.parametrize("failure", [Exception(TIMED_OUT), RuntimeError("Timed out waiting for file gcs_server_port")])
def test_a_local_ray_that_fails_to_start_twice_stops_in_one_line_saying_what_to_do(
    init: Callable[..., FakeInit], failure: Exception
) -> None:
    fake = init(failure, failure)
    with pytest.raises(ClusterError) as raised:
        _startup.ensure_ray(None)
    assert len(fake.calls) == 2
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"Ray did not start within {_startup.RETRY_WAIT_S:g} s, on the second try")
    assert "the machine may be busy" in message and "`ray start --head`" in message and "--address" in message


def test_a_wrong_call_to_ray_init_is_not_taken_for_a_slow_start(init: Callable[..., FakeInit]) -> None:
    fake = init(TypeError("init() got an unexpected keyword argument"))
    with pytest.raises(TypeError):
        _startup.ensure_ray(None)
    assert len(fake.calls) == 1


def test_joining_a_cluster_is_not_retried(init: Callable[..., FakeInit]) -> None:
    fake = init(Exception(TIMED_OUT))
    with pytest.raises(Exception, match="timed out during startup"):
        _startup.ensure_ray("auto")
    assert len(fake.calls) == 1


def test_a_local_ray_runs_its_workers_at_this_process_s_priority_and_a_joined_cluster_is_left_alone(
    init: Callable[..., FakeInit],
) -> None:
    """Before, Ray's default made every worker 15 steps nicer than the driver: the model host starved beside any
    busy process. Ray applies the setting as each worker's step up from its raylet, which inherits ours."""
    fake = init(Exception(TIMED_OUT))
    _startup.ensure_ray(None)
    assert [call["niceness"] for call in fake.calls] == ["0", "0"]  # the second start too
    assert NICENESS not in os.environ  # put back
    joined = init()
    _startup.ensure_ray("auto")
    assert joined.calls[0]["niceness"] is None  # its raylets' own setting stands


def test_the_user_sets_the_workers_niceness_at_or_below_this_process_s_priority(
    init: Callable[..., FakeInit], monkeypatch: pytest.MonkeyPatch
) -> None:
    own = os.nice(0)
    fake = init()
    monkeypatch.setenv(_startup.NICENESS_ENV, str(min(own + 10, 19)))
    _startup.ensure_ray(None)
    assert fake.calls[0]["niceness"] == str(min(own + 10, 19) - own)
    for wrong in ("high", str(own - 1), "20"):
        monkeypatch.setenv(_startup.NICENESS_ENV, wrong)
        with pytest.raises(UserError, match=_startup.NICENESS_ENV):
            _startup.ensure_ray(None)
    assert len(fake.calls) == 1  # refused before Ray was started


def test_the_lengthened_node_lookup_asks_until_the_node_is_there_then_gives_up() -> None:
    answers: list[Any] = [RuntimeError("not found"), RuntimeError("not found"), {"node_id": "n"}]

    def lookup(gcs_address: str, node_id: str) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert _startup._asking_until(lookup, wait_s=60, pause_s=0)("gcs", "n") == {"node_id": "n"}
    answers[:] = [RuntimeError("never")] * 3
    with pytest.raises(RuntimeError, match="never"):
        _startup._asking_until(lookup, wait_s=0, pause_s=0)("gcs", "n")


MODEL = ["--model", "scripted:tests.support.replies:always_seven"]
COMMANDS = {
    "run": ["run", "arithmetic", "--limit", "2", *MODEL],
    "compare": ["compare", "arithmetic", "--arms", "adversarial,none", "--limit", "2", *MODEL],
    "tune": ["tune", "arithmetic", "--limit", "20", "--minibatch", "2", "--max-proposals", "1", *MODEL],
}


@pytest.mark.parametrize("command", [*sorted(COMMANDS), "resume"])
def test_every_command_says_a_ray_that_did_not_start_in_one_line_and_exits_1(
    command: str,
    init: Callable[..., FakeInit],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warned: list[str] = []
    monkeypatch.setattr(_startup.log, "warning", lambda message, *args: warned.append(message % args))
    args = [*COMMANDS["run" if command == "resume" else command], "--out", str(tmp_path / command)]
    if command == "resume":  # the run directory is made before Ray starts: the second invocation resumes it
        init(*[Exception(TIMED_OUT)] * 2)
        assert in_process(*args) == 1
        capsys.readouterr()
    fake = init(*[Exception(TIMED_OUT)] * 2)
    code = in_process(*args)
    err = capsys.readouterr().err
    assert code == 1, err
    assert len(fake.calls) == 2
    said = [line for line in err.splitlines() if line.startswith(("redraft: failed", "redraft: error"))]
    assert len(said) == 1 and said[0].startswith(f"redraft: failed: Ray did not start within {_startup.RETRY_WAIT_S:g}")
    assert "Traceback" not in err
    retried = "redraft: Ray did not start (Exception: The current node timed out during startup"
    assert warned[-1].startswith(retried)  # the second start, said before it begins
    assert "Traceback" not in err


def test_routing_ray_s_messages_leaves_the_host_s_own_handlers_alone(tmp_path: Path) -> None:
    """A test runner's capture handlers serve the ray logger too: silenced with Ray's, no later test captured a
    log line (one ordering of the suite failed so)."""
    import logging

    import ray  # noqa: F401 - Ray's logger, with its own handler, as a run has it

    from redraft.actors._ray import RAY_OUTPUT

    shared = logging.StreamHandler()
    logging.getLogger().addHandler(shared)
    logging.getLogger("ray").addHandler(shared)
    try:
        RAY_OUTPUT.route(tmp_path / "ray.log", verbose=False)
        assert shared.level == logging.NOTSET
        ours = [
            h for h in logging.getLogger("ray").handlers if h is not shared and type(h).__name__ == "PlainRayHandler"
        ]
        assert ours and all(h.level > logging.CRITICAL for h in ours)  # Ray's own, silenced
    finally:
        logging.getLogger().removeHandler(shared)
        logging.getLogger("ray").removeHandler(shared)
