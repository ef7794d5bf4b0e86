"""The fleet view in the status: ``status.classes[]``, the node entries' standing and condition,
the profile's condition, their bounds, and what a restarted operator reads back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.operator_builders import device, profile, status_of
from tests.operator.unit.peer_builders import member

from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide import peer_status
from roofline_operator.decide.peers import fleet_view
from roofline_operator.decide.product_label import LabelMismatch
from roofline_operator.decide.records import NodeRecord


def fleet(slow: float = 3.4e12, peers: int = 4) -> Any:
    found = [member(f"gpu-{i}", 4.3e12) for i in range(peers)] + [member("gpu-slow", slow)]
    return fleet_view(found, 10)


def records_for(names: list[str]) -> dict[str, NodeRecord]:
    result = from_compact(profile(device()), "h")
    return {n: NodeRecord(n, 1, state=NodeState.PROFILED, result=result, attempts=1) for n in names}


def test_a_class_entry_has_its_medians_with_intervals_and_names_its_slower_nodes() -> None:
    (entry,) = peer_status.classes_to_status(fleet())
    assert entry == {
        "name": "NVIDIA H200",
        "device": "gpu",
        "nodes": 5,
        "devices": 5,
        "bandwidthBytesPerSecond": {"median": 4.3e12, "low": 4.257e12, "high": 4.343e12},
        "peakFlopsPerSecond": {"median": 1e15, "low": 9.9e14, "high": 1.01e15},
        "ridgePoint": {"median": 232.6, "low": 230.2, "high": 234.9},
        "slower": 1,
        "slowerNodes": ["gpu-slow"],
    }


def test_classes_are_bounded_keeping_the_largest() -> None:
    found = [
        member(f"n{c}-{i}", 4e12, gpu_class=f"class-{c:02d}")
        for c in range(peer_status.MAX_CLASSES + 3)
        for i in range(1 + (c == 34))
    ]
    names = [e["name"] for e in peer_status.classes_to_status(fleet_view(found, 10))]
    assert len(names) == peer_status.MAX_CLASSES
    assert "class-34" in names
    assert names == sorted(names)


def test_a_class_names_at_most_ten_slower_nodes_and_counts_them_all() -> None:
    found = [member(f"ok-{i}", 4.3e12) for i in range(13)]
    found += [member(f"slow-{i:02d}", 3.0e12) for i in range(12)]
    (entry,) = peer_status.classes_to_status(fleet_view(found, 10))
    assert entry["slower"] == 12
    assert entry["slowerNodes"] == [f"slow-{i:02d}" for i in range(10)]


def test_a_node_entry_gets_its_class_ratios_and_a_true_condition_when_slower() -> None:
    view = fleet()
    status = status_of(records_for([*view.standings]), peers=view)
    entries = {e["name"]: e for e in status["nodes"]}
    slow = entries["gpu-slow"]
    assert slow["gpuClass"] == "NVIDIA H200"
    # 3.4/4.3, 3.4·0.99/(4.3·1.01) and 3.4·1.01/(4.3·0.99), to four significant digits.
    bandwidth = slow["relativePerformance"]["bandwidth"]
    assert bandwidth == {"ratio": 0.7907, "low": 0.775, "high": 0.8067}
    assert set(slow["relativePerformance"]) == {"bandwidth", "peak", "ridgePoint"}
    (condition,) = slow["conditions"]
    assert condition["type"] == "SlowerThanPeers"
    assert (condition["status"], condition["reason"]) == ("True", "BelowClassMedian")
    assert condition["message"].startswith(
        "bandwidth 0.79 of the NVIDIA H200 median (95% 0.78 to 0.81): more than 10% below"
    )
    assert condition["lastTransitionTime"] == "1970-01-01T00:16:40Z"
    (peer,) = entries["gpu-0"]["conditions"]
    assert (peer["status"], peer["reason"]) == ("False", "WithinPeers")
    assert status["summary"]["slowerThanPeers"] == 1
    profile_condition = next(c for c in status["conditions"] if c["type"] == "SlowerThanPeers")
    assert profile_condition["status"] == "True"
    assert profile_condition["message"].startswith("node gpu-slow: bandwidth 0.79")
    assert status["classes"][0]["slowerNodes"] == ["gpu-slow"]


def test_a_node_condition_keeps_its_transition_time_while_it_holds() -> None:
    view = fleet()
    records = records_for([*view.standings])
    first = status_of(records, peers=view)
    later = status_of(records, peers=view, previous_nodes=first["nodes"])
    again = {e["name"]: e for e in later["nodes"]}
    assert (
        again["gpu-slow"]["conditions"]
        == {e["name"]: e for e in first["nodes"]}["gpu-slow"]["conditions"]
    )


def test_a_node_without_peers_has_no_standing_and_the_profile_says_none_is_slower() -> None:
    view = fleet_view([member("alone", 4.3e12)], 10)
    status = status_of(records_for(["alone"]), peers=view)
    (entry,) = status["nodes"]
    assert "gpuClass" not in entry
    assert "conditions" not in entry
    assert status["classes"][0]["nodes"] == 1
    condition = next(c for c in status["conditions"] if c["type"] == "SlowerThanPeers")
    assert (condition["status"], condition["reason"]) == ("False", "WithinPeers")


def test_without_a_view_the_status_is_as_before() -> None:
    status = status_of(records_for(["gpu-0"]))
    assert "classes" not in status
    assert all(c["type"] != "SlowerThanPeers" for c in status["conditions"])


@pytest.mark.parametrize("listed", [1, 2])
def test_a_slower_node_claims_a_listed_place_before_its_peers(listed: int) -> None:
    view = fleet()
    status = status_of(records_for([*view.standings]), peers=view, max_nodes=listed)
    names = [e["name"] for e in status["nodes"]]
    assert "gpu-slow" in names
    assert len(names) == listed


def test_the_written_status_tells_which_nodes_were_announced() -> None:
    view = fleet()
    status = status_of(records_for([*view.standings]), peers=view, max_nodes=1)
    assert peer_status.slower_from_status(status) == {"gpu-slow"}
    unlisted = {**status, "nodes": []}
    assert peer_status.slower_from_status(unlisted) == {"gpu-slow"}
    assert peer_status.slower_from_status({"nodes": [1, {"conditions": ["x"]}]}) == frozenset()


def test_a_mislabelled_node_claims_a_listed_place_and_gets_its_condition() -> None:
    found = [member(f"gpu-{i}", 4.3e12) for i in range(5)]
    mismatch = LabelMismatch("NVIDIA-B200", "NVIDIA H200")
    view = fleet_view(found, 10, {"gpu-4": mismatch})
    status = status_of(records_for([*view.standings]), peers=view, max_nodes=1)
    (entry,) = status["nodes"]
    assert entry["name"] == "gpu-4"
    kinds = {c["type"]: c for c in entry["conditions"]}
    assert kinds["SlowerThanPeers"]["status"] == "False"
    assert kinds["ProductLabelMismatch"]["status"] == "True"
    assert "nvidia.com/gpu.product=NVIDIA-B200" in kinds["ProductLabelMismatch"]["message"]
    assert status["summary"]["productLabelMismatches"] == 1
    assert peer_status.mismatched_from_status(status) == {"gpu-4"}
    assert peer_status.mismatched_from_status({"nodes": [1, {"conditions": [2]}]}) == frozenset()


def test_a_node_of_several_gpus_lists_its_slower_ones() -> None:
    found = [
        replace(member(f"n{n}", 4.3e12 * (0.6 if (n, g) == (1, 2) else 1.0)), gpu=g)
        for n in range(3)
        for g in range(4)
    ]
    view = fleet_view(found, 10)
    fields = peer_status.standing_to_status(view.standings["n1"])
    assert fields["slowerGpus"] == [2]
    assert fields["relativePerformance"]["bandwidth"]["ratio"] == pytest.approx(0.6)
    assert "slowerGpus" not in peer_status.standing_to_status(view.standings["n0"])
    (entry,) = peer_status.classes_to_status(view)
    assert (entry["nodes"], entry["devices"], entry["slower"]) == (3, 12, 1)
