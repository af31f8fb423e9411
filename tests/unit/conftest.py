"""Unit tests refuse Ray: ``ray.init`` and ``ray.cluster_utils.Cluster`` fail the test that reaches them.

A test that needs Ray (the session's cluster, a run on actors), the real model or a browser
belongs in tests/integration. The refusal is `pytest.fail`, not an exception the code under
test could catch and turn into a message of its own.
"""

from __future__ import annotations

from typing import Any

import pytest

REFUSAL = "a unit test must not start Ray; move it to tests/integration"
INTEGRATION_FIXTURES = {"ray_cluster", "node_ids"}
INTEGRATION_MARKS = {"ray", "cluster", "model"}


def refuse_ray(*args: Any, **kwargs: Any) -> None:
    pytest.fail(REFUSAL, pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse before the session's cluster would start for it: fixtures are set up after this hook."""
    asks = sorted(INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())))
    asks += sorted(INTEGRATION_MARKS & {mark.name for mark in item.iter_markers()})
    if asks:
        pytest.fail(f"{item.nodeid} asks for {', '.join(asks)}: {REFUSAL}", pytrace=False)


@pytest.fixture(autouse=True)
def ray_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray
    import ray.cluster_utils

    monkeypatch.setattr(ray, "init", refuse_ray)
    monkeypatch.setattr(ray.cluster_utils, "Cluster", refuse_ray)
