"""Killing the operator in the middle of a round neither duplicates pods nor loses results.

The operator is killed with SIGKILL (no graceful shutdown, as when its node dies) while profiler
pods are running. Whatever those pods produce while no operator is watching must be collected by
the next operator process, which finds the pods by their labels instead of starting new ones.
Results of nodes that the bounded ``status.nodes[]`` omits come back from the nodes' record
annotations.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from tests.operator.harness import Cluster, FaultMode, Kubectl, OperatorFactory, wait_for
from tests.operator.harness.profiles import (
    CRD_PATH,
    GROUP,
    PLURAL,
    example_profile,
    node_entries,
    our_labels,
    profile_status,
    profiled,
    wait_for_nodes,
)

NODES = [f"restart-{i}" for i in range(4)]


def start_slow_round(
    cluster: Cluster, start_operator: OperatorFactory, slow_seconds: float
) -> None:
    cluster.apply_manifest(CRD_PATH)
    cluster.call(setattr, cluster.faults, "slow_seconds", slow_seconds)
    for node in NODES:
        cluster.add_gpu_node(node, labels={"suite": "restart"}, mode=FaultMode.SUCCEED_SLOWLY)
    first = start_operator(cluster)
    cluster.create(
        PLURAL, example_profile("restart", {"suite": "restart"}, maxParallel=4), group=GROUP
    )
    wait_for(
        lambda: len(cluster.runs(NODES)) == len(NODES),
        timeout=30,
        what="every profiler pod to be running",
    )
    first.kill()


def assert_one_pod_per_node_and_every_result(cluster: Cluster) -> None:
    entries = wait_for_nodes(cluster, "restart", profiled, NODES, timeout=45)
    assert Counter(run.node for run in cluster.runs(NODES)) == dict.fromkeys(NODES, 1)
    assert all(entries[node]["attempts"] == 1 for node in NODES)
    wait_for(
        lambda: all(our_labels(cluster, node) for node in NODES),
        timeout=20,
        what="labels on every node",
    )


@pytest.mark.slow
def test_results_of_pods_that_finished_while_the_operator_was_down_are_collected(
    instant_cluster: Cluster, start_operator: OperatorFactory
) -> None:
    start_slow_round(instant_cluster, start_operator, slow_seconds=2.0)
    wait_for(
        lambda: all(run.ended for run in instant_cluster.runs(NODES)),
        timeout=30,
        what="the pods to finish while no operator runs",
    )
    start_operator(instant_cluster)
    assert_one_pod_per_node_and_every_result(instant_cluster)


@pytest.mark.slow
def test_pods_still_running_at_restart_are_adopted_not_duplicated(
    instant_cluster: Cluster, start_operator: OperatorFactory
) -> None:
    start_slow_round(instant_cluster, start_operator, slow_seconds=6.0)
    start_operator(instant_cluster)
    assert any(run.ended is None for run in instant_cluster.runs(NODES))
    assert_one_pod_per_node_and_every_result(instant_cluster)


BOUNDED = [f"bounded-{i}" for i in range(5)]


def summary_of(cluster: Cluster, name: str) -> dict[str, Any]:
    found: dict[str, Any] = profile_status(cluster, name).get("summary") or {}
    return found


@pytest.mark.slow
def test_a_restarted_operator_rebuilds_records_of_unlisted_nodes_from_their_annotations(
    instant_cluster: Cluster, start_operator: OperatorFactory, kubectl: Kubectl
) -> None:
    instant_cluster.apply_manifest(CRD_PATH)
    for node in BOUNDED:
        instant_cluster.add_gpu_node(node, labels={"suite": "bounded"})
    first = start_operator(instant_cluster, "--status-max-nodes", "2")
    instant_cluster.create(
        PLURAL, example_profile("bounded", {"suite": "bounded"}, maxParallel=5), group=GROUP
    )
    wait_for(
        lambda: summary_of(instant_cluster, "bounded").get("profiled") == len(BOUNDED),
        timeout=45,
        what="every node profiled",
    )
    summary = summary_of(instant_cluster, "bounded")
    assert (summary["listed"], summary["omitted"]) == (2, 3)
    assert list(node_entries(instant_cluster, "bounded")) == BOUNDED[:2]
    published = kubectl(
        "get",
        "node",
        BOUNDED[4],
        "-o",
        r"jsonpath={.metadata.annotations.record\.roofline\.dev/bounded}",
    ).stdout
    assert json.loads(published)["ridgePoint"] > 0
    first.kill()
    runs_before = len(instant_cluster.runs(BOUNDED))

    second = start_operator(instant_cluster, "--status-max-nodes", "2")
    # Long enough for the restarted operator's rounds, which would re-profile unknown nodes.
    wait_for(
        lambda: (
            len(
                [
                    labels
                    for labels, _ in second.samples("roofline_profile_timestamp_seconds")
                    if labels.get("profile") == "bounded"
                ]
            )
            == len(BOUNDED)
        ),
        timeout=30,
        what="the restarted operator to know every node's result",
    )
    assert len(instant_cluster.runs(BOUNDED)) == runs_before, "no node was profiled again"
    assert summary_of(instant_cluster, "bounded")["profiled"] == len(BOUNDED)
