"""Keeping results current: nodes come and go, specs change, results age, profiles are deleted.

All tests share one cluster with instant synthetic results and one operator process. Each test
owns its nodes (label ``suite: <test>``) and its profile, so they cannot see one another.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import Cluster, FaultMode, Kubectl, SyntheticGpu, wait_for
from tests.operator.harness.kubelet import peak_concurrency
from tests.operator.harness.profiles import (
    GROUP,
    PLURAL,
    condition,
    example_profile,
    node_entries,
    our_labels,
    profile_status,
    profiled,
    wait_for_nodes,
    write_manifest,
)

from roofline_operator.decide.labels import label_safe

pytestmark = pytest.mark.usefixtures("shared_operator")


def make_nodes(cluster: Cluster, suite: str, count: int, **kwargs: Any) -> list[str]:
    names = [f"{suite}-{i}" for i in range(count)]
    for name in names:
        cluster.add_gpu_node(name, labels={"suite": suite}, **kwargs)
    return names


def make_profile(cluster: Cluster, suite: str, **spec: Any) -> dict[str, Any]:
    return cluster.create(PLURAL, example_profile(suite, {"suite": suite}, **spec), group=GROUP)


def runs_per_node(cluster: Cluster, nodes: list[str]) -> Counter[str]:
    return Counter(run.node for run in cluster.runs(nodes))


def test_a_new_matching_node_is_profiled_without_reprofiling_the_others(
    shared_cluster: Cluster,
) -> None:
    nodes = make_nodes(shared_cluster, "grow", 2)
    make_profile(shared_cluster, "grow")
    wait_for_nodes(shared_cluster, "grow", profiled, nodes)
    newcomer = make_nodes(
        shared_cluster,
        "grow-late",
        1,
    )[0]
    shared_cluster.patch("nodes", newcomer, {"metadata": {"labels": {"suite": "grow"}}})
    wait_for_nodes(shared_cluster, "grow", profiled, [*nodes, newcomer])
    assert runs_per_node(shared_cluster, [*nodes, newcomer]) == dict.fromkeys([*nodes, newcomer], 1)
    assert profile_status(shared_cluster, "grow")["summary"]["matched"] == 3
    assert our_labels(shared_cluster, newcomer)["roofline.dev/profile"] == "grow"


def test_a_node_that_stops_matching_leaves_status_and_loses_our_labels(
    shared_cluster: Cluster,
) -> None:
    nodes = make_nodes(shared_cluster, "shrink", 2)
    make_profile(shared_cluster, "shrink")
    wait_for_nodes(shared_cluster, "shrink", profiled, nodes)
    assert our_labels(shared_cluster, nodes[1])
    shared_cluster.patch("nodes", nodes[1], {"metadata": {"labels": {"suite": "elsewhere"}}})
    wait_for(
        lambda: set(node_entries(shared_cluster, "shrink")) == {nodes[0]},
        timeout=20,
        what="the unmatched node to leave status",
    )
    wait_for(
        lambda: our_labels(shared_cluster, nodes[1]) == {},
        timeout=20,
        what="our labels to be removed from the unmatched node",
    )
    assert shared_cluster.read("nodes", nodes[1])["metadata"]["labels"]["suite"] == "elsewhere"
    assert profile_status(shared_cluster, "shrink")["summary"]["matched"] == 1


def test_a_deleted_node_leaves_status(shared_cluster: Cluster) -> None:
    nodes = make_nodes(shared_cluster, "vanish", 2)
    make_profile(shared_cluster, "vanish")
    wait_for_nodes(shared_cluster, "vanish", profiled, nodes)
    shared_cluster.delete("nodes", nodes[0])
    wait_for(
        lambda: set(node_entries(shared_cluster, "vanish")) == {nodes[1]},
        timeout=20,
        what="the deleted node to leave status",
    )
    assert profile_status(shared_cluster, "vanish")["summary"]["profiled"] == 1


def test_a_spec_change_that_affects_measurements_reprofiles_every_node(
    shared_cluster: Cluster,
) -> None:
    nodes = make_nodes(shared_cluster, "respec", 2)
    make_profile(shared_cluster, "respec")
    before = wait_for_nodes(shared_cluster, "respec", profiled, nodes)
    shared_cluster.patch(PLURAL, "respec", {"spec": {"batches": [1, 2, 4, 8, 16]}}, group=GROUP)
    after = wait_for_nodes(
        shared_cluster,
        "respec",
        lambda e: profiled(e) and e["specHash"] != before[e["name"]]["specHash"],
        nodes,
        what="new results for the new spec",
    )
    assert runs_per_node(shared_cluster, nodes) == dict.fromkeys(nodes, 2)
    assert all(after[n]["specHash"] != before[n]["specHash"] for n in nodes)


def test_a_spec_change_that_affects_no_measurement_does_not_reprofile(
    shared_cluster: Cluster,
) -> None:
    nodes = make_nodes(shared_cluster, "tune", 2)
    make_profile(shared_cluster, "tune")
    wait_for_nodes(shared_cluster, "tune", profiled, nodes)
    changed = shared_cluster.patch(PLURAL, "tune", {"spec": {"maxParallel": 7}}, group=GROUP)
    generation = changed["metadata"]["generation"]
    wait_for(
        lambda: profile_status(shared_cluster, "tune").get("observedGeneration") == generation,
        timeout=20,
        what="the operator to observe the new generation",
    )
    assert runs_per_node(shared_cluster, nodes) == dict.fromkeys(nodes, 1)


def test_reprofile_interval_reprofiles_a_node_whose_result_has_aged(
    shared_cluster: Cluster,
) -> None:
    nodes = make_nodes(shared_cluster, "aged", 1)
    shared_cluster.set_result_age(nodes[0], 57)  # measured 57 s ago: due again 3 s from now
    make_profile(shared_cluster, "aged", reprofileInterval="1m", timeoutSeconds=30)
    first = wait_for_nodes(shared_cluster, "aged", profiled, nodes)[nodes[0]]["profiledTime"]
    wait_for(
        lambda: runs_per_node(shared_cluster, nodes)[nodes[0]] >= 2,
        timeout=30,
        what="a second run once the result is older than reprofileInterval",
    )
    wait_for_nodes(
        shared_cluster,
        "aged",
        lambda e: profiled(e) and e["profiledTime"] != first,
        nodes,
        what="a newer profiledTime",
    )


def test_deleting_the_profile_removes_its_pods_and_our_labels(
    shared_cluster: Cluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    done = make_nodes(shared_cluster, "bye", 1)[0]
    busy = make_nodes(shared_cluster, "bye-busy", 1, mode=FaultMode.HANG)[0]
    shared_cluster.patch("nodes", busy, {"metadata": {"labels": {"suite": "bye"}}})
    manifest = write_manifest(tmp_path, example_profile("bye", {"suite": "bye"}))
    kubectl("apply", "-f", str(manifest))
    wait_for_nodes(shared_cluster, "bye", profiled, [done])
    wait_for(lambda: shared_cluster.runs([busy]), timeout=20, what="the hanging pod to run")
    found = shared_cluster.read(PLURAL, "bye", group=GROUP)
    assert found["metadata"].get("finalizers")
    kubectl("delete", "-f", str(manifest), "--wait=false")
    wait_for(
        lambda: shared_cluster.get(PLURAL, "bye", group=GROUP) is None,
        timeout=30,
        what="the finalizer to be released",
    )
    wait_for(
        lambda: not shared_cluster.list("pods", labels={"roofline.dev/profile": "bye"}),
        timeout=30,
        what="the profile's pods to be deleted",
    )
    wait_for(
        lambda: our_labels(shared_cluster, done) == {}, timeout=30, what="our labels to be removed"
    )
    assert all(run.ended is not None for run in shared_cluster.runs([busy]))


def test_names_longer_than_a_label_value_are_profiled_labelled_and_cleaned_up(
    shared_cluster: Cluster,
) -> None:
    # Two node names that differ only past the 63rd character, and a profile name as long.
    stem = "long-names-ip-10-0-0-1.eu-west-1.compute.internal.example-cluster.h200-pool"
    nodes = [f"{stem}.node-{i}" for i in range(2)]
    for name in nodes:
        shared_cluster.add_gpu_node(name, labels={"suite": "long-names"})
    name = "long-names-" + "h200-decode-" * 6 + "bf16"
    assert min(len(n) for n in [*nodes, name]) > 63
    shared_cluster.create(PLURAL, example_profile(name, {"suite": "long-names"}), group=GROUP)
    wait_for_nodes(shared_cluster, name, profiled, nodes)
    wait_for(
        lambda: all(our_labels(shared_cluster, n) for n in nodes),
        timeout=30,
        what="both long-named nodes to be labelled",
    )
    for node in nodes:
        labels = our_labels(shared_cluster, node)
        assert labels["roofline.dev/profile"] == label_safe(name)
        assert labels["roofline.dev/min-batch"].isdigit()
    assert runs_per_node(shared_cluster, nodes) == dict.fromkeys(nodes, 1)
    finished = shared_cluster.finished_pods(labels={"roofline.dev/profile": label_safe(name)})
    assert {p["metadata"]["annotations"]["roofline.dev/node"] for p in finished} == set(nodes)
    wait_for(
        lambda: not shared_cluster.list("pods", labels={"roofline.dev/profile": label_safe(name)}),
        timeout=30,
        what="the finished pods to be deleted",
    )
    shared_cluster.delete(PLURAL, name, group=GROUP)
    wait_for(
        lambda: not any(our_labels(shared_cluster, n) for n in nodes),
        timeout=30,
        what="our labels to be removed from the long-named nodes",
    )


def test_max_parallel_bounds_how_many_nodes_are_profiled_at_once(shared_cluster: Cluster) -> None:
    nodes = make_nodes(shared_cluster, "bounded", 5, mode=FaultMode.SUCCEED_SLOWLY)
    shared_cluster.call(setattr, shared_cluster.faults, "slow_seconds", 1.0)
    make_profile(shared_cluster, "bounded", maxParallel=2)
    wait_for_nodes(shared_cluster, "bounded", profiled, nodes, timeout=60)
    assert peak_concurrency(shared_cluster.runs(nodes)) == 2


def test_a_node_selected_by_two_profiles_is_labelled_by_the_older_one(
    shared_cluster: Cluster,
) -> None:
    node = make_nodes(shared_cluster, "shared", 1)[0]
    make_profile(shared_cluster, "shared")
    wait_for_nodes(shared_cluster, "shared", profiled, [node])
    shared_cluster.create(PLURAL, example_profile("shared-late", {"suite": "shared"}), group=GROUP)
    conflict = wait_for(
        lambda: (
            condition(profile_status(shared_cluster, "shared-late"), "LabelConflict").get("status")
            == "True"
            and condition(profile_status(shared_cluster, "shared-late"), "LabelConflict")
        ),
        timeout=30,
        what="the newer profile to report LabelConflict",
    )
    assert node in conflict["message"]
    assert our_labels(shared_cluster, node)["roofline.dev/profile"] == "shared"


def test_a_multi_gpu_node_is_labelled_by_its_worst_gpu(shared_cluster: Cluster) -> None:
    fast = SyntheticGpu(bandwidth_bytes_per_second=4.8e12, peak_flops_per_second=1e14)
    slow = SyntheticGpu(bandwidth_bytes_per_second=1.2e12, peak_flops_per_second=1e14)
    node = make_nodes(shared_cluster, "mixed", 1, gpus=2, synthetic_gpus=(fast, slow))[0]
    make_profile(
        shared_cluster,
        "mixed",
        dtype="bfloat16",
        batches=[1, 4, 16, 32, 64, 128, 256],
        gpusPerNode=0,
    )
    entry = wait_for_nodes(shared_cluster, "mixed", profiled, [node])[node]
    devices = {d["index"]: d for d in entry["devices"]}
    assert devices[0]["recommendedMinBatch"] < devices[1]["recommendedMinBatch"]
    labels = our_labels(shared_cluster, node)
    assert labels["roofline.dev/min-batch"] == str(devices[1]["recommendedMinBatch"])
    assert entry["recommendedMinBatch"] == devices[1]["recommendedMinBatch"]


@pytest.mark.parametrize(
    "node_kwargs",
    [
        pytest.param({"ready": False}, id="not-ready"),
        pytest.param({"unschedulable": True}, id="cordoned"),
        pytest.param({"gpus": 0}, id="no-gpu"),
        pytest.param(
            {"taints": [{"key": "dedicated", "value": "serving", "effect": "NoSchedule"}]},
            id="untolerated-taint",
        ),
    ],
)
def test_nodes_that_cannot_be_profiled_are_not_selected(
    shared_cluster: Cluster, node_kwargs: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    suite = f"skip-{request.node.callspec.id}"
    good = make_nodes(shared_cluster, suite, 1)[0]
    bad = f"{suite}-excluded"
    shared_cluster.add_gpu_node(bad, labels={"suite": suite}, **node_kwargs)
    make_profile(shared_cluster, suite)
    wait_for_nodes(shared_cluster, suite, profiled, [good])
    assert bad not in node_entries(shared_cluster, suite)
    assert profile_status(shared_cluster, suite)["summary"]["matched"] == 1
    assert shared_cluster.runs([bad]) == []


def test_a_cordoned_node_keeps_its_labels_and_record_and_is_not_reprofiled_when_back(
    shared_cluster: Cluster,
) -> None:
    nodes = make_nodes(shared_cluster, "outage", 1)
    make_profile(shared_cluster, "outage")
    wait_for_nodes(shared_cluster, "outage", profiled, nodes)
    labels = our_labels(shared_cluster, nodes[0])
    assert labels
    shared_cluster.patch("nodes", nodes[0], {"spec": {"unschedulable": True}})
    wait_for(
        lambda: node_entries(shared_cluster, "outage")[nodes[0]]["state"] == "Unavailable",
        timeout=20,
        what="the cordoned node to be Unavailable",
    )
    entry = node_entries(shared_cluster, "outage")[nodes[0]]
    assert "unavailableSince" in entry
    assert entry["ridgePoint"] > 0, "its publication stays"
    assert our_labels(shared_cluster, nodes[0]) == labels
    assert profile_status(shared_cluster, "outage")["summary"]["unavailable"] == 1
    shared_cluster.patch("nodes", nodes[0], {"spec": {"unschedulable": False}})
    wait_for(
        lambda: node_entries(shared_cluster, "outage")[nodes[0]]["state"] == "Profiled",
        timeout=20,
        what="the uncordoned node to be Profiled again",
    )
    assert runs_per_node(shared_cluster, nodes) == {nodes[0]: 1}, "not re-profiled"
    assert our_labels(shared_cluster, nodes[0]) == labels
