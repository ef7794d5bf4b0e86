"""Killing the operator in the middle of a round neither duplicates pods nor loses results.

The operator is killed with SIGKILL (no graceful shutdown, as when its node dies) while profiler
pods are running. Whatever those pods produce while no operator is watching must be collected by
the next operator process, which finds the pods by their labels instead of starting new ones.
"""

from __future__ import annotations

from collections import Counter

import pytest
from harness import Cluster, FaultMode, OperatorFactory, wait_for
from harness.profiles import (
    CRD_PATH,
    GROUP,
    PLURAL,
    example_profile,
    our_labels,
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
