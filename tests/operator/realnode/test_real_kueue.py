"""Kueue v0.17.0 acting on what ``roofline export --target kueue`` writes, on a real node.

The node is the H100 class of a RooflineProfile status (``harness/node_export.py``) and carries
the labels the operator writes; the L40S class has no node here. Kueue's own manager runs with its
webhooks and certificate management (``harness/kueue.py``); the exported objects are applied with
kubectl as a platform team would. Serving Deployments, their pods asking for cpu, memory and the
GPU as a vLLM pod does, join the exported LocalQueue by its label. In order:

* a Deployment queued for the node's class is admitted by Kueue, its pod released and run on the
  node, with the flavor's node labels in its selector;
* a second one beyond the class's GPU quota waits, with Kueue's own reason in its Workload;
* one queued for the other class is sent to that class (its pod gets that class's node selector,
  and, with no such node here, the scheduler keeps it pending);
* the old queue, which covered only the GPU, fails the first check: Kueue refuses the pod with
  ``resource cpu unavailable in ClusterQueue`` (or ``memory``: it names the first uncovered
  resource it meets, in no fixed order).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.operator.harness import node_export
from tests.operator.harness.consumers import apply_documents, namespace_object
from tests.operator.harness.kueue import QUEUE_LABEL, KueueManager
from tests.operator.harness.nodeconfig import GPU_RESOURCE, GPU_TAINT, NODE_NAME, SANDBOX_IMAGE
from tests.operator.harness.processes import Kubectl
from tests.operator.harness.realnode import RealNode
from tests.operator.harness.waiting import wait_for

from .conftest import node_kubectl, running_node

pytestmark = pytest.mark.timeout(900)

NAMESPACE = "serving"
#: Decode tokens/s the exported queues must sustain: one replica of one GPU on either class.
TOKENS_PER_SECOND = "1"
#: What each serving pod asks for besides the GPU (a vLLM pod asks for both).
POD_REQUESTS = {"cpu": "100m", "memory": "32Mi"}
ADMISSION_SECONDS = 60
KUEUE_GROUP = "kueue.x-k8s.io"


@pytest.fixture(scope="module")
def real_node(
    node_binaries: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNode]:
    """The node without the project's images: the serving pods run the sandbox's pause image."""
    with running_node(node_binaries, tmp_path_factory.mktemp("real-node")) as node:
        yield node


@pytest.fixture(scope="module")
def kubectl(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return node_kubectl(real_node, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture(scope="module")
def kueue(
    real_node: RealNode,
    kubectl: Kubectl,
    consumer_binaries: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KueueManager]:
    manager = KueueManager(
        consumer_binaries,
        real_node.address,
        real_node.kubeconfig,
        kubectl,
        tmp_path_factory.mktemp("kueue"),
    )
    try:
        manager.start()
        print(f"Kueue started: {manager.timings}")
        yield manager
    finally:
        manager.stop()


@pytest.fixture(scope="module")
def node_labels(real_node: RealNode) -> dict[str, str]:
    """The node labelled as the operator labels a profiled node."""
    labels = node_export.operator_labels()
    real_node.api.patch("nodes", NODE_NAME, {"metadata": {"labels": labels}})
    return labels


@pytest.fixture(scope="module")
def exported(
    kueue: KueueManager,
    kubectl: Kubectl,
    node_labels: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> list[dict[str, Any]]:
    """``roofline export --target kueue`` of the node's profile, applied with kubectl."""
    folder = tmp_path_factory.mktemp("export")
    documents = node_export.export(
        "--target", "kueue", "--from", str(node_export.write_status(folder)),
        "--namespace", NAMESPACE, "--tokens-per-second", TOKENS_PER_SECOND,
    )  # fmt: skip
    apply_documents(kubectl, [namespace_object(NAMESPACE), *documents], folder / "kueue.yaml")
    return documents


# ---------------------------------------------------------------- reading the export
def of_kind(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in documents if d["kind"] == kind]


def flavor_labels(documents: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {
        f["metadata"]["name"]: dict(f["spec"].get("nodeLabels") or {})
        for f in of_kind(documents, "ResourceFlavor")
    }


def queue_flavors(documents: list[dict[str, Any]], local_queue: dict[str, Any]) -> list[str]:
    """The flavors of a LocalQueue's ClusterQueue, in Kueue's order of trying them."""
    name = local_queue["spec"]["clusterQueue"]
    queue = next(q for q in of_kind(documents, "ClusterQueue") if q["metadata"]["name"] == name)
    return [f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]]


def selects(labels: dict[str, str], node: dict[str, str]) -> bool:
    return all(node.get(k) == v for k, v in labels.items())


def queue_for(documents: list[dict[str, Any]], node: dict[str, str], *, ours: bool) -> str:
    """The LocalQueue whose first flavor selects the node (``ours``), or one whose flavors
    select other nodes only."""
    flavors = flavor_labels(documents)
    for local_queue in of_kind(documents, "LocalQueue"):
        chosen = [flavors[f] for f in queue_flavors(documents, local_queue)]
        if ours and chosen and selects(chosen[0], node):
            return str(local_queue["metadata"]["name"])
        if not ours and chosen and not any(selects(c, node) for c in chosen):
            return str(local_queue["metadata"]["name"])
    raise AssertionError(
        f"no exported LocalQueue for {'the node' if ours else 'another class'}'s flavors "
        f"(node labels {node}; flavors {flavors})"
    )


# ---------------------------------------------------------------- serving workloads
def serving_deployment(name: str, queue: str) -> dict[str, Any]:
    """A serving Deployment as a vLLM one asks: cpu, memory and the GPU. It does not tolerate the
    GPU taint itself: the flavor Kueue admits it to must add the toleration. Its container is the
    sandbox's pause image (no registry here)."""
    labels = {"app": name}
    resources = {
        "requests": {**POD_REQUESTS, GPU_RESOURCE: "1"},
        "limits": {GPU_RESOURCE: "1"},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "engine",
                            "image": SANDBOX_IMAGE,
                            "imagePullPolicy": "Never",
                            "resources": resources,
                        }
                    ],
                    "terminationGracePeriodSeconds": 1,
                },
            },
        },
    }


def deploy(kubectl: Kubectl, workdir: Path, name: str, queue: str) -> None:
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(serving_deployment(name, queue)))
    kubectl("apply", "-f", str(path))


def pod_of(kubectl: Kubectl, app: str) -> dict[str, Any] | None:
    pods = kubectl.json("get", "pods", "-n", NAMESPACE, "-l", f"app={app}")["items"]
    return pods[0] if pods else None


def workload_of(kubectl: Kubectl, pod: dict[str, Any]) -> dict[str, Any] | None:
    workloads = kubectl.json("get", f"workloads.{KUEUE_GROUP}", "-n", NAMESPACE)["items"]
    for workload in workloads:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Pod" and o["name"] == pod["metadata"]["name"] for o in owners):
            found: dict[str, Any] = workload
            return found
    return None


def conditions(document: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    found = (document or {}).get("status", {}).get("conditions") or []
    return {c["type"]: c for c in found}


def kueue_says(kubectl: Kubectl, app: str) -> str:
    """What Kueue wrote about the app's pod: its Workload's conditions, and the pod's gates."""
    pod = pod_of(kubectl, app)
    if pod is None:
        return "no pod"
    workload = workload_of(kubectl, pod)
    said = [
        f"{t}={c['status']} ({c.get('reason')}: {c.get('message')})"
        for t, c in conditions(workload).items()
    ]
    gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
    return f"workload: {'; '.join(said) or 'none'}; pod {pod['status'].get('phase')}, gates {gates}"


def wait_admitted_and_running(
    kubectl: Kubectl, app: str, timeout: float = ADMISSION_SECONDS
) -> dict[str, Any]:
    """Until Kueue has admitted the app's pod and it runs on the node; the pod."""

    def running() -> dict[str, Any] | None:
        pod = pod_of(kubectl, app)
        if pod is None or pod["status"].get("phase") != "Running":
            return None
        admitted = conditions(workload_of(kubectl, pod)).get("Admitted", {})
        return pod if admitted.get("status") == "True" else None

    try:
        return wait_for(running, timeout, f"{app} admitted by Kueue and running", interval=1)
    except AssertionError as error:
        raise AssertionError(f"{error}\nKueue: {kueue_says(kubectl, app)}") from None


def wait_pending_reason(kubectl: Kubectl, app: str) -> dict[str, Any]:
    """Until Kueue has decided not to admit the app's pod yet; its QuotaReserved condition."""

    def pending() -> dict[str, Any] | None:
        pod = pod_of(kubectl, app)
        reserved = conditions(workload_of(kubectl, pod) if pod else None).get("QuotaReserved")
        return (
            reserved
            if reserved and reserved["status"] == "False" and reserved.get("message")
            else None
        )

    return wait_for(
        pending, ADMISSION_SECONDS, f"Kueue's reason for not admitting {app}", interval=1
    )


# ---------------------------------------------------------------- the story
def test_a_deployment_queued_for_the_nodes_class_is_admitted_and_its_pod_runs_there(
    kubectl: Kubectl, exported: list[dict[str, Any]], node_labels: dict[str, str], tmp_path: Path
) -> None:
    queue = queue_for(exported, node_labels, ours=True)
    deploy(kubectl, tmp_path, "served", queue)
    pod = wait_admitted_and_running(kubectl, "served")
    assert pod["spec"]["nodeName"] == NODE_NAME
    first = queue_flavors(
        exported, next(q for q in of_kind(exported, "LocalQueue") if q["metadata"]["name"] == queue)
    )[0]
    selector = pod["spec"].get("nodeSelector") or {}
    assert selects(flavor_labels(exported)[first], selector), (selector, first)
    assert not pod["spec"].get("schedulingGates")
    tolerated = {(t.get("key"), t.get("effect")) for t in pod["spec"].get("tolerations") or []}
    assert (GPU_TAINT["key"], GPU_TAINT["effect"]) in tolerated, pod["spec"].get("tolerations")


def test_a_second_deployment_beyond_the_quota_waits_with_kueues_reason(
    kubectl: Kubectl, exported: list[dict[str, Any]], node_labels: dict[str, str], tmp_path: Path
) -> None:
    queue = queue_for(exported, node_labels, ours=True)
    deploy(kubectl, tmp_path, "beyond-quota", queue)
    reserved = wait_pending_reason(kubectl, "beyond-quota")
    assert "insufficient unused quota for nvidia.com/gpu" in reserved["message"], reserved
    pod = pod_of(kubectl, "beyond-quota")
    assert pod is not None
    gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
    assert "kueue.x-k8s.io/admission" in gates, pod["spec"]
    # The admitted one keeps running.
    assert wait_admitted_and_running(kubectl, "served")["spec"]["nodeName"] == NODE_NAME


def test_a_deployment_queued_for_the_other_class_is_sent_to_that_class(
    kubectl: Kubectl, exported: list[dict[str, Any]], node_labels: dict[str, str], tmp_path: Path
) -> None:
    queue = queue_for(exported, node_labels, ours=False)
    deploy(kubectl, tmp_path, "other-class", queue)
    flavors = flavor_labels(exported)
    local = next(q for q in of_kind(exported, "LocalQueue") if q["metadata"]["name"] == queue)
    wanted = flavors[queue_flavors(exported, local)[0]]

    def sent() -> dict[str, Any] | None:
        pod = pod_of(kubectl, "other-class")
        if pod is None or pod["spec"].get("schedulingGates"):
            return None
        scheduled = conditions(pod).get("PodScheduled", {})
        return pod if scheduled.get("reason") == "Unschedulable" else None

    try:
        pod = wait_for(
            sent, ADMISSION_SECONDS, "the other class's pod released and unschedulable", interval=1
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\nKueue: {kueue_says(kubectl, 'other-class')}") from None
    assert selects(wanted, pod["spec"].get("nodeSelector") or {}), (pod["spec"], wanted)
    message = conditions(pod)["PodScheduled"]["message"]
    assert "didn't match Pod's node affinity/selector" in message, message


def test_the_old_queue_covering_only_the_gpu_fails_the_admission_check(
    kubectl: Kubectl, exported: list[dict[str, Any]], node_labels: dict[str, str], tmp_path: Path
) -> None:
    kubectl("delete", "deployments", "--all", "-n", NAMESPACE, "--wait=true", timeout=120)
    queue_name = queue_for(exported, node_labels, ours=True)
    local = next(q for q in of_kind(exported, "LocalQueue") if q["metadata"]["name"] == queue_name)
    cluster_queue = next(
        q
        for q in of_kind(exported, "ClusterQueue")
        if q["metadata"]["name"] == local["spec"]["clusterQueue"]
    )
    old = gpu_only(cluster_queue)
    old_local = copy.deepcopy(local)
    old_local["metadata"] = {"name": old["metadata"]["name"], "namespace": NAMESPACE}
    old_local["spec"]["clusterQueue"] = old["metadata"]["name"]
    apply_documents(kubectl, [old, old_local], tmp_path / "old-queue.yaml")
    deploy(kubectl, tmp_path, "old-queue", old["metadata"]["name"])
    with pytest.raises(AssertionError, match=r"resource (cpu|memory) unavailable in ClusterQueue"):
        wait_admitted_and_running(kubectl, "old-queue", timeout=10)


def gpu_only(cluster_queue: dict[str, Any]) -> dict[str, Any]:
    """The ClusterQueue as the export wrote it before it covered cpu and memory: the GPU alone,
    under a name of its own."""
    old = copy.deepcopy(cluster_queue)
    old["metadata"] = {"name": f"{cluster_queue['metadata']['name']}-gpu-only"}
    old["spec"].pop("cohortName", None)
    old["spec"].pop("cohort", None)
    for group in old["spec"]["resourceGroups"]:
        group["coveredResources"] = [r for r in group["coveredResources"] if r == GPU_RESOURCE]
        for flavor in group["flavors"]:
            flavor["resources"] = [r for r in flavor["resources"] if r["name"] == GPU_RESOURCE]
    old["spec"]["resourceGroups"] = [
        g for g in old["spec"]["resourceGroups"] if g["coveredResources"]
    ]
    return old
