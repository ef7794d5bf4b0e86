"""The fleet view through whole reconcile rounds: each device classed by what its own pod
measured, the GPU product label a cross-check only, every GPU of a node compared, CPU profiles
classed by CPU model, and the class and device labels written on the nodes."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.loop_builders import as_patched, loop_with
from tests.operator.unit.operator_builders import device, fresh_succeeded_pod, node, profile
from tests.operator.unit.recording_client import RecordingClient

from roofline_operator.core.nodes import NodeFacts
from roofline_operator.decide.labels import label_safe
from roofline_operator.decide.pods import pod_facts
from roofline_operator.run.reconcile import ProfileLoop
from roofline_profiler.wire.compact import CompactDevice, encode_compact

pytestmark = pytest.mark.usefixtures("quiet_events")

GFD_LABEL = "nvidia.com/gpu.product"
H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"


async def profiled(
    loop: ProfileLoop,
    client: RecordingClient,
    nodes: Mapping[str, NodeFacts],
    measured: Mapping[str, Sequence[CompactDevice]],
    backend: str = "cuda",
) -> dict[str, Any]:
    """Two rounds: the pods created, then each succeeded with the devices ``measured`` on its
    node; the status written last."""
    await loop.round(nodes, [], {})
    pods = []
    for created in client.created:
        pod = pod_facts(created)
        result = replace(profile(*measured[pod.node], created_at=time.time()), backend=backend)
        message = encode_compact(result)
        pods.append(
            fresh_succeeded_pod(
                pod.name, pod.node, pod.spec_hash, pod.attempt, message=message, asked=pod.asked
            )
        )
    await loop.round(nodes, pods, {})
    return dict(client.statuses[-1])


def entries_of(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in status["nodes"]}


def condition_of(entry: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in entry.get("conditions", []) if c["type"] == kind), {})


def labelled(name: str, product: str | None) -> NodeFacts:
    return node(name, labels={GFD_LABEL: product} if product else None)


@pytest.mark.asyncio
async def test_a_faster_gpu_relabelled_into_a_slower_class_neither_joins_it_nor_flags_a_node(
    quiet_events: list[tuple[str, str]],
) -> None:
    """Relabelling an H200 as an H100 once made it the H100s' peer (and them slower, or it
    1.4 times faster); it stays in the class it measured, and the label is reported."""
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    fake = "NVIDIA-H100-80GB-HBM3"
    nodes = {n: labelled(n, fake) for n in ("h100-a", "h100-b", "h100-c", "h200")}
    measured = {n: [device(name=H100, bandwidth=3.0e12)] for n in nodes}
    measured["h200"] = [device(name=H200, bandwidth=4.3e12)]
    status = await profiled(loop, client, nodes, measured)
    entries = entries_of(status)
    assert {c["name"]: c["nodes"] for c in status["classes"]} == {H100: 3, H200: 1}
    assert status["summary"]["slowerThanPeers"] == 0
    assert "gpuClass" not in entries["h200"], "a class of one device has no standing"
    assert {entries[n]["gpuClass"] for n in ("h100-a", "h100-b", "h100-c")} == {H100}
    mismatch = condition_of(entries["h200"], "ProductLabelMismatch")
    assert (mismatch["status"], mismatch["reason"]) == ("True", "LabelDisagrees")
    assert f"{GFD_LABEL}={fake}" in mismatch["message"]
    assert f"measured ({H200})" in mismatch["message"]
    assert not condition_of(entries["h100-a"], "ProductLabelMismatch"), "GFD's form agrees"
    assert status["summary"]["productLabelMismatches"] == 1
    (event,) = [m for reason, m in quiet_events if reason == "ProductLabelMismatch"]
    assert event.startswith(f"node h200: label {GFD_LABEL}={fake} disagrees")
    assert H200 in event


@pytest.mark.asyncio
async def test_a_slow_gpu_labelled_as_a_slower_product_is_still_compared_with_its_own(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    nodes = {n: labelled(n, "NVIDIA-H200") for n in ("a", "b", "c")}
    nodes["hiding"] = labelled("hiding", "NVIDIA-H100-80GB-HBM3")
    measured = {n: [device(name=H200, bandwidth=4.3e12)] for n in nodes}
    measured["hiding"] = [device(name=H200, bandwidth=3.0e12)]
    status = await profiled(loop, client, nodes, measured)
    (only,) = status["classes"]
    assert (only["name"], only["nodes"], only["slowerNodes"]) == (H200, 4, ["hiding"])
    hiding = entries_of(status)["hiding"]
    assert condition_of(hiding, "SlowerThanPeers")["status"] == "True"
    assert condition_of(hiding, "ProductLabelMismatch")["status"] == "True"
    reasons = [reason for reason, _ in quiet_events]
    assert reasons.count("SlowerThanPeers") == reasons.count("ProductLabelMismatch") == 1


@pytest.mark.asyncio
async def test_a_node_gfd_has_not_labelled_yet_is_compared_with_its_measured_peers() -> None:
    """``NVIDIA H200`` (measured, no label yet) and ``NVIDIA-H200`` (GFD's label) were two
    classes, so the unlabelled node was never compared."""
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    nodes = {n: labelled(n, "NVIDIA-H200") for n in ("a", "b", "c")}
    nodes["new"] = labelled("new", None)
    measured = {n: [device(name=H200, bandwidth=4.3e12)] for n in nodes}
    measured["new"] = [device(name=H200, bandwidth=3.0e12)]
    status = await profiled(loop, client, nodes, measured)
    (only,) = status["classes"]
    assert (only["name"], only["nodes"], only["slowerNodes"]) == (H200, 4, ["new"])
    assert "productLabelMismatches" not in status["summary"]
    assert not any(condition_of(e, "ProductLabelMismatch") for e in status["nodes"])


@pytest.mark.asyncio
async def test_every_gpu_of_a_multi_gpu_node_is_compared_and_a_capped_one_is_found(
    quiet_events: list[tuple[str, str]],
) -> None:
    """GPU 2 of node ``capped`` runs at 60% of its bandwidth but needs a smaller minimum batch
    than its siblings, so it is not the node's worst GPU, the only one compared before."""
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10, "gpusPerNode": 4})
    nodes = {n: node(n, gpus=4) for n in ("a", "b", "capped")}

    def gpus(capped: int | None) -> list[CompactDevice]:
        return [
            device(i, name=H200, bandwidth=2.6e12, min_batch=64)
            if i == capped
            else device(i, name=H200, bandwidth=4.3e12, min_batch=128)
            for i in range(4)
        ]

    measured = {"a": gpus(None), "b": gpus(None), "capped": gpus(2)}
    status = await profiled(loop, client, nodes, measured)
    entries = entries_of(status)
    capped = entries["capped"]
    assert capped["gpu"] != "2", "the capped GPU is not the one the node's labels describe"
    assert capped["slowerGpus"] == [2]
    assert capped["relativePerformance"]["bandwidth"]["ratio"] == pytest.approx(2.6 / 4.3, rel=1e-3)
    slower = condition_of(capped, "SlowerThanPeers")
    assert slower["status"] == "True"
    assert slower["message"].startswith("GPU 2: bandwidth 0.60 of the NVIDIA H200 median")
    assert "slowerGpus" not in entries["a"]
    assert condition_of(entries["a"], "SlowerThanPeers")["status"] == "False"
    (only,) = status["classes"]
    assert (only["nodes"], only["devices"], only["slower"]) == (3, 12, 1)
    (event,) = [m for reason, m in quiet_events if reason == "SlowerThanPeers"]
    assert event.startswith("node capped: GPU 2: bandwidth 0.60")
    registry = loop.runtime.metrics.registry
    series = {"profile": "fleet", "node": "capped", "gpu_class": H200}
    assert registry.get_sample_value("roofline_node_slower_than_peers", series) == 1.0
    assert registry.get_sample_value("roofline_node_slower_gpus", series) == 1.0


@pytest.mark.asyncio
async def test_cpu_profiles_are_classed_by_cpu_model_never_by_the_gpu_label() -> None:
    """An EPYC and a Xeon node, both with H200s, were compared as peers of the GPU product, and
    one was flagged; each is its own CPU class, and the GPU label is no cross-check of a CPU."""
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10, "device": "cpu"})
    nodes = {n: labelled(n, "NVIDIA-H200") for n in ("epyc", "xeon")}
    measured = {
        "epyc": [device(name="AMD EPYC 9654 96-Core Processor", bandwidth=4.0e11)],
        "xeon": [device(name="Intel(R) Xeon(R) Platinum 8480+", bandwidth=2.5e11)],
    }
    status = await profiled(loop, client, nodes, measured, backend="cpu")
    names = sorted(c["name"] for c in status["classes"])
    assert names == ["AMD EPYC 9654 96-Core Processor", "Intel(R) Xeon(R) Platinum 8480+"]
    assert {c["device"] for c in status["classes"]} == {"cpu"}
    assert status["summary"]["slowerThanPeers"] == 0
    assert all(not e.get("conditions") for e in status["nodes"])
    assert "productLabelMismatches" not in status["summary"]


@pytest.mark.asyncio
async def test_nodes_are_labelled_with_their_measured_class_and_device_kind() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    nodes = {"a": labelled("a", "NVIDIA-H100-80GB-HBM3"), "b": labelled("b", None)}
    measured = {
        "a": [device(name=H200)],
        "b": [device(name="NVIDIA A100-SXM4-80GB (MIG 1g.10gb)")],
    }
    await profiled(loop, client, nodes, measured)
    a, b = (as_patched(nodes[n], client).labels for n in ("a", "b"))
    # The contract exported Kueue flavors select by: label_safe of status.nodes[].product.
    entries = entries_of(client.statuses[-1])
    assert a["roofline.dev/class"] == label_safe(entries["a"]["product"]) == label_safe(H200)
    assert b["roofline.dev/class"] == label_safe("NVIDIA A100-SXM4-80GB (MIG 1g.10gb)")
    assert a["roofline.dev/class"].startswith("NVIDIA-H200-"), "never the GFD label's value"
    assert a["roofline.dev/device"] == b["roofline.dev/device"] == "gpu"


@pytest.mark.asyncio
async def test_a_cpu_profiles_labels_say_they_describe_the_cpu() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"device": "cpu"})
    nodes = {"a": labelled("a", "NVIDIA-H200")}
    epyc = "AMD EPYC 9654 96-Core Processor"
    await profiled(loop, client, nodes, {"a": [device(name=epyc)]}, backend="cpu")
    labels = as_patched(nodes["a"], client).labels
    assert labels["roofline.dev/device"] == "cpu"
    assert labels["roofline.dev/class"] == label_safe(epyc)
    assert entries_of(client.statuses[-1])["a"]["device"] == "cpu"


@pytest.mark.asyncio
async def test_a_mismatch_is_announced_once_and_not_again_after_a_restart(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    nodes = {"a": labelled("a", "NVIDIA-B200"), "b": labelled("b", "NVIDIA-H200")}
    measured = {n: [device(name=H200)] for n in nodes}
    await profiled(loop, client, nodes, measured)
    await loop.round(nodes, [], {})
    restarted = loop_with(RecordingClient(), {"maxParallel": 10}, status=loop.written)
    await restarted.round({n: as_patched(f, client) for n, f in nodes.items()}, [], {})
    assert [r for r, _ in quiet_events].count("ProductLabelMismatch") == 1
    # Relabelled as measured: the condition goes, and a new mismatch would be news again.
    fixed = {n: as_patched(labelled(n, "NVIDIA-H200"), client) for n in nodes}
    await restarted.round(fixed, [], {})
    assert restarted.mismatched == frozenset()
