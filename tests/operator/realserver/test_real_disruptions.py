"""Disruptions a real cluster has and the emulator only imitates: the operator killed mid-round,
the API server restarted mid-round, and a watch that expires because etcd compacted its history
(``410 Gone`` on resume). Nothing may be lost (every node ends profiled and labelled) and nothing
done twice (one profiler pod per node).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter

from tests.operator.harness import FaultMode, wait_for
from tests.operator.harness.processes import OperatorProcess
from tests.operator.harness.profiles import example_profile, our_labels, profiled, wait_for_nodes
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.realsuite import PROFILER_NAMESPACE, RealOperators
from tests.operator.harness.releases import Release


def running_pods(cluster: RealCluster) -> list[str]:
    return [
        p["spec"]["nodeName"]
        for p in cluster.list("pods", PROFILER_NAMESPACE)
        if p.get("status", {}).get("phase") == "Running"
    ]


def runs_per_node(cluster: RealCluster, nodes: list[str]) -> Counter[str]:
    return Counter(r.node for r in cluster.runs(nodes))


def start_a_round_on_slow_nodes(
    cluster: RealCluster,
    operators: RealOperators,
    release: Release,
    profile: str,
    nodes: list[str],
    slow_seconds: float,
) -> OperatorProcess:
    """``nodes`` whose profiler pods run ``slow_seconds``, an operator, and a profile over all of
    them at once: returns the operator once every node's pod runs, mid-round."""
    cluster.faults.slow_seconds = slow_seconds
    for node in nodes:
        cluster.add_gpu_node(node, mode=FaultMode.SUCCEED_SLOWLY)
    operator = operators.start(release)
    spec = example_profile(profile, maxParallel=len(nodes))
    cluster.create("rooflineprofiles", spec, group="roofline.dev")
    wait_for(
        lambda: len(running_pods(cluster)) == len(nodes),
        timeout=60,
        what=f"{len(nodes)} running pods",
    )
    return operator


def test_an_operator_killed_mid_round_adopts_its_pods_and_profiles_each_node_once(
    real_cluster: RealCluster, node_release: Release, real_operators: RealOperators
) -> None:
    nodes = [f"real-restart-{i}" for i in range(3)]
    first = start_a_round_on_slow_nodes(
        real_cluster, real_operators, node_release, "real-restart", nodes, 4.0
    )
    first.kill()
    real_operators.start(node_release)
    wait_for_nodes(real_cluster, "real-restart", profiled, nodes, timeout=90)
    assert runs_per_node(real_cluster, nodes) == Counter(dict.fromkeys(nodes, 1))
    assert all(our_labels(real_cluster, n)["roofline.dev/profile"] == "real-restart" for n in nodes)


def test_an_api_server_restarted_mid_round_loses_no_result(
    real_cluster: RealCluster, node_release: Release, real_operators: RealOperators
) -> None:
    nodes = [f"real-apiserver-{i}" for i in range(3)]
    operator = start_a_round_on_slow_nodes(
        real_cluster, real_operators, node_release, "real-outage", nodes, 3.0
    )
    real_cluster.control_plane.restart_apiserver()
    wait_for_nodes(real_cluster, "real-outage", profiled, nodes, timeout=120)
    assert runs_per_node(real_cluster, nodes) == Counter(dict.fromkeys(nodes, 1))
    assert operator.running, "the operator rode out the outage without exiting"
    assert operator.sample("roofline_profiler_pods_launched_total", profile="real-outage") == 3


def _watch_answer(cluster: RealCluster, resource_version: str) -> tuple[int, dict[str, object]]:
    """The first thing a node watch from ``resource_version`` answers: (HTTP code, event)."""
    api = cluster.api
    request = urllib.request.Request(
        f"{api.server}/api/v1/nodes?watch=1&resourceVersion={resource_version}&timeoutSeconds=5"
    )
    try:
        with urllib.request.urlopen(request, context=api.context, timeout=30) as rsp:
            return rsp.status, json.loads(rsp.readline() or b"{}")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"{}")


def test_a_watch_expired_by_compaction_is_relisted_and_nothing_is_lost_or_repeated(
    real_cluster: RealCluster, node_release: Release, real_operators: RealOperators
) -> None:
    first, later = "real-compact-a", "real-compact-b"
    real_cluster.add_gpu_node(first)
    real_operators.start(node_release)
    real_cluster.create("rooflineprofiles", example_profile("real-compact"), group="roofline.dev")
    wait_for_nodes(real_cluster, "real-compact", profiled, [first], timeout=60)
    old = real_cluster.list_metadata("nodes")["resourceVersion"]
    for index in range(20):  # history the operator does not watch, past its last events
        real_cluster.create(
            "configmaps", {"metadata": {"name": f"churn-{index}"}}, namespace=PROFILER_NAMESPACE
        )
    real_cluster.control_plane.compact_etcd()
    # Every watch connection drops; on resume the server finds their resourceVersions compacted.
    real_cluster.control_plane.restart_apiserver()
    code, event = _watch_answer(real_cluster, old)
    status = event.get("object", event) if code == 200 else event
    assert (code, status.get("code") if isinstance(status, dict) else None) in (
        (200, 410),
        (410, 410),
    ), f"a watch from before the compaction is expired: {code} {event}"

    real_cluster.add_gpu_node(later)
    wait_for_nodes(real_cluster, "real-compact", profiled, [first, later], timeout=90)
    assert runs_per_node(real_cluster, [first, later]) == Counter({first: 1, later: 1})
    assert our_labels(real_cluster, later)["roofline.dev/profile"] == "real-compact"
