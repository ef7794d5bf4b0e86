"""A user's first day: install the CRD, apply the example, read results where users read them.

This is the one suite that runs the real profiler in the profiler pods (small and quick on this
CPU), so what is checked here is the whole chain: pod command, termination message, parsing,
status, printer columns, node labels and Prometheus gauges. The profiles say ``device: cpu``:
what the pods measure is this machine's CPU, and a GPU profile's pod fails here
(``test_operator_devices.py``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import Cluster, Kubectl, OperatorFactory, wait_for
from tests.operator.harness.profiles import (
    CRD_PATH,
    ON_CPU,
    example_profile,
    node_entries,
    our_labels,
    profiled,
    wait_for_nodes,
    write_manifest,
)

from roofline_operator.core.names import FailureReason
from roofline_profiler.wire.compact_decode import decode_compact

NODES = ["gpu-a", "gpu-b"]
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
PER_GPU_GAUGES = (
    "roofline_memory_bandwidth_bytes_per_second",
    "roofline_peak_flops_per_second",
    "roofline_ridge_point",
    "roofline_recommended_min_batch",
)


@pytest.mark.slow
def test_applying_the_example_profiles_every_node_with_the_real_profiler(
    cluster: Cluster, kubectl: Kubectl, start_operator: OperatorFactory, tmp_path: Path
) -> None:
    assert "created" in kubectl("apply", "-f", str(CRD_PATH)).stdout
    for node in NODES:
        cluster.add_gpu_node(node, labels={"pool": "inference"})
    cluster.add_gpu_node("elsewhere", gpus=0)  # another pool: the selector passes it over
    operator = start_operator(cluster)
    profile = example_profile("h200-decode", {"pool": "inference"}, **ON_CPU)
    manifest = write_manifest(tmp_path, profile)
    assert "created" in kubectl("apply", "-f", str(manifest)).stdout

    entries = wait_for_nodes(
        cluster, "h200-decode", profiled, NODES, timeout=90, what="real profiles"
    )
    assert set(entries) == set(NODES)

    rows = wait_for(
        lambda: [r for r in kubectl.table("rooflineprofiles") if r["READY"] == "True"],
        timeout=20,
        what="kubectl get to show Ready",
    )
    row = rows[0]
    assert (row["NAME"], row["MATCHED"], row["PROFILED"], row["FAILED"]) == (
        "h200-decode",
        "2",
        "2",
        "0",
    )
    assert float(row["RIDGE"]) > 0
    assert len(row["RIDGE"].partition(".")[2]) <= 2, "ridge points show at most two decimals"
    as_json = kubectl.json("get", "rp", "h200-decode")
    assert as_json["status"]["summary"]["profiled"] == 2
    assert as_json["status"]["observedGeneration"] == as_json["metadata"]["generation"]
    assert int(row["MIN-BATCH"]) >= 1

    for node in NODES:
        labels = our_labels(cluster, node)
        assert labels["roofline.dev/profile"] == "h200-decode"
        assert float(labels["roofline.dev/ridge-point"]) > 0
        assert int(labels["roofline.dev/min-batch"]) == entries[node]["recommendedMinBatch"]
        assert all(LABEL_VALUE.fullmatch(v) for v in labels.values())
    assert our_labels(cluster, "elsewhere") == {}
    selected = kubectl.json("get", "nodes", "-l", "roofline.dev/profile=h200-decode")
    assert sorted(n["metadata"]["name"] for n in selected["items"]) == NODES
    shown = kubectl("get", "nodes", "--show-labels").stdout
    assert f"roofline.dev/min-batch={entries[NODES[0]]['recommendedMinBatch']}" in shown

    for gauge in PER_GPU_GAUGES:
        samples = {s[0]["node"]: s for s in operator.samples(gauge)}
        assert set(samples) >= set(NODES), gauge
        assert samples[NODES[0]][0]["profile"] == "h200-decode"
        assert samples[NODES[0]][0]["gpu"] == "0"
        assert samples[NODES[0]][0]["dtype"] == "float32"
    ridge = operator.sample("roofline_ridge_point", node=NODES[0])
    assert ridge == pytest.approx(entries[NODES[0]]["ridgePoint"], rel=1e-3)
    steps = [
        s for s in operator.samples("roofline_decode_step_seconds") if s[0]["node"] == NODES[0]
    ]
    assert sorted(int(s[0]["batch"]) for s in steps) == [1, 2, 4, 8]
    assert operator.sample("roofline_profile_nodes", profile="h200-decode", state="profiled") == 2
    assert operator.sample("roofline_profiler_pods_launched_total", profile="h200-decode") == 2
    assert (
        operator.sample("roofline_node_profile_failed", profile="h200-decode", node=NODES[0]) == 0
    )
    profiled_at = operator.sample(
        "roofline_profile_timestamp_seconds", profile="h200-decode", node=NODES[0]
    )
    assert profiled_at is not None
    assert abs(profiled_at - time.time()) < 600
    duration = operator.sample(
        "roofline_profile_duration_seconds", profile="h200-decode", node=NODES[0]
    )
    assert duration is not None
    assert duration > 0
    # Counters start at zero for every profile (and every failure reason), so alerts see 0.
    assert operator.sample("roofline_reconcile_errors_total", profile="h200-decode") == 0
    for reason in FailureReason:
        labels = {"profile": "h200-decode", "reason": reason.value}
        assert operator.sample("roofline_profile_failures_total", **labels) == 0


@pytest.mark.slow
def test_profiler_pods_are_locked_down_pinned_and_carry_a_real_result(
    cluster: Cluster, start_operator: OperatorFactory, tmp_path: Path
) -> None:
    cluster.apply_manifest(CRD_PATH)
    cluster.add_gpu_node("gpu-solo", gpus=2)
    start_operator(cluster)
    locked = example_profile("locked", **ON_CPU)
    cluster.create("rooflineprofiles", locked, group="roofline.dev")

    def finished_pod() -> dict[str, Any] | None:
        pods = cluster.finished_pods(labels={"roofline.dev/profile": "locked"})
        done = [p for p in pods if p["status"]["phase"] == "Succeeded"]
        return done[0] if done else None

    pod = wait_for(finished_pod, timeout=90, what="a finished profiler pod")
    spec = pod["spec"]
    container = spec["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {}), "a CPU profile"
    command = container["command"]
    assert command[command.index("--device") + 1] == "cpu"
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "RooflineProfile"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["gpu-solo"]
    message = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    assert decode_compact(message).shape_k == 512
    assert decode_compact(message).backend == "cpu"
    wait_for_nodes(cluster, "locked", profiled, ["gpu-solo"], timeout=30)
    assert node_entries(cluster, "locked")["gpu-solo"]["gpus"] == 1
