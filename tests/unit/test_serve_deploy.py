"""redraft serve's deployment files are valid offline: the Serve config against Ray Serve's own schema, and
built into the application it names; the RayService against the documented ``ray.io/v1`` spec and every pod
against Kubernetes' schema (the checks of tests/unit/test_kuberay.py); both say the same application."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import msgspec
import pytest
import yaml

from redraft.errors import UserError
from redraft.serving import PROXY_CALLBACK, PROXY_CALLBACK_VARIABLE, ServeSettings, digest
from tests.support.paths import REPO_ROOT
from tests.unit.test_kuberay import CLUSTER_SPEC, KUBERNETES, SECRET, obj, pod

CONFIG = REPO_ROOT / "deploy" / "serve" / "serve-config.yaml"
SERVICE = REPO_ROOT / "deploy" / "kuberay" / "rayservice.yaml"
SERVICE_SPEC = obj(
    {"serveConfigV2": {"type": "string"}, "rayClusterConfig": CLUSTER_SPEC},
    required=("serveConfigV2", "rayClusterConfig"),
    more=(
        "deploymentUnhealthySecondThreshold",
        "excludeHeadPodFromServeSvc",
        "managedBy",
        "rayClusterDeletionDelaySeconds",
        "serveService",
        "serviceUnhealthySecondThreshold",
        "upgradeStrategy",
    ),
)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def test_the_serve_config_is_valid_for_ray_serve_and_names_redraft_s_builder() -> None:
    from ray.serve.schema import ServeDeploySchema

    config = load(CONFIG)
    ServeDeploySchema.model_validate(config)
    (application,) = config["applications"]
    assert application["import_path"] == "redraft.serving:build"
    with pytest.raises(Exception, match="applications"):
        ServeDeploySchema.model_validate(config | {"applications": "redraft"})


def test_the_config_s_args_build_settings_that_serve_with_the_keys_file_read(tmp_path: Path) -> None:
    from redraft.serving._deployment import build, proxy_timeout_s

    args = dict(load(CONFIG)["applications"][0]["args"])
    keys = tmp_path / "keys"
    keys.write_text("sk-one\n\n# a comment\nsk-two\n")
    application = build(args | {"api_keys_file": str(keys)})
    (settings,) = application._bound_deployment.init_args  # the replicas' constructor argument
    served = msgspec.convert(settings, ServeSettings)
    assert served.key_digests == [digest("sk-one"), digest("sk-two")] and served.host == "0.0.0.0"
    deployment = application._bound_deployment
    assert deployment._deployment_config.autoscaling_config.max_replicas == args["max_replicas"]
    assert deployment._deployment_config.autoscaling_config.target_ongoing_requests > 0
    assert load(CONFIG)["http_options"]["request_timeout_s"] == proxy_timeout_s(served)  # the proxy's cut
    with pytest.raises(UserError, match="reachable from other machines"):  # an open host with no keys
        build({k: v for k, v in args.items() if k != "api_keys_file"})


def test_the_rayservice_follows_the_documented_spec_and_runs_the_same_application() -> None:
    manifest = load(SERVICE)
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayService"
    jsonschema.validate(manifest["spec"], SERVICE_SPEC)
    assert yaml.safe_load(manifest["spec"]["serveConfigV2"]) == load(CONFIG)  # one application, said twice
    spec = manifest["spec"]["rayClusterConfig"]
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        kubernetes_validate.validate(pod(group["template"]), KUBERNETES, strict=True)
        (container,) = group["template"]["spec"]["containers"]
        callback = [e["value"] for e in container["env"] if e["name"] == PROXY_CALLBACK_VARIABLE]
        assert callback == [PROXY_CALLBACK]  # every node's proxy answers a lost replica with a 503
        keys = [e for e in container["env"] if e["name"].endswith("_API_KEY")]
        assert keys and all(e["valueFrom"]["secretKeyRef"]["name"] == SECRET for e in keys)
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/etc/redraft/serve-keys" in mounts and 8000 in {p["containerPort"] for p in container["ports"]}
    wrong = manifest["spec"] | {"serveConfig": manifest["spec"]["serveConfigV2"]}
    with pytest.raises(jsonschema.ValidationError, match="serveConfig"):
        jsonschema.validate(wrong, SERVICE_SPEC)


def test_the_deployment_s_autoscaling_is_valid_for_ray_serve_s_schema_in_the_config() -> None:
    from ray.serve.config import AutoscalingConfig
    from ray.serve.deployment import deployment_to_schema
    from ray.serve.schema import ServeDeploySchema

    from redraft.serving._deployment import build

    config = load(CONFIG)
    (app,) = config["applications"]
    built = build(app["args"] | {"key_digests": [digest("sk-one")], "api_keys_file": None})
    deployment = deployment_to_schema(built._bound_deployment).model_dump(exclude_unset=True)
    as_deployed = ServeDeploySchema.model_validate(config | {"applications": [app | {"deployments": [deployment]}]})
    (validated,) = as_deployed.applications[0].deployments
    scaling = AutoscalingConfig.model_validate(validated.autoscaling_config)  # Serve's own model, strictly
    assert validated.name == "RedraftServer" and scaling.upscale_delay_s < scaling.downscale_delay_s
    assert (scaling.min_replicas, scaling.max_replicas) == (1, app["args"]["max_replicas"])
    assert scaling.target_ongoing_requests < deployment["max_ongoing_requests"]  # a queue forms before it scales
    with pytest.raises(Exception, match="min_replicas"):
        AutoscalingConfig.model_validate(scaling.model_dump() | {"min_replicas": 5, "max_replicas": 4})
    with pytest.raises(UserError, match=r"min_replicas <= max_replicas.*got 5 and 4"):  # one line, before Ray Serve
        build(app["args"] | {"key_digests": [digest("sk-one")], "api_keys_file": None, "min_replicas": 5})
