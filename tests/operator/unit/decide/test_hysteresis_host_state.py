"""Holding back a profile whose host changed state while it ran, until a level persists."""

from __future__ import annotations

from dataclasses import replace

from tests.operator.unit.round_builders import NOW, message, profile_once, reprofile
from tests.profiler.headline_builders import headline_numbers

from roofline_operator.core.node_results import GpuResult, NodeResult, headline_of
from roofline_operator.decide.hysteresis import level_persists, record_profile
from roofline_operator.decide.records import NodeRecord

FAST, SLOW = 4.3e12, 2.5e12  # a host that hands a device one bandwidth or the other
PEAK = 7.9e14


def node(bandwidth: float, at: float = 1000.0, *codes: str) -> NodeResult:
    """A one-GPU node at ``bandwidth`` with 1% intervals and the warning ``codes``."""

    def around(value: float) -> tuple[float, float]:
        return (value * 0.99, value * 1.01)

    ridge = PEAK / bandwidth
    gpu = GpuResult(
        index=0,
        product="NVIDIA H200",
        numbers=headline_numbers(
            bandwidth,
            PEAK,
            ridge,
            128,
            (around(bandwidth), around(PEAK), around(ridge), (128, 128)),
        ),
        step_seconds=((1, 3.0e-5),),
        warnings=codes,
    )
    return NodeResult(
        spec_hash="h",
        profiled_at=at,
        duration_seconds=20.0,
        dtype="bfloat16",
        shape_k=4096,
        shape_n=14336,
        gpus=(gpu,),
    )


def changed_state(bandwidth: float, at: float) -> NodeResult:
    return node(bandwidth, at, "HostStateChanged")


def first_record() -> NodeRecord:
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), node(FAST), 10)
    return record


def published_bandwidth(record: NodeRecord) -> float:
    assert record.result is not None
    return record.result.gpus[0].bandwidth_bytes_per_second


def test_a_profile_whose_host_changed_state_at_a_new_level_is_held_back() -> None:
    record, publication = record_profile(first_record(), changed_state(SLOW, 2000.0), 10)
    assert publication.held == ("HostStateChanged",)
    assert not publication.moved
    assert publication.changes == ()
    assert published_bandwidth(record) == FAST
    assert record.held is True
    assert record.warnings == ("HostStateChanged",)
    assert record.measured == headline_of(changed_state(SLOW, 2000.0))


def test_a_level_that_persists_across_two_profiles_publishes_as_a_device_change() -> None:
    record, _ = record_profile(first_record(), changed_state(SLOW, 2000.0), 10)
    record, publication = record_profile(record, changed_state(SLOW * 1.02, 3000.0), 10)
    assert publication.held == ()
    assert published_bandwidth(record) == SLOW * 1.02
    assert [c.quantity for c in publication.changes] == ["bandwidth", "ridge point"]
    assert record.change is not None
    assert record.change.startswith("bandwidth 4.3\u21922.55 TB/s")


def test_a_node_that_flaps_between_levels_keeps_its_published_numbers() -> None:
    record = first_record()
    for at, level in ((2000.0, SLOW), (3000.0, FAST * 0.98), (4000.0, SLOW), (5000.0, FAST)):
        record, publication = record_profile(record, changed_state(level, at), 10)
        assert publication.held == ("HostStateChanged",)
        assert publication.changes == ()
        assert published_bandwidth(record) == FAST


def test_a_state_change_that_found_the_published_level_again_publishes_within_noise() -> None:
    record, publication = record_profile(first_record(), changed_state(FAST * 0.995, 2000.0), 10)
    assert publication.held == ()
    assert publication.changes == ()
    assert record.held is False


def test_a_clean_profile_after_a_held_one_publishes_as_usual() -> None:
    record, _ = record_profile(first_record(), changed_state(SLOW, 2000.0), 10)
    record, publication = record_profile(record, node(SLOW, 3000.0), 10)
    assert publication.held == ()
    assert published_bandwidth(record) == SLOW
    assert publication.changes


def test_a_first_profile_whose_host_changed_state_is_published_having_nothing_to_keep() -> None:
    hit = changed_state(SLOW, 1000.0)
    record, publication = record_profile(NodeRecord(name="gpu-1", gpus=1), hit, 10)
    assert publication.held == ()
    assert record.result == hit


def test_interference_on_a_held_state_change_is_held_with_it() -> None:
    hit = replace(changed_state(SLOW, 2000.0))
    hit = replace(hit, gpus=(replace(hit.gpus[0], warnings=("HostStateChanged", "CpuContention")),))
    _, publication = record_profile(first_record(), hit, 10)
    assert publication.held == ("HostStateChanged", "CpuContention")


def test_a_level_persists_within_the_state_gap_and_not_beyond_it() -> None:
    before = headline_of(node(FAST))
    assert level_persists(before, headline_of(node(FAST * 0.95)))
    assert not level_persists(before, headline_of(node(FAST * 0.85)))
    assert not level_persists(None, before)


def test_through_the_planner_labels_move_only_once_a_new_level_persists() -> None:
    first = profile_once({}, message(4.30e12, NOW), NOW)
    state = ("HostStateChanged",)
    second = reprofile(first, message(2.5e12, NOW + 3700, warnings=state), NOW + 3700)
    assert [name for name, _ in second.held] == ["a"]
    assert "a" not in second.label_patches
    assert second.changes == []
    # The node still carries the first profile's labels.
    labelled = replace(second, label_patches=first.label_patches)
    third = reprofile(labelled, message(2.52e12, NOW + 7400, warnings=state), NOW + 7400)
    assert third.held == []
    assert third.label_patches["a"]["roofline.dev/bandwidth-gbps"] == "2520"
    ((name, publication),) = third.changes
    assert name == "a"
    assert publication.describe().startswith("bandwidth 4.3\u21922.52 TB/s")
