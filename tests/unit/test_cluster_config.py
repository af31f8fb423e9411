"""cluster.yaml is a valid Ray cluster-launcher config (checked offline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO_ROOT

CLUSTER_YAML = REPO_ROOT / "cluster.yaml"


def test_cluster_yaml_validates() -> None:
    # Private API of the pinned Ray version: the same checks `ray up` runs, without a network.
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(yaml.safe_load(CLUSTER_YAML.read_text()))
    validate_config(config)
    assert config["provider"]["type"] == "local"
    assert any("scripts/setup.sh" in c for c in config["setup_commands"])


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda c: c.update(bogus_key=1), "'bogus_key' was unexpected"),
        (lambda c: c["provider"].pop("worker_ips"), "head_ip"),
    ],
)
def test_a_broken_config_is_rejected(break_it: Callable[[dict[str, Any]], object], message: str) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load(CLUSTER_YAML.read_text())
    break_it(config)
    with pytest.raises(Exception, match=message):
        validate_config(prepare_config(config))
