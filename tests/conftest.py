"""Shared fixtures. One simulated two-node Ray cluster serves every Ray test of the session."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_enable_worker_prestart", "0")
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
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture
def node_ids(ray_cluster: Any) -> list[str]:
    import ray

    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
