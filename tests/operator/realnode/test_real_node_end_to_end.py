"""A platform engineer's day on a real node: the chart installed, the shipped example applied
with kubectl, and the faults a real node brings.

One node for the module, and the tests are its story in order (each starts from where the one
before left the cluster): the chart's operator pod runs from the operator image; the real
kubelet publishes termination messages as the emulated one does; the default example fails as it
must where the GPU is a number in the node's status (its container sees no GPU), and the same
example as a CPU profile is profiled by a pod the real scheduler places on the node and the real
kubelet runs from the profiler image; a profile with a served model mounts its models ConfigMap
while the operator pod is deleted mid-round; then the kubelet stops, the GPU is taken and taken
away, the profile is deleted with no operator to clean up, a chart without ``pods create`` fails
the check the CPU profile passed, and stopping the node puts the host back as it was.
"""

from __future__ import annotations

import copy
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.deploy import images as img
from tests.model_configs import TINY_LLAMA
from tests.operator.harness import hoststate, hostundo
from tests.operator.harness.kubelet import termination_message
from tests.operator.harness.nodechecks import container_process, sample, scrape
from tests.operator.harness.nodeconfig import BRIDGE, GPU_RESOURCE, GPU_TAINT, NODE_NAME
from tests.operator.harness.noderelease import (
    NodeRelease,
    install,
    node_values,
    operator_pod,
    uninstall,
    wait_operator_ready,
)
from tests.operator.harness.podwatch import PodHistory, terminated
from tests.operator.harness.processes import Kubectl
from tests.operator.harness.profiles import EXAMPLE_PATH
from tests.operator.harness.realnode import RealNode
from tests.operator.harness.scheduler import insufficient, unschedulable_message
from tests.operator.harness.waiting import wait_for

from roofline_operator.core.names import ANNOTATION_SPEC_HASH, LABEL_MANAGED_BY, MANAGED_BY
from roofline_profiler.wire.compact_decode import decode_compact

from .conftest import node_kubectl

pytestmark = pytest.mark.timeout(1800)

RELEASE, NAMESPACE, PROFILE = "roofline-operator", "roofline-system", "gpu-nodes"
LABEL_PREFIX = "roofline.dev/"
PROFILE_SECONDS = 600
#: The operator image's user (the Dockerfile's USER) and the chart's metrics port.
OPERATOR_UID, METRICS_PORT = 65532, 9090


@pytest.fixture(scope="module")
def kubectl(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return node_kubectl(real_node, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("release")


@pytest.fixture(scope="module")
def release(kubectl: Kubectl, built_images: img.Images, workdir: Path) -> NodeRelease:
    values = node_values(built_images.operator, built_images.profiler)
    return install(kubectl, workdir, values, RELEASE, NAMESPACE)


@pytest.fixture(scope="module")
def history(real_node: RealNode, release: NodeRelease) -> Iterator[PodHistory]:
    """Every state of the profiler namespace's pods, kept after the operator deletes them."""
    watch = PodHistory(real_node.control_plane.admin, NAMESPACE).start()
    yield watch
    watch.stop()


# ---------------------------------------------------------------- reading the cluster
def profile(kubectl: Kubectl) -> dict[str, Any]:
    found: dict[str, Any] = kubectl.json("get", "rooflineprofile", PROFILE)
    return found


def node_entry(kubectl: Kubectl) -> dict[str, Any]:
    entries = profile(kubectl).get("status", {}).get("nodes", [])
    return next((e for e in entries if e["name"] == NODE_NAME), {})


def wait_state(kubectl: Kubectl, *states: str, timeout: float = PROFILE_SECONDS) -> dict[str, Any]:
    return wait_for(
        lambda: (lambda e: e if e.get("state") in states else None)(node_entry(kubectl)),
        timeout,
        f"{NODE_NAME} to be {' or '.join(states)} in profile {PROFILE}",
        interval=1,
    )


def node_metadata(real_node: RealNode) -> dict[str, Any]:
    found: dict[str, Any] = (real_node.node() or {})["metadata"]
    return found


def our_labels(real_node: RealNode) -> dict[str, str]:
    labels = node_metadata(real_node).get("labels") or {}
    return {k: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)}


def profiler_pods(history: PodHistory, spec_hash: str | None = None) -> list[dict[str, Any]]:
    def ours(pod: dict[str, Any]) -> bool:
        labels = pod["metadata"].get("labels") or {}
        annotations = pod["metadata"].get("annotations") or {}
        if labels.get(LABEL_MANAGED_BY) != MANAGED_BY:
            return False  # the operator's own pod shares the namespace
        return spec_hash is None or annotations.get(ANNOTATION_SPEC_HASH) == spec_hash

    return history.find(ours)


def phase(pod: dict[str, Any]) -> str:
    return str(pod.get("status", {}).get("phase", ""))


def cpu_example(workdir: Path, **spec: Any) -> Path:
    """The default example as a CPU profile (``device: cpu``, the documented way to profile a
    node's CPU), with ``spec`` added, written as a manifest to apply: the node's fake GPU is a
    number in its status, so what its pods can measure is the CPU."""
    example = yaml.safe_load(EXAMPLE_PATH.read_text())
    example["spec"].update(device="cpu", **spec)
    manifest = workdir / f"rooflineprofile-cpu-{len(list(workdir.glob('rooflineprofile-*')))}.json"
    manifest.write_text(json.dumps(example))
    return manifest


def command_of(pod: dict[str, Any]) -> list[str]:
    return list(pod["spec"]["containers"][0].get("command", []))


def operator_metrics(kubectl: Kubectl, release: NodeRelease) -> dict[str, Any]:
    pod = wait_operator_ready(kubectl, release)
    return scrape(f"http://{pod['status']['podIP']}:{METRICS_PORT}/metrics")


def profile_the_node(
    kubectl: Kubectl,
    manifest: Path,
    history: PodHistory,
    timeout: float = PROFILE_SECONDS,
    meanwhile: Callable[[], object] = lambda: None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kubectl apply`` a profile and wait for its profiler pod to finish and the node to be
    published: the check every working install passes (and a broken chart fails).
    ``meanwhile`` is called at every poll while the pod runs."""
    kubectl("apply", "-f", str(manifest))
    started = time.time()
    known = {p["metadata"]["uid"] for p in profiler_pods(history)}

    def finished_pod() -> dict[str, Any] | None:
        meanwhile()
        entry = node_entry(kubectl)
        if entry.get("state") == "Failed" or entry.get("reason") == "PodRejected":
            raise AssertionError(f"the node failed: {entry.get('reason')}: {entry.get('message')}")
        pods = [
            p
            for p in profiler_pods(history)
            if p["metadata"]["uid"] not in known and terminated(p) and phase(p) == "Succeeded"
        ]
        return pods[-1] if pods else None

    try:
        pod = wait_for(finished_pod, timeout, "a profiler pod to succeed", interval=1)
        entry = wait_state(kubectl, "Profiled", timeout=max(timeout - (time.time() - started), 30))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{what_happened(kubectl, history)}") from None
    return pod, entry


def what_happened(kubectl: Kubectl, history: PodHistory) -> str:
    """The profiler pods' last states, the node's status entry and the operator's log tail."""
    pods = [
        f"{p['metadata']['name']}: {phase(p)} {p.get('status', {}).get('containerStatuses')}"
        for p in profiler_pods(history)
    ]
    log = kubectl("logs", "-n", NAMESPACE, f"deployment/{RELEASE}", "--tail=40", check=False)
    return (
        "profiler pods:\n" + "\n".join(pods) + f"\nnode entry: {node_entry(kubectl)}"
        f"\npod watch restarts: {history.restarts}"
        f"\noperator log:\n{log.stdout}{log.stderr}"
    )


# ---------------------------------------------------------------- the day
def test_the_charts_operator_pod_runs_from_the_operator_image_and_reaches_the_api_server(
    real_node: RealNode, kubectl: Kubectl, release: NodeRelease, built_images: img.Images
) -> None:
    pod = wait_operator_ready(kubectl, release)
    assert pod["spec"]["nodeName"] == NODE_NAME
    status = pod["status"]["containerStatuses"][0]
    assert status["image"] == built_images.operator
    assert status["ready"] is True
    process = container_process(pod)
    assert process is not None, "the operator container's process on the node"
    assert (process.uid, process.gid) == (OPERATOR_UID, OPERATOR_UID)
    assert process.read_only_root
    assert process.capabilities == 0
    assert process.no_new_privileges
    # In-cluster credentials through the kubernetes Service: the API server saw the pod's IP.
    events = wait_for(
        lambda: real_node.control_plane.audit_events(release.username),
        60,
        "requests of the operator's service account",
    )
    assert pod["status"]["podIP"] in {ip for e in events for ip in e.get("sourceIPs", [])}
    # Its log through the API server and the kubelet (webhook-authorized), as kubectl reads it.
    assert kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"]).stdout.strip()
    # The pod serves /healthz and /metrics on its pod IP (the kubelet's probes use the former).
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:{METRICS_PORT}/healthz") as rsp:
        assert rsp.status == 200
    assert isinstance(operator_metrics(kubectl, release), dict)


def message_pod(name: str, image: str, code: str) -> dict[str, Any]:
    """A pod that runs ``code`` in the operator image and ends, with the profiler pod's
    termination-message settings."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists"}],
            "containers": [
                {
                    "name": "writer",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", code],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            ],
        },
    }


#: What each pod writes to its termination-message file, prints and exits with.
MESSAGE_CASES = {
    "longer-than-the-limit": ("h" * 1000 + "t" * 4095 + "!", "", 0),
    "empty-file-failed": ("", "cannot open device\nretrying\n", 3),
    "white-space-failed": ("\n", "cannot open device\n", 1),
}


def test_the_kubelet_publishes_termination_messages_as_the_emulated_kubelet_does(
    real_node: RealNode, kubectl: Kubectl, built_images: img.Images, workdir: Path
) -> None:
    """The last 4096 bytes of a long message, the log's tail for a failed container's empty
    file, and a message of white space kept: the emulator's ``termination_message`` agrees."""
    for name, (message, printed, code) in MESSAGE_CASES.items():
        program = (
            "import sys; open('/dev/termination-log', 'w').write(sys.argv[1]); "
            "sys.stdout.write(sys.argv[2]); sys.exit(int(sys.argv[3]))"
        )
        pod = message_pod(name, built_images.operator, program)
        pod["spec"]["containers"][0]["args"] = [message, printed, str(code)]
        (workdir / f"{name}.json").write_text(json.dumps(pod))
        kubectl("apply", "-f", str(workdir / f"{name}.json"))
    for name, (message, printed, code) in MESSAGE_CASES.items():
        done = wait_for(
            lambda name=name: terminated(kubectl.json("get", "pod", "-n", "default", name)),
            120,
            f"pod {name} to end",
        )
        emulated = termination_message(message.encode(), "FallbackToLogsOnError", code, printed)
        assert done["message"] == emulated, (name, done["message"], emulated)
        assert done["exitCode"] == code
    kubectl("delete", "pods", "-n", "default", *MESSAGE_CASES, "--wait=true")


def test_the_default_example_fails_on_a_gpu_node_whose_containers_see_no_gpu(
    real_node: RealNode, kubectl: Kubectl, release: NodeRelease, history: PodHistory
) -> None:
    """``kubectl apply`` of the shipped example, unchanged: its pod asks for the GPU and runs
    ``--device cuda``; the container sees none (the GPU is a number in the node's status, as
    with a missing runtime class or device plugin), so the profiler refuses instead of measuring
    the CPU, and nothing is published."""
    kubectl("apply", "-f", str(EXAMPLE_PATH))

    def failed_pod() -> dict[str, Any] | None:
        pods = [p for p in profiler_pods(history) if phase(p) == "Failed" and terminated(p)]
        return pods[0] if pods else None

    pod = wait_for(failed_pod, PROFILE_SECONDS, "the GPU profile's pod to fail", interval=1)
    command = command_of(pod)
    assert command[command.index("--device") + 1] == "cuda"
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits[GPU_RESOURCE] == "1"
    ended = terminated(pod)
    assert ended is not None
    assert ended["exitCode"] == 2
    # FallbackToLogsOnError: the real kubelet put the profiler's last line in the message.
    assert "device 'cuda' is not available" in ended["message"]
    entry = wait_for(
        lambda: (lambda e: e if e.get("reason") == "PodFailed" else None)(node_entry(kubectl)),
        60,
        "the node's entry to name the failure",
    )
    for cause in ("runtime class", "device plugin", "driver"):
        assert cause in entry["message"], entry
    assert our_labels(real_node) == {}, "no CPU numbers published as the GPU's"


def test_the_default_example_as_a_cpu_profile_is_profiled_on_the_node_and_published(
    real_node: RealNode,
    kubectl: Kubectl,
    release: NodeRelease,
    history: PodHistory,
    built_images: img.Images,
    workdir: Path,
) -> None:
    running: dict[str, Any] = {}

    def watch_it_run() -> None:
        for pod in profiler_pods(history):
            if phase(pod) == "Running" and "process" not in running:
                process = container_process(pod)
                if process is not None:
                    running.update(pod=pod, process=process)

    pod, entry = profile_the_node(kubectl, cpu_example(workdir), history, meanwhile=watch_it_run)

    process = running["process"]
    assert (process.uid, process.gid) == (65532, 65532), "the image's non-root user"
    assert process.read_only_root
    assert process.capabilities == 0
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert pod["status"]["containerStatuses"][0]["image"] == built_images.profiler
    scheduled = kubectl.json(
        "get",
        "events",
        "-n",
        NAMESPACE,
        "--field-selector",
        f"reason=Scheduled,involvedObject.name={pod['metadata']['name']}",
    )["items"]
    assert scheduled, "the real scheduler's Scheduled event"
    assert scheduled[0]["message"].endswith(f"to {NODE_NAME}")
    assert scheduled[0]["reportingComponent"] == "default-scheduler"
    message = terminated(pod)["message"]  # type: ignore[index]
    result = decode_compact(message)
    assert (result.shape_k, result.shape_n) == (4096, 14336), "the default shape, measured"
    assert result.backend == "cpu"

    labels = our_labels(real_node)
    assert labels["roofline.dev/profile"] == PROFILE
    assert int(labels["roofline.dev/min-batch"]) == entry["recommendedMinBatch"]
    record = node_metadata(real_node)["annotations"][f"record.roofline.dev/{PROFILE}"]
    assert json.loads(record)
    row = next(r for r in kubectl.table("rooflineprofiles") if r["NAME"] == PROFILE)
    assert (row["READY"], row["MATCHED"], row["PROFILED"], row["FAILED"]) == ("True", "1", "1", "0")
    assert float(row["RIDGE"]) == pytest.approx(entry["ridgePoint"], rel=0.01)
    metrics = operator_metrics(kubectl, release)
    ridge = sample(metrics, "roofline_ridge_point", node=NODE_NAME)
    assert ridge == pytest.approx(entry["ridgePoint"], rel=1e-3)


def running_pods(history: PodHistory, known: set[str]) -> list[dict[str, Any]]:
    return [
        p
        for p in profiler_pods(history)
        if p["metadata"]["uid"] not in known
        and phase(p) == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def uids(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


def test_a_models_profile_mounts_its_configmap_and_survives_the_operator_pod_deleted_mid_round(
    kubectl: Kubectl, release: NodeRelease, history: PodHistory, workdir: Path
) -> None:
    """The CPU profile plus a served model whose config.json a ConfigMap holds, as the models
    example plans Mixtral (a small model and ``quick``: the example's full-size models take
    minutes on this CPU)."""
    config = workdir / "config.json"
    config.write_text(json.dumps(TINY_LLAMA))
    kubectl(
        "-n",
        NAMESPACE,
        "create",
        "configmap",
        "tiny-llama-config",
        f"--from-file=config.json={config}",
    )
    model = {
        "name": "tiny-llama",
        "configMapRef": {"name": "tiny-llama-config", "key": "config.json"},
        "contextTokens": 1024,
    }
    manifest = cpu_example(workdir, quick=True, models=[model])
    first = wait_operator_ready(kubectl, release)
    known = uids(profiler_pods(history))
    replaced: dict[str, Any] = {}

    def delete_the_operator_pod_once_the_profiler_runs() -> None:
        pods = running_pods(history, known)
        if pods and not replaced:
            name = first["metadata"]["name"]
            kubectl("delete", "pod", "-n", NAMESPACE, name, "--wait=false")
            replaced.update(profiler=pods[-1])

    pod, entry = profile_the_node(
        kubectl, manifest, history, meanwhile=delete_the_operator_pod_once_the_profiler_runs
    )
    assert replaced, "the operator pod was deleted while the profiler ran"
    second = wait_operator_ready(kubectl, release)
    assert second["metadata"]["name"] != first["metadata"]["name"], "the Deployment's new pod"
    assert pod["metadata"]["uid"] == replaced["profiler"]["metadata"]["uid"], (
        "the new operator adopted the running pod: its result is the one published"
    )
    spec_hash = pod["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    assert len(profiler_pods(history, spec_hash)) == 1, "no second pod for the same round"

    mounted = [v["configMap"]["name"] for v in pod["spec"]["volumes"] if "configMap" in v]
    assert len(mounted) == 1, pod["spec"]["volumes"]
    config_map = kubectl.json("get", "configmap", "-n", NAMESPACE, mounted[0])
    owner = config_map["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("RooflineProfile", profile(kubectl)["metadata"]["uid"])
    planned = {m["name"] for m in entry.get("models", []) if "maxBatchByMemory" in m}
    assert planned == {"tiny-llama"}, entry.get("models")


def test_a_stopped_kubelet_leaves_the_node_unavailable_with_its_publication_kept(
    real_node: RealNode, kubectl: Kubectl, history: PodHistory
) -> None:
    labels = our_labels(real_node)
    record_key = f"record.roofline.dev/{PROFILE}"
    record = node_metadata(real_node)["annotations"][record_key]
    pods_before = len(profiler_pods(history))
    real_node.stop_kubelet()
    try:
        real_node.wait_ready(False, timeout=90)
        node = real_node.node() or {}
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
        entry = wait_state(kubectl, "Unavailable", timeout=90)
        assert NODE_NAME in entry["message"]
        assert our_labels(real_node) == labels, "labels kept for retainUnavailableFor"
        assert node_metadata(real_node)["annotations"][record_key] == record
        assert profile(kubectl)["status"]["summary"]["unavailable"] == 1
    finally:
        real_node.start_kubelet()
    real_node.wait_ready(True)
    wait_state(kubectl, "Profiled", timeout=120)
    assert our_labels(real_node) == labels
    assert len(profiler_pods(history)) == pods_before, "back within the time: not re-profiled"


def serving_pod(image: str) -> dict[str, Any]:
    """A serving workload that holds the node's GPU (it only sleeps)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serving", "namespace": "serving"},
        "spec": {
            "tolerations": [GPU_TAINT | {"operator": "Equal"}],
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsNonRoot": True, "runAsUser": OPERATOR_UID},
            "containers": [
                {
                    "name": "model",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", "import time; time.sleep(3600)"],
                    "resources": {"limits": {GPU_RESOURCE: "1"}},
                }
            ],
        },
    }


def wait_for_a_pod_waiting_for_the_gpu(history: PodHistory, known: set[str]) -> dict[str, Any]:
    """A profiler pod not in ``known`` that the scheduler found Unschedulable."""

    def waiting() -> dict[str, Any] | None:
        pods = [p for p in profiler_pods(history) if p["metadata"]["uid"] not in known]
        return next((p for p in pods if unschedulable(p)), None)

    return wait_for(waiting, 120, "the profiler pod to wait for the GPU", interval=0.5)


def hold_the_gpu(kubectl: Kubectl, workdir: Path, image: str) -> None:
    """A serving pod in namespace ``serving`` takes the node's GPU and is Ready."""
    kubectl("create", "namespace", "serving")
    manifest = workdir / "serving.json"
    manifest.write_text(json.dumps(serving_pod(image)))
    kubectl("apply", "-f", str(manifest))
    kubectl("wait", "-n", "serving", "--for=condition=Ready", "pod/serving", "--timeout=120s")


def unschedulable(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = pod.get("status", {}).get("conditions") or []
    return next(
        (
            c
            for c in conditions
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        ),
        None,
    )


def test_a_pod_waiting_for_a_taken_gpu_is_unschedulable_and_a_gpu_taken_away_is_an_outage(
    real_node: RealNode,
    kubectl: Kubectl,
    history: PodHistory,
    built_images: img.Images,
    workdir: Path,
) -> None:
    hold_the_gpu(kubectl, workdir, built_images.operator)
    labels = our_labels(real_node)
    known = uids(profiler_pods(history))
    # The profile measures the GPU again (its pods ask for it; a measurement change, so the node
    # is due); short pending timeouts.
    patch = {"spec": {"device": "gpu", "pendingTimeoutSeconds": 8, "retryBackoffSeconds": 5}}
    kubectl("patch", "rooflineprofile", PROFILE, "--type=merge", "-p", json.dumps(patch))

    pod = wait_for_a_pod_waiting_for_the_gpu(history, known)
    condition = unschedulable(pod)
    assert condition is not None
    # The real scheduler's words, which the emulated one writes too.
    assert condition["message"] == unschedulable_message({insufficient(GPU_RESOURCE): 1}, 1)
    entry = wait_state(kubectl, "Unschedulable", timeout=90)
    scheduler_says = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    assert entry["message"].startswith(f"pod not scheduled after 8s: {scheduler_says}"), entry
    assert our_labels(real_node) == labels, "the last publication stands"

    real_node.set_gpu_capacity(None)
    entry = wait_state(kubectl, "Unavailable", timeout=90)
    assert f"allocatable {GPU_RESOURCE}" in entry["message"], entry
    wait_for(
        lambda: (
            not kubectl.json(
                "get", "pods", "-n", NAMESPACE, "-l", f"{LABEL_MANAGED_BY}={MANAGED_BY}"
            )["items"]
        ),
        60,
        "the waiting profiler pod to be deleted",
    )
    assert our_labels(real_node) == labels

    # A CPU profile again, then the GPU back and free.
    kubectl(
        "patch", "rooflineprofile", PROFILE, "--type=merge", "-p", '{"spec": {"device": "cpu"}}'
    )
    kubectl("delete", "namespace", "serving", "--wait=true", timeout=120)
    real_node.set_gpu_capacity(1)


def test_a_profile_deleted_without_its_operator_leaves_its_pods_and_configmap_to_the_collector(
    real_node: RealNode,
    kubectl: Kubectl,
    release: NodeRelease,
    history: PodHistory,
    built_images: img.Images,
    workdir: Path,
) -> None:
    # A profiler pod that cannot finish while the test looks (a CPU profile's pod can end in a few
    # seconds on an idle host): a GPU profile's pod waits for the GPU a serving pod holds, with a
    # pending timeout longer than the test.
    hold_the_gpu(kubectl, workdir, built_images.operator)
    known = uids(profiler_pods(history))
    patch = {"spec": {"device": "gpu", "pendingTimeoutSeconds": 3600}}
    kubectl("patch", "rooflineprofile", PROFILE, "--type=merge", "-p", json.dumps(patch))

    pod = wait_for_a_pod_waiting_for_the_gpu(history, known)
    (config_map,) = [v["configMap"]["name"] for v in pod["spec"]["volumes"] if "configMap" in v]
    kubectl("scale", "deployment", "-n", NAMESPACE, release.deployment, "--replicas=0")
    wait_for(lambda: operator_pod(kubectl, release) is None, 60, "the operator to be gone")
    since = real_node.control_plane.audit_size()
    kubectl(
        "patch",
        "rooflineprofile",
        PROFILE,
        "--type=merge",
        "-p",
        '{"metadata": {"finalizers": null}}',
    )
    kubectl("delete", "rooflineprofile", PROFILE, "--wait=true", timeout=60)

    collector = "system:serviceaccount:kube-system:generic-garbage-collector"

    def collected() -> set[str]:
        events = real_node.control_plane.audit_events(collector, since)
        return {
            f"{e['objectRef']['resource']}/{e['objectRef']['name']}"
            for e in events
            if e["verb"] == "delete" and e.get("responseStatus", {}).get("code") == 200
        }

    wanted = {f"pods/{pod['metadata']['name']}", f"configmaps/{config_map}"}
    wait_for(lambda: wanted <= collected(), 90, "the garbage collector to delete the dependents")
    assert kubectl("get", "configmap", "-n", NAMESPACE, config_map, check=False).returncode != 0
    wait_for(
        lambda: (
            kubectl("get", "pod", "-n", NAMESPACE, pod["metadata"]["name"], check=False).returncode
            != 0
        ),
        60,
        "the profiler pod to be gone",
    )
    kubectl("delete", "namespace", "serving", "--wait=true", timeout=120)


def without_pods_create(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's RBAC with ``create`` taken from every rule on pods."""
    broken = copy.deepcopy(objects)
    for obj in broken:
        for rule in obj.get("rules") or []:
            if "pods" in rule.get("resources", []):
                rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    return broken


def test_a_chart_without_pods_create_fails_the_check_the_cpu_profile_passed(
    real_node: RealNode,
    kubectl: Kubectl,
    release: NodeRelease,
    history: PodHistory,
    built_images: img.Images,
    workdir: Path,
) -> None:
    # A fresh start: no profile (and no publication) left by the tests before.
    kubectl("delete", "rooflineprofiles", "--all", "--wait=true", timeout=120)
    uninstall(kubectl, workdir, release)
    values = node_values(built_images.operator, built_images.profiler)
    broken = install(kubectl, workdir, values, RELEASE, NAMESPACE, transform=without_pods_create)
    wait_operator_ready(kubectl, broken)
    since = real_node.control_plane.audit_size()
    with pytest.raises(AssertionError, match='cannot create resource "pods"'):
        profile_the_node(kubectl, cpu_example(workdir), history, timeout=60)
    refused = [
        e
        for e in real_node.control_plane.audit_events(broken.username, since)
        if (e["verb"], e["objectRef"]["resource"]) == ("create", "pods")
        and e["responseStatus"]["code"] == 403
    ]
    assert refused, "the API server refused the operator's pod"


def test_stopping_the_node_puts_the_host_back_as_it_was(real_node: RealNode) -> None:
    """The last test stops the node itself (the fixture's stop is then a no-op)."""
    assert real_node.before is not None
    during = "\n".join(hoststate.differences(real_node.before, hoststate.snapshot()))
    for change in ("sysctl kernel.panic", "chain KUBE-SERVICES added", "cgroup added"):
        assert change in during, "while the node runs, the host has changed: " + during
    assert f"network link added: {BRIDGE}" in during
    shims = real_node.containerd.shim_pids()
    assert shims, "pods run under containerd shims"

    assert real_node.stop() == [], "the host is as it was recorded"
    print(f"real node timings: {real_node.timings}")
    assert not [pid for pid in shims if Path(f"/proc/{pid}").exists()], "a shim outlived the node"
    assert not hostundo.node_leftovers(BRIDGE)
