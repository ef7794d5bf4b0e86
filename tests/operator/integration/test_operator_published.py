"""Published values change only when the device does: re-profiles against a running operator.

Each test owns one node whose synthetic GPU it changes between profiles, and a profile whose
results claim to be 57 s old with ``reprofileInterval: 1m``, so a re-profile is due 3 s after
each result.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.harness import Cluster, SyntheticGpu, wait_for
from tests.operator.harness.profiles import (
    GROUP,
    PLURAL,
    condition,
    example_profile,
    our_labels,
    profile_status,
    profiled,
    wait_for_nodes,
)

pytestmark = pytest.mark.usefixtures("shared_operator")


def start(cluster: Cluster, suite: str, gpu: SyntheticGpu) -> tuple[str, dict[str, Any]]:
    """A node of ``suite`` with ``gpu``, profiled once by a profile that re-profiles it often."""
    node = f"{suite}-0"
    cluster.add_gpu_node(node, labels={"suite": suite}, synthetic_gpus=(gpu,))
    cluster.set_result_age(node, 57)
    spec = {"reprofileInterval": "1m", "timeoutSeconds": 30}
    cluster.create(PLURAL, example_profile(suite, {"suite": suite}, **spec), group=GROUP)
    entry = wait_for_nodes(cluster, suite, profiled, [node])[node]
    return node, entry


def reprofile_with(cluster: Cluster, suite: str, node: str, gpu: SyntheticGpu) -> dict[str, Any]:
    """Swap the node's GPU for ``gpu`` and wait for the status of a profile that measured it."""
    before = wait_for_nodes(cluster, suite, profiled, [node])[node]["profiledTime"]
    cluster.call(cluster.faults.gpus.__setitem__, node, (gpu,))
    # The profile after the one that may already run: it surely measured ``gpu``.
    seen: list[str] = [before]

    def newer(entry: dict[str, Any]) -> bool:
        if profiled(entry) and entry["profiledTime"] not in seen:
            seen.append(entry["profiledTime"])
        return len(seen) >= 3

    return wait_for_nodes(cluster, suite, newer, [node], timeout=40, what="two newer profiles")[
        node
    ]


def events_of(cluster: Cluster, profile: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.list("events", namespace="default")
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == profile
    ]


def device_changed_events(cluster: Cluster, profile: str) -> list[dict[str, Any]]:
    return events_of(cluster, profile, "DeviceChanged")


def test_a_reprofile_that_warned_of_interference_is_held_back_once_and_named(
    shared_cluster: Cluster,
) -> None:
    node, first = start(shared_cluster, "noisy", SyntheticGpu(bandwidth_bytes_per_second=4.3e12))
    labels = our_labels(shared_cluster, node)
    hit = SyntheticGpu(bandwidth_bytes_per_second=3.0e12, warnings=("CpuContention",))
    shared_cluster.call(shared_cluster.faults.gpus.__setitem__, node, (hit,))
    entry = wait_for_nodes(
        shared_cluster,
        "noisy",
        lambda e: profiled(e) and e.get("heldBack") is True,
        [node],
        timeout=40,
        what="a held-back profile",
    )[node]
    assert entry["warnings"] == ["CpuContention"]
    assert entry["bandwidthBytesPerSecond"] == first["bandwidthBytesPerSecond"]
    assert entry["measured"]["bandwidthBytesPerSecond"] < first["bandwidthBytesPerSecond"]
    assert "materialChange" not in entry
    assert our_labels(shared_cluster, node) == labels
    events = wait_for(
        lambda: events_of(shared_cluster, "noisy", "ProfileHeldBack"),
        timeout=20,
        what="a ProfileHeldBack Event",
    )
    assert events[0]["type"] == "Warning"
    assert f"node {node}: CpuContention" in events[0]["message"]
    # The interference is still there at the next profile: the node's condition, published.
    entry = wait_for_nodes(
        shared_cluster,
        "noisy",
        lambda e: profiled(e) and "materialChange" in e,
        [node],
        timeout=40,
        what="the next profile to publish",
    )[node]
    assert "heldBack" not in entry
    assert entry["bandwidthBytesPerSecond"] < 0.8 * first["bandwidthBytesPerSecond"]


def test_a_reprofile_within_noise_keeps_labels_and_numbers_and_raises_nothing(
    shared_cluster: Cluster,
) -> None:
    gpu = SyntheticGpu(bandwidth_bytes_per_second=4.3e12, uncertainty=0.02)
    node, first = start(shared_cluster, "steady", gpu)
    labels = our_labels(shared_cluster, node)
    assert "bandwidthInterval" in first
    entry = reprofile_with(
        shared_cluster,
        "steady",
        node,
        SyntheticGpu(bandwidth_bytes_per_second=4.3e12 * 0.99, uncertainty=0.02),
    )
    assert our_labels(shared_cluster, node) == labels
    assert entry["bandwidthBytesPerSecond"] == first["bandwidthBytesPerSecond"]
    assert entry["measured"]["bandwidthBytesPerSecond"] < first["bandwidthBytesPerSecond"]
    assert entry["publishedTime"] == first["profiledTime"]
    assert "previous" in entry
    assert "materialChange" not in entry
    status = profile_status(shared_cluster, "steady")
    assert condition(status, "DeviceChanged")["status"] == "False"
    assert device_changed_events(shared_cluster, "steady") == []


def test_a_reprofile_beyond_ten_percent_relabels_and_raises_an_event_and_a_condition(
    shared_cluster: Cluster,
) -> None:
    node, first = start(shared_cluster, "degrade", SyntheticGpu(bandwidth_bytes_per_second=4.3e12))
    before = our_labels(shared_cluster, node)
    entry = reprofile_with(
        shared_cluster, "degrade", node, SyntheticGpu(bandwidth_bytes_per_second=3.6e12)
    )
    after = our_labels(shared_cluster, node)
    assert int(after["roofline.dev/bandwidth-gbps"]) < int(before["roofline.dev/bandwidth-gbps"])
    assert after["roofline.dev/ridge-point"] != before["roofline.dev/ridge-point"]
    assert entry["bandwidthBytesPerSecond"] < 0.9 * first["bandwidthBytesPerSecond"]
    events = wait_for(
        lambda: device_changed_events(shared_cluster, "degrade"),
        timeout=20,
        what="a DeviceChanged Event",
    )
    assert events[0]["type"] == "Warning"
    assert f"node {node}: bandwidth" in events[0]["message"]
    assert "(\u221216%)" in events[0]["message"]
    # The change was news once; the re-profiles after it are within noise of the new value.
    status = wait_for(
        lambda: (
            (s := profile_status(shared_cluster, "degrade"))
            and condition(s, "DeviceChanged").get("status") == "False"
            and s
        ),
        timeout=30,
        what="the condition to clear once a re-profile confirms the new value",
    )
    assert condition(status, "DeviceChanged")["reason"] == "NoMaterialChange"


def test_the_condition_names_the_node_while_its_latest_profile_changed(
    shared_cluster: Cluster,
) -> None:
    node, _ = start(shared_cluster, "slower", SyntheticGpu(peak_flops_per_second=7.8e14))
    shared_cluster.call(
        shared_cluster.faults.gpus.__setitem__, node, (SyntheticGpu(peak_flops_per_second=6e14),)
    )

    def changed() -> dict[str, Any] | None:
        found = condition(profile_status(shared_cluster, "slower"), "DeviceChanged")
        return found if found.get("status") == "True" else None

    found = wait_for(changed, timeout=30, what="DeviceChanged to turn True")
    assert found["reason"] == "MaterialChange"
    assert found["message"].startswith(f"node {node}: peak 780\u2192600 TFLOP/s (\u221223%)")
