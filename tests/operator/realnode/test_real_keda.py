"""KEDA v2.20.2 acting on what ``roofline export --target keda`` writes, on a real node.

KEDA's operator and metrics API server run against the node's API server, the metrics server
registered as the external metrics APIService (``harness/keda.py``); the controller manager's
HPA controller scales. The exported ScaledObject's queries are answered by a real Prometheus
scraping an engine's request gauges that the test sets (``harness/engine_metrics.py``). The
ScaledObject is applied as exported, with only its timing made short for a test: the HPA's scale
behaviour without the default five-minute scale-down stabilisation
(``advanced.horizontalPodAutoscalerConfig.behavior``) and a short ``pollingInterval`` and
``cooldownPeriod`` (the controller manager reconciles every ``HPA_SYNC_SECONDS``).

When one replica's engine runs the plan's SLO batch (the batch at which its ITL reaches the SLO)
with nothing waiting yet, the Deployment is scaled up before requests must wait, to what the HPA
computes from the triggers; when the requests are gone, back to its minimum. A ScaledObject whose
requests-per-replica threshold is the SLO batch itself (the export's before it left room for the
HPA's 10% tolerance) fails the same check.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import node_export
from tests.operator.harness.consumers import apply_documents, namespace_object
from tests.operator.harness.engine_metrics import RUNNING, EngineMetrics
from tests.operator.harness.keda import KedaServers
from tests.operator.harness.nodeconfig import GPU_TAINT, SANDBOX_IMAGE
from tests.operator.harness.processes import Kubectl
from tests.operator.harness.realnode import RealNode
from tests.operator.harness.waiting import wait_for
from tests.prometheus_server import MISSING_REASON, PROMETHEUS, PrometheusServer, ScrapeTarget

from .conftest import node_kubectl, running_node

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON),
]

NAMESPACE = "serving"
DEPLOYMENT = "llama-server"
MAX_REPLICAS = 4
#: The test's timing (documented in docs/testing-operator.md): KEDA polls every second, and the
#: HPA scales at once both ways.
TEST_TIMING = {
    "pollingInterval": 1,
    "cooldownPeriod": 5,
    "advanced": {
        "horizontalPodAutoscalerConfig": {
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
                },
            }
        }
    },
}
SCALE_SECONDS = 90
#: The HPA's default tolerance (``--horizontal-pod-autoscaler-tolerance``).
HPA_TOLERANCE = 0.1
#: How long a ScaledObject that does not scale is given: several HPA syncs after its metric is in.
NOT_SCALING_SECONDS = 30


@pytest.fixture(scope="module")
def real_node(
    node_binaries: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNode]:
    """The node without the project's images: the Deployment's pods run the pause image."""
    with running_node(node_binaries, tmp_path_factory.mktemp("real-node")) as node:
        yield node


@pytest.fixture(scope="module")
def kubectl(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return node_kubectl(real_node, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture(scope="module")
def keda(
    real_node: RealNode,
    kubectl: Kubectl,
    consumer_binaries: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KedaServers]:
    servers = KedaServers(
        consumer_binaries,
        real_node.address,
        real_node.kubeconfig,
        kubectl,
        real_node.control_plane.pki.ca,
        tmp_path_factory.mktemp("keda"),
    )
    try:
        servers.start()
        print(f"KEDA started: {servers.timings}")
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineMetrics]:
    metrics = EngineMetrics(node_export.MODEL, NAMESPACE).start()
    yield metrics
    metrics.stop()


@pytest.fixture(scope="module")
def prometheus(
    engine: EngineMetrics, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    target = ScrapeTarget("vllm", [engine.address])
    with PrometheusServer(tmp_path_factory.mktemp("prometheus"), [target]) as server:
        yield server


@pytest.fixture(scope="module")
def scaled_object(
    prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The ScaledObject ``roofline export --target keda`` writes for the node's profile."""
    folder = tmp_path_factory.mktemp("export")
    documents = node_export.export(
        "--target", "keda", "--from", str(node_export.write_status(folder)),
        "--namespace", NAMESPACE, "--deployment", DEPLOYMENT, "--prometheus", prometheus.url,
        "--max-replicas", str(MAX_REPLICAS),
    )  # fmt: skip
    (found,) = [d for d in documents if d["kind"] == "ScaledObject"]
    return found


def with_test_timing(scaled_object: dict[str, Any], name: str) -> dict[str, Any]:
    changed = copy.deepcopy(scaled_object)
    changed["metadata"]["name"] = name
    changed["spec"].update(copy.deepcopy(TEST_TIMING))
    return changed


def requests_trigger(scaled_object: dict[str, Any]) -> dict[str, Any]:
    """The trigger that holds each replica at the plan's requests per replica."""
    found: dict[str, Any] = next(
        t for t in scaled_object["spec"]["triggers"] if t.get("name") == "requests-per-replica"
    )
    return found


def at_the_slo_batch(scaled_object: dict[str, Any]) -> dict[str, Any]:
    """The broken variant: the requests per replica set to the SLO batch itself, as the export
    wrote it before it left the HPA's tolerance below it."""
    broken = copy.deepcopy(scaled_object)
    requests_trigger(broken)["metadata"]["threshold"] = str(node_export.slo_batch())
    return broken


def hpa_replicas(prometheus: PrometheusServer, scaled_object: dict[str, Any], current: int) -> int:
    """The replicas the HPA asks for from the triggers' values as Prometheus answers them now:
    for each ``AverageValue`` metric ``⌈value ÷ threshold⌉``, unless ``value ÷ (threshold ×
    current)`` is within the tolerance of 1; the largest, within the ScaledObject's bounds
    (kube-controller-manager's ``podautoscaler/replica_calculator.go``,
    ``GetExternalPerPodMetricReplicas``)."""
    wanted = []
    for trigger in scaled_object["spec"]["triggers"]:
        value = prometheus.value(trigger["metadata"]["query"]) or 0.0
        threshold = float(trigger["metadata"]["threshold"])
        ratio = value / (threshold * current)
        wanted.append(current if abs(ratio - 1) <= HPA_TOLERANCE else math.ceil(value / threshold))
    low = int(scaled_object["spec"].get("minReplicaCount", 1))
    high = int(scaled_object["spec"].get("maxReplicaCount", MAX_REPLICAS))
    return max(low, min(high, max(wanted)))


def serving_deployment() -> dict[str, Any]:
    labels = {"app": DEPLOYMENT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "engine", "image": SANDBOX_IMAGE, "imagePullPolicy": "Never"}
                    ],
                    "tolerations": [{**GPU_TAINT, "operator": "Equal"}],
                    "terminationGracePeriodSeconds": 1,
                },
            },
        },
    }


@pytest.fixture
def deployment(keda: KedaServers, kubectl: Kubectl, tmp_path: Path) -> Iterator[str]:
    """The serving Deployment at one replica, deleted with its ScaledObjects afterwards."""
    apply_documents(
        kubectl, [namespace_object(NAMESPACE), serving_deployment()], tmp_path / "deployment.yaml"
    )
    yield DEPLOYMENT
    kubectl("delete", "scaledobjects.keda.sh", "--all", "-n", NAMESPACE, "--wait=true", timeout=120)
    kubectl("delete", "deployment", DEPLOYMENT, "-n", NAMESPACE, "--wait=true", timeout=120)


def replicas(kubectl: Kubectl) -> int:
    return int(kubectl.json("get", "deployment", DEPLOYMENT, "-n", NAMESPACE)["spec"]["replicas"])


def hpa_says(kubectl: Kubectl, keda: KedaServers) -> str:
    found = kubectl("get", "hpa", "-n", NAMESPACE, "-o", "yaml", check=False)
    return f"HPA:\n{found.stdout}{found.stderr}\n{keda.log_tails(15)}"


def wait_replicas(
    kubectl: Kubectl, keda: KedaServers, wanted: Callable[[int], bool], what: str, timeout: float
) -> None:
    try:
        wait_for(lambda: wanted(replicas(kubectl)), timeout, f"{DEPLOYMENT} {what}", interval=1)
    except AssertionError as error:
        raise AssertionError(
            f"{error} (at {replicas(kubectl)})\n{hpa_says(kubectl, keda)}"
        ) from None


def scale_with_load(
    kubectl: Kubectl,
    keda: KedaServers,
    engine: EngineMetrics,
    prometheus: PrometheusServer,
    scaled_object: dict[str, Any],
    tmp_path: Path,
    *,
    timeout: float = SCALE_SECONDS,
) -> None:
    """Apply ``scaled_object``; once one replica's engine runs the SLO batch, with nothing waiting
    yet, the Deployment must be scaled up (to what the HPA computes from the triggers), and when
    the requests are gone, back to its minimum."""
    low = int(scaled_object["spec"].get("minReplicaCount", 1))
    name = scaled_object["metadata"]["name"]
    engine.set(0, 0)
    apply_documents(kubectl, [scaled_object], tmp_path / "scaledobject.yaml")
    wait_for(
        lambda: (
            kubectl("get", "hpa", f"keda-hpa-{name}", "-n", NAMESPACE, check=False).returncode == 0
        ),
        60,
        "KEDA's HPA",
        interval=1,
    )
    engine.set(node_export.slo_batch(), 0)
    wait_for(
        lambda: prometheus.value(RUNNING) == node_export.slo_batch(), 30, "the scrape", interval=0.5
    )
    wait_replicas(kubectl, keda, lambda n: n > low, "scaled up", timeout)
    wanted = hpa_replicas(prometheus, scaled_object, low)
    wait_replicas(kubectl, keda, lambda n: n == wanted, f"at {wanted}", timeout)
    engine.set(0, 0)
    wait_replicas(kubectl, keda, lambda n: n == low, f"back at {low}", timeout)


def test_the_exported_scaled_object_scales_up_at_the_slo_batch_and_back_down(
    kubectl: Kubectl,
    keda: KedaServers,
    engine: EngineMetrics,
    prometheus: PrometheusServer,
    scaled_object: dict[str, Any],
    deployment: str,
    tmp_path: Path,
) -> None:
    exported = with_test_timing(scaled_object, deployment)
    scale_with_load(kubectl, keda, engine, prometheus, exported, tmp_path)


def test_a_threshold_at_the_slo_batch_itself_fails_the_same_check(
    kubectl: Kubectl,
    keda: KedaServers,
    engine: EngineMetrics,
    prometheus: PrometheusServer,
    scaled_object: dict[str, Any],
    deployment: str,
    tmp_path: Path,
) -> None:
    broken = at_the_slo_batch(with_test_timing(scaled_object, deployment))
    with pytest.raises(AssertionError, match=f"{DEPLOYMENT} scaled up"):
        scale_with_load(
            kubectl, keda, engine, prometheus, broken, tmp_path, timeout=NOT_SCALING_SECONDS
        )
    assert replicas(kubectl) == int(broken["spec"].get("minReplicaCount", 1))
