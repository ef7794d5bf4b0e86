"""The operator on a real API server, as the chart's service account: a user's day.

The happy path with one real profiler run, a failing node, and deletion with finalizer cleanup;
every request the operator makes goes through real RBAC (a 403 fails the test, see conftest).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.operator.harness import FaultMode, Kubectl, wait_for
from tests.operator.harness.profiles import (
    ON_CPU,
    example_profile,
    node_entries,
    our_labels,
    profiled,
    state_is,
    wait_for_nodes,
    write_manifest,
)
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.realsuite import PROFILER_NAMESPACE, RealOperators, labels_of
from tests.operator.harness.releases import Release

from roofline_operator.decide.labels import label_safe
from roofline_profiler.wire.compact_decode import decode_compact


def test_the_example_profiles_nodes_with_labels_status_columns_and_metrics(
    real_cluster: RealCluster,
    node_release: Release,
    real_operators: RealOperators,
    kubectl: Kubectl,
    tmp_path: Path,
) -> None:
    nodes = ["real-gpu-a", "real-gpu-b"]
    pool = {"pool": "real"}
    real_cluster.add_gpu_node(nodes[0], mode=FaultMode.RUN_COMMAND, labels=pool)
    real_cluster.add_gpu_node(nodes[1], labels=pool)
    real_cluster.add_gpu_node("real-cpu-only", gpus=0)  # another pool: passed over
    operator = real_operators.start(node_release)
    # The real profiler measures this machine's CPU, which the profile says explicitly.
    manifest = write_manifest(tmp_path, example_profile("real-decode", pool, **ON_CPU))
    assert "created" in kubectl("apply", "-f", str(manifest)).stdout

    entries = wait_for_nodes(real_cluster, "real-decode", profiled, nodes, timeout=180)
    assert set(entries) == set(nodes)
    rows = wait_for(
        lambda: [r for r in kubectl.table("rooflineprofiles") if r["READY"] == "True"],
        timeout=30,
        what="kubectl get rooflineprofiles to show Ready",
    )
    row = rows[0]
    assert (row["NAME"], row["MATCHED"], row["PROFILED"], row["FAILED"]) == (
        "real-decode",
        "2",
        "2",
        "0",
    )
    assert float(row["RIDGE"]) > 0
    assert int(row["MIN-BATCH"]) >= 1
    as_json = kubectl.json("get", "rp", "real-decode")
    assert as_json["status"]["observedGeneration"] == as_json["metadata"]["generation"]
    assert as_json["metadata"]["finalizers"] == ["roofline.dev/cleanup"]

    for node in nodes:
        labels = our_labels(real_cluster, node)
        assert labels["roofline.dev/profile"] == "real-decode"
        assert int(labels["roofline.dev/min-batch"]) == entries[node]["recommendedMinBatch"]
        # A CPU profile: the labels say so, and the class is the CPU model each pod measured.
        assert entries[node]["device"] == "cpu"
        assert labels["roofline.dev/device"] == "cpu"
        assert labels["roofline.dev/class"] == label_safe(entries[node]["product"])
        by_class = kubectl.json(
            "get", "nodes", "-l", f"roofline.dev/class={labels['roofline.dev/class']}"
        )
        assert node in [n["metadata"]["name"] for n in by_class["items"]]
    assert our_labels(real_cluster, "real-cpu-only") == {}
    selected = kubectl.json("get", "nodes", "-l", "roofline.dev/profile=real-decode")
    assert sorted(n["metadata"]["name"] for n in selected["items"]) == nodes

    real_run = next(p for p in real_cluster.finished_pods() if p["spec"]["nodeName"] == nodes[0])
    message = real_run["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    assert decode_compact(message).shape_k == 512, "the real profiler's termination message"
    assert real_run["spec"]["automountServiceAccountToken"] is False

    ridge = operator.sample("roofline_ridge_point", node=nodes[0])
    assert ridge == pytest.approx(entries[nodes[0]]["ridgePoint"], rel=1e-3)
    assert operator.sample("roofline_profile_nodes", profile="real-decode", state="profiled") == 2
    assert operator.sample("roofline_profiler_pods_launched_total", profile="real-decode") == 2
    stamp = operator.sample(
        "roofline_profile_timestamp_seconds", profile="real-decode", node=nodes[1]
    )
    assert stamp is not None
    assert abs(stamp - time.time()) < 600
    wait_for(
        lambda: not real_cluster.list("pods", PROFILER_NAMESPACE),
        timeout=30,
        what="finished profiler pods to be deleted",
    )


def test_a_failing_node_is_reported_and_the_others_are_profiled(
    real_cluster: RealCluster, node_release: Release, real_operators: RealOperators
) -> None:
    real_cluster.add_gpu_node("real-ok")
    real_cluster.add_gpu_node("real-broken", mode=FaultMode.EXIT_NONZERO)
    real_cluster.add_gpu_node("real-full", mode=FaultMode.NEVER_SCHEDULE)
    operator = real_operators.start(node_release)
    profile = example_profile(
        "real-failing", maxAttempts=1, pendingTimeoutSeconds=8, retryBackoffSeconds=1
    )
    real_cluster.create("rooflineprofiles", profile, group="roofline.dev")

    wait_for_nodes(real_cluster, "real-failing", profiled, ["real-ok"], timeout=60)
    wait_for_nodes(real_cluster, "real-failing", state_is("Failed"), ["real-broken"], timeout=60)
    entries = wait_for_nodes(
        real_cluster, "real-failing", state_is("Unschedulable"), ["real-full"], timeout=60
    )
    assert entries["real-broken"]["reason"] == "PodFailed"
    assert "device failed" in entries["real-broken"]["message"]
    assert entries["real-full"]["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in entries["real-full"]["message"]
    assert our_labels(real_cluster, "real-broken") == {}
    assert (
        operator.sample("roofline_node_profile_failed", profile="real-failing", node="real-broken")
        == 1
    )


def test_deleting_a_profile_removes_its_labels_pods_and_finalizer(
    real_cluster: RealCluster,
    node_release: Release,
    real_operators: RealOperators,
    kubectl: Kubectl,
) -> None:
    real_cluster.add_gpu_node("real-done")
    real_cluster.add_gpu_node("real-hanging", mode=FaultMode.HANG)
    real_operators.start(node_release)
    real_cluster.create("rooflineprofiles", example_profile("real-gone"), group="roofline.dev")
    wait_for_nodes(real_cluster, "real-gone", profiled, ["real-done"], timeout=60)
    wait_for(
        lambda: [
            p
            for p in real_cluster.list("pods", PROFILER_NAMESPACE)
            if p["spec"].get("nodeName") == "real-hanging"
            and p.get("status", {}).get("phase") == "Running"
        ],
        timeout=60,
        what="the hanging node's pod to run",
    )
    labels_before = labels_of(real_cluster, "real-done")
    assert labels_before["roofline.dev/profile"] == "real-gone"

    kubectl("delete", "rooflineprofile", "real-gone", "--wait=true", "--timeout=60s")
    assert real_cluster.get("rooflineprofiles", "real-gone", group="roofline.dev") is None
    assert our_labels(real_cluster, "real-done") == {}
    assert labels_of(real_cluster, "real-done")["kubernetes.io/hostname"] == "real-done"
    wait_for(
        lambda: not real_cluster.list("pods", PROFILER_NAMESPACE),
        timeout=60,
        what="the profile's pods (the running one included) to be deleted",
    )
    assert node_entries(real_cluster, "real-gone") == {}
