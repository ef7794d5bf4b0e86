"""Kueue objects as Kueue v0.17.0 counts them: a flavor per measured class selected by the
stable class label, and per model and class a queue covering every resource a serving pod
requests, sized for the whole demand on that class."""

from __future__ import annotations

from typing import Any

import pytest

from roofline_cli.export import kueue
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from roofline_operator.core.names import LABEL_CLASS
from roofline_operator.decide.labels import label_safe
from tests.cli.export_sources import H100, L40S, MODEL, PROFILE, status_profile


def _documents(document: dict[str, Any] | None = None, **options: Any) -> dict[str, list[Any]]:
    source = source_of_profile(document or status_profile(), "p")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for _, exported in kueue.build(source, ExportOptions(**options)):
        data = plain(exported)
        by_kind.setdefault(data["kind"], []).append(data)
    return by_kind


def _quotas(queue: dict[str, Any]) -> dict[str, Any]:
    (group,) = queue["spec"]["resourceGroups"]
    (flavor,) = group["flavors"]
    quotas = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert list(quotas) == group["coveredResources"]
    return quotas


def test_the_class_label_key_is_the_operators() -> None:
    assert kueue.CLASS_LABEL == LABEL_CLASS


def test_a_flavor_per_class_selects_by_the_class_label_and_tolerates_the_gpu_taint() -> None:
    flavors = _documents(tokens_per_second=40000)["ResourceFlavor"]
    assert sorted(f["spec"]["nodeLabels"][LABEL_CLASS] for f in flavors) == sorted(
        [label_safe(H100), label_safe(L40S)]
    )
    for flavor in flavors:
        assert flavor["spec"]["nodeLabels"]["roofline.dev/profile"] == PROFILE
        assert "roofline.dev/min-batch" not in flavor["spec"]["nodeLabels"]
        assert flavor["spec"]["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]


def test_a_reprofile_that_moves_the_min_batch_leaves_the_flavors_unchanged() -> None:
    moved = status_profile()
    for node in moved["status"]["nodes"]:
        node["recommendedMinBatch"] = node["recommendedMinBatch"] * 2
    assert (
        _documents(moved, tokens_per_second=40000)["ResourceFlavor"]
        == (_documents(tokens_per_second=40000)["ResourceFlavor"])
    )


def test_each_class_is_its_own_queue_sized_for_the_whole_demand() -> None:
    documents = _documents(tokens_per_second=40000, utilization=0.75)
    queues = {q["metadata"]["name"]: q for q in documents["ClusterQueue"]}
    h100 = queues[kueue.object_name(f"{MODEL}-{label_safe(H100)}")]
    l40s = queues[kueue.object_name(f"{MODEL}-{label_safe(L40S)}")]
    # H100: 104 / 0.049 = 2122 tokens/s per replica → ⌈40000 / (2122 × 0.75)⌉ = 26 replicas;
    # L40S: 24 / 0.047 = 510.6 → ⌈40000 / 383⌉ = 105. One flavor per queue: Kueue adds the
    # quotas of one queue's flavors, so 26 + 105 GPUs would be admitted for 26 *or* 105.
    assert _quotas(h100) == {"cpu": "208", "memory": "1664Gi", "nvidia.com/gpu": 26}
    assert _quotas(l40s) == {"cpu": "840", "memory": "6720Gi", "nvidia.com/gpu": 105}
    assert all("fairSharing" not in q["spec"] for q in queues.values())
    assert {q["spec"]["cohortName"] for q in queues.values()} == {"roofline"}
    locals_ = {q["metadata"]["name"]: q["spec"]["clusterQueue"] for q in documents["LocalQueue"]}
    assert locals_ == {name: name for name in queues}


def test_the_pod_requests_come_from_the_flags() -> None:
    (queue, _) = _documents(
        tokens_per_second=40000, cpu_per_replica="500m", memory_per_replica="12.5Gi",
        resource="amd.com/gpu",
    )["ClusterQueue"]  # fmt: skip
    assert _quotas(queue) == {"cpu": "13000m", "memory": "325Gi", "amd.com/gpu": 26}


def test_a_cpu_device_profile_asks_for_no_accelerator() -> None:
    document = status_profile()
    document["spec"]["device"] = "cpu"
    documents = _documents(document, tokens_per_second=40000)
    for queue in documents["ClusterQueue"]:
        assert set(_quotas(queue)) == {"cpu", "memory"}
    assert all("tolerations" not in f["spec"] for f in documents["ResourceFlavor"])


def test_the_local_queue_says_which_label_the_deployment_needs() -> None:
    source = source_of_profile(status_profile(), "p")
    headers = [
        header
        for header, document in kueue.build(source, ExportOptions(tokens_per_second=1000))
        if document["kind"] == "LocalQueue"
    ]
    assert len(headers) == 2
    assert all(kueue.QUEUE_NAME_LABEL in h for h in headers)


@pytest.mark.parametrize(
    ("quantity", "factor", "scaled"),
    [
        pytest.param("8", 3, "24", id="cores"),
        pytest.param("500m", 3, "1500m", id="millicores"),
        pytest.param("64Gi", 26, "1664Gi", id="binary"),
        pytest.param("1.5", 2, "3", id="decimal"),
        pytest.param("1e3", 2, "2e3", id="exponent"),
    ],
)
def test_a_quota_is_the_pod_request_times_the_replicas(
    quantity: str, factor: int, scaled: str
) -> None:
    assert kueue.scaled_quantity(quantity, factor) == scaled


def test_without_a_demand_there_is_no_quota() -> None:
    with pytest.raises(kueue.NoDemand, match="--tokens-per-second"):
        _documents()


def _rated(h100: float, l40s: float) -> dict[str, Any]:
    document = status_profile()
    for item in document["status"]["models"][0]["classes"]:
        rps = {H100: h100, L40S: l40s}[item["product"]]
        item["maxRequestRate"] = {
            "requestsPerSecond": rps,
            "limitedBy": "ttft",
            "promptTokens": 4000,
            "outputTokens": 200,
        }
    return document


def _gpus(documents: dict[str, list[Any]]) -> dict[str, int]:
    queues = {q["metadata"]["name"]: q for q in documents["ClusterQueue"]}
    return {
        product: _quotas(queues[kueue.object_name(f"{MODEL}-{label_safe(product)}")])[
            "nvidia.com/gpu"
        ]
        for product in (H100, L40S)
    }


def test_a_demanded_request_rate_sizes_each_class_by_its_max_request_rate() -> None:
    # ⌈30 / 4.1⌉ = 8 H100 replicas, ⌈30 / 0.7⌉ = 43 L40S replicas (one GPU each).
    assert _gpus(_documents(_rated(4.1, 0.7), request_rate=30)) == {H100: 8, L40S: 43}


def test_with_both_demands_each_class_takes_the_larger_replica_count() -> None:
    # Tokens/s alone: 26 H100, 105 L40S; requests/s alone: ⌈30 / 1⌉ = 30 and ⌈30 / 2⌉ = 15.
    both = _documents(_rated(1.0, 2.0), tokens_per_second=40000, request_rate=30)
    assert _gpus(both) == {H100: 30, L40S: 105}


def test_a_request_rate_without_a_max_request_rate_is_a_clear_error() -> None:
    with pytest.raises(kueue.NoDemand, match="--request-rate needs a maxRequestRate"):
        _documents(request_rate=30)
