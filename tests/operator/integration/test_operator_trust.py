"""Trust boundaries end to end: what a profiler pod or a tenant reports cannot stall a profile
nor forge a published number.

One profile, three nodes: one pod reports an overflowing result, one 4096 bytes of nesting, one a
sound result; then a tenant's look-alike pod in its own namespace, carrying our labels, the
profile's UID and the name the operator would derive, reports a forged result for the sound
node. The forged node keeps its genuine labels, the two bad nodes fail alone with
``InvalidResult`` and stay unlabelled, and the profile completes.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.harness import Cluster, FaultMode, OperatorProcess, wait_for
from tests.operator.harness.profiles import (
    GROUP,
    PLURAL,
    example_profile,
    node_entries,
    our_labels,
    profile_status,
    profiled,
    state_is,
    wait_for_nodes,
)

from roofline_operator.decide.pods import profiler_pod_name

pytestmark = pytest.mark.usefixtures("shared_operator")

TENANT = "tenant-a"


def look_alike_pod(
    name: str, profile: str, uid: str, node: str, spec_hash: str, runs_on: str
) -> dict[str, Any]:
    """A pod a tenant can create in its own namespace, copying all a profiler pod shows."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": TENANT,
            "labels": {
                "app.kubernetes.io/name": "roofline-profiler",
                "app.kubernetes.io/managed-by": "roofline-operator",
                "roofline.dev/profile": profile,
                "roofline.dev/node": node,
            },
            "annotations": {
                "roofline.dev/profile": profile,
                "roofline.dev/node": node,
                "roofline.dev/attempt": "99",
                "roofline.dev/spec-hash": spec_hash,
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": "RooflineProfile",
                    "name": profile,
                    "uid": uid,
                }
            ],
        },
        "spec": {
            "nodeName": runs_on,
            "restartPolicy": "Never",
            "containers": [{"name": "profiler", "image": "tenant/forger:1", "command": ["true"]}],
        },
    }


def test_forged_overflowing_and_nested_results_fail_alone_and_the_profile_completes(
    shared_cluster: Cluster, shared_operator: OperatorProcess
) -> None:
    suite = "trust"
    selector = {"suite": suite}
    overflow, nested, genuine = f"{suite}-overflow", f"{suite}-nested", f"{suite}-genuine"
    shared_cluster.add_gpu_node(overflow, labels=selector, mode=FaultMode.OVERFLOWING_RESULT)
    shared_cluster.add_gpu_node(nested, labels=selector, mode=FaultMode.DEEP_NESTING)
    shared_cluster.add_gpu_node(genuine, labels=selector, mode=FaultMode.SUCCEED_INSTANTLY)
    # The tenant's own node, which the profile does not select.
    shared_cluster.add_gpu_node(
        f"{suite}-tenant", labels={"pool": TENANT}, mode=FaultMode.FORGED_RESULT
    )
    shared_cluster.create(PLURAL, example_profile(suite, selector, maxAttempts=1), group=GROUP)
    entries = wait_for_nodes(
        shared_cluster, suite, state_is("Failed", "Profiled"), [overflow, nested, genuine]
    )
    assert entries[genuine]["state"] == "Profiled"
    published = our_labels(shared_cluster, genuine)
    assert published["roofline.dev/profile"] == suite

    uid = shared_cluster.read(PLURAL, suite, group=GROUP)["metadata"]["uid"]
    spec_hash = entries[genuine]["cycleHash"]
    name = profiler_pod_name(suite, genuine, spec_hash, 99)
    if shared_cluster.get("namespaces", TENANT) is None:
        shared_cluster.create("namespaces", {"metadata": {"name": TENANT}})
    shared_cluster.create(
        "pods",
        look_alike_pod(name, suite, uid, genuine, spec_hash, f"{suite}-tenant"),
        namespace=TENANT,
    )
    wait_for(
        lambda: (
            (shared_cluster.get("pods", name, TENANT) or {}).get("status", {}).get("phase")
            == "Succeeded"
        ),
        timeout=30,
        what="the look-alike pod to report its forged result",
    )
    # A node added after the forged result is in: once it is profiled, the operator has run
    # rounds that saw every pod it watches.
    sentinel = f"{suite}-sentinel"
    shared_cluster.add_gpu_node(sentinel, labels=selector, mode=FaultMode.SUCCEED_INSTANTLY)
    wait_for_nodes(shared_cluster, suite, profiled, [sentinel], timeout=45)

    assert our_labels(shared_cluster, genuine) == published, "the forged result moved no label"
    entries = node_entries(shared_cluster, suite)
    assert entries[genuine]["attempts"] == 1, "the look-alike pod was not adopted"
    for bad, named in ((overflow, "'bandwidth'"), (nested, "nests deeper")):
        assert (entries[bad]["state"], entries[bad]["reason"]) == ("Failed", "InvalidResult")
        assert named in entries[bad]["message"]
        assert our_labels(shared_cluster, bad) == {}
        node = shared_cluster.read("nodes", bad)
        assert not any(
            k.startswith("record.roofline.dev/") for k in node["metadata"].get("annotations", {})
        )
    summary = profile_status(shared_cluster, suite)["summary"]
    assert (summary["profiled"], summary["failed"], summary["pending"]) == (2, 2, 0)
    wait_for(
        lambda: (
            not shared_cluster.list(
                "pods", "roofline-system", labels={"roofline.dev/profile": suite}
            )
        ),
        timeout=30,
        what="every profiler pod of the profile to be deleted",
    )
    assert shared_cluster.get("pods", name, TENANT) is not None, "the tenant's pod is not ours"
    ignored = shared_operator.sample("roofline_foreign_pods_ignored_total", profile=suite)
    assert ignored in (0.0, 1.0), "a watched look-alike is counted once"
    assert shared_operator.running
