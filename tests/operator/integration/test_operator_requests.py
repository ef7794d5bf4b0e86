"""What a profiling round costs the API server: at most three requests per node.

A thousand-node fleet profiled at once must not turn the operator into a load on the control
plane. Per node a round needs a pod create and a label patch; finished pods go by one
DELETE-collection per hundred nodes, which leaves room for the fixed cost of a round (Kopf's
finalizer, the status patch, an Event) even on a small cluster.
"""

from __future__ import annotations

from tests.operator.harness import Cluster, OperatorFactory, wait_for
from tests.operator.harness.profiles import (
    CRD_PATH,
    GROUP,
    PLURAL,
    condition,
    example_profile,
    our_labels,
    profile_status,
    profiled,
    wait_for_nodes,
)

NODES = [f"thrifty-{i}" for i in range(10)]
#: The operator's watches; requests are counted only once all of them are open.
WATCHED = ("rooflineprofiles", "nodes", "pods")
MAX_REQUESTS_PER_NODE = 3


def test_profiling_ten_nodes_costs_at_most_three_requests_per_node(
    instant_cluster: Cluster, start_operator: OperatorFactory
) -> None:
    instant_cluster.apply_manifest(CRD_PATH)
    for node in NODES:
        instant_cluster.add_gpu_node(node, labels={"suite": "thrifty"})
    start_operator(instant_cluster)
    wait_for(
        lambda: all(instant_cluster.request_counts()[("watch", r)] for r in WATCHED),
        timeout=30,
        what="the operator's watches",
    )
    instant_cluster.reset_request_counts()
    profile = example_profile("thrifty", {"suite": "thrifty"}, maxParallel=len(NODES))
    instant_cluster.create(PLURAL, profile, group=GROUP)

    wait_for_nodes(instant_cluster, "thrifty", profiled, NODES, timeout=60)
    wait_for(
        lambda: (
            all(our_labels(instant_cluster, n) for n in NODES)
            and not instant_cluster.list("pods", labels={"roofline.dev/profile": "thrifty"})
            and condition(profile_status(instant_cluster, "thrifty"), "Ready").get("status")
            == "True"
        ),
        timeout=30,
        what="labels on every node, no pod left, and Ready",
    )
    counts = instant_cluster.request_counts()
    calls = {key: n for key, n in counts.items() if key[0] != "watch"}
    assert sum(calls.values()) <= MAX_REQUESTS_PER_NODE * len(NODES), calls
    assert counts[("create", "pods")] == len(NODES)
    assert counts[("delete", "pods")] == 0, "finished pods are deleted by collection"
    assert 1 <= counts[("deletecollection", "pods")] <= 2
