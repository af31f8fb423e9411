"""Shared fixtures. One simulated two-node Ray cluster serves every Ray test of the session.

The session stops with its summary on Ctrl-C and on SIGTERM alike, and when the process that started it
(`make test`) is gone: Ray's own SIGTERM handler raises `SystemExit` inside whichever test runs, which
pytest records as that test's failure and goes on. No test writes into the checkout: one that leaves a
``runs/`` directory there fails, and the session fails if it left any other untracked file.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_enable_worker_prestart", "0")
# Ray Serve's proxies read it from their node's environment as `redraft serve` sets it for a local Ray: a replica
# lost mid-request is answered 503 with Retry-After (redraft.serving.PROXY_CALLBACK, checked by test_serve_faults).
os.environ.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", "redraft.serving:proxy_middlewares")
# Every process of the session (Ray workers too) caches model calls here, never in the user's cache.
os.environ["REDRAFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="redraft-test-cache-")
# Ray workers inherit the driver's environment when the session cluster starts: the
# key the HTTP backends read in their actors must be set before that. A fake value.
# (Idempotent: a test importing this module must not mint a second key.) A real key
# is kept aside for the live tests, which are skipped without one.
if not os.environ.get("OPENAI_API_KEY", "").startswith("sk-redraft-session-key-"):
    os.environ["REDRAFT_LIVE_OPENAI_API_KEY"] = os.environ.get("OPENAI_API_KEY", "")
    os.environ["OPENAI_API_KEY"] = "sk-redraft-session-key-" + os.urandom(6).hex()
SESSION_API_KEY = os.environ["OPENAI_API_KEY"]


PR_SET_PDEATHSIG = 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def stop_on_sigterm() -> None:
    """SIGTERM ends the session as Ctrl-C does: the tests that ran are summed up, the rest are not run."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _untracked() -> set[str]:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    return {line[3:] for line in done.stdout.splitlines() if line.startswith("??")} if done.returncode == 0 else set()


_UNTRACKED_BEFORE: set[str] = set()


def pytest_configure(config: pytest.Config) -> None:
    stop_on_sigterm()
    # `make test` killed (SIGTERM to make alone) leaves this process running unless it hears of it.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    _UNTRACKED_BEFORE.update(_untracked())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    written = sorted(_untracked() - _UNTRACKED_BEFORE)
    if written:
        print(f"\nthe tests wrote into the checkout: {', '.join(written[:10])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def nothing_written_to_the_checkout() -> Iterator[None]:
    runs = REPO_ROOT / "runs"
    there = runs.exists()
    yield
    assert there or not runs.exists(), f"this test wrote {runs} into the checkout: give it a temporary --out"


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A two-node cluster on this machine (one CPU per node); Ray joined to it."""
    import ray
    from ray.cluster_utils import Cluster

    from tests.support import replies

    # Test-only reply policies travel to the actors by value: a worker need not import the tests package.
    ray.cloudpickle.register_pickle_by_value(replies)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    stop_on_sigterm()  # the cluster and ray.init each installed a handler of their own
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture
def node_ids(ray_cluster: Any) -> list[str]:
    import ray

    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
