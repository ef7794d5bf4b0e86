"""The fleet view: class medians with their intervals, each node's ratio to them, and when a node
is slower than its peers, checked exactly on hand-computed cases."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.operator.unit.operator_builders import device, node, profile
from tests.operator.unit.peer_builders import member
from tests.profiler.headline_builders import BANDWIDTH, PEAK, RIDGE, headline_numbers

from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.peers import (
    Member,
    Spread,
    class_median,
    describe,
    fleet_view,
    is_slower,
    members,
    mismatches,
    ratio_to,
)
from roofline_operator.decide.product_label import PRODUCT_LABEL, LabelMismatch
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire.fields import Estimate


def test_the_class_median_is_bracketed_by_the_medians_of_the_interval_ends() -> None:
    numbers = [Estimate(4.0, (3.9, 4.2)), Estimate(5.0, (4.0, 5.5)), Estimate(6.0, (5.9, 6.1))]
    assert class_median(numbers) == Spread(5.0, 4.0, 5.5)


def test_a_class_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    numbers = [Estimate(v, (v - 1, v + 1)) for v in (1.0, 2.0, 4.0, 8.0)]
    assert class_median(numbers) == Spread(3.0, 2.0, 4.0)


def test_a_number_without_an_interval_counts_as_exact() -> None:
    assert class_median([Estimate(2.0), Estimate(4.0)]) == Spread(3.0, 3.0, 3.0)
    assert ratio_to(Estimate(3.0), Spread(4.0, 4.0, 4.0)) == Spread(0.75, 0.75, 0.75)


def test_the_ratio_interval_divides_each_end_by_the_opposite_end_of_the_median() -> None:
    ratio = ratio_to(Estimate(8.0, (7.0, 9.0)), Spread(10.0, 9.0, 12.0))
    assert ratio.value == pytest.approx(0.8)
    assert ratio.low == pytest.approx(7.0 / 12.0)
    assert ratio.high == pytest.approx(1.0)


def test_a_median_reaching_zero_gives_a_bounded_ratio() -> None:
    ratio = ratio_to(Estimate(1.0, (0.5, 2.0)), Spread(1.0, 0.0, 2.0))
    assert ratio.high == 1e6
    assert ratio.low == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("ratio", "slower"),
    [
        pytest.param(Spread(0.85, 0.83, 0.87), True, id="material-and-beyond-noise"),
        pytest.param(Spread(0.85, 0.70, 1.01), False, id="material-but-within-noise"),
        pytest.param(Spread(0.95, 0.94, 0.96), False, id="beyond-noise-but-not-material"),
        pytest.param(Spread(0.90, 0.89, 0.91), False, id="exactly-at-the-threshold"),
        pytest.param(Spread(0.8999, 0.89, 0.9999), True, id="just-below-the-threshold"),
        pytest.param(Spread(1.2, 1.1, 1.3), False, id="faster"),
    ],
)
def test_a_node_is_slower_when_material_and_beyond_noise(ratio: Spread, slower: bool) -> None:
    assert is_slower(ratio, 10) is slower


def test_a_node_far_below_its_class_is_slower_and_its_peers_are_not() -> None:
    found = [member(f"gpu-{i}", 4.3e12 * (1 + 0.01 * i)) for i in range(4)]
    found.append(member("gpu-slow", 3.4e12))
    view = fleet_view(found, 10)
    assert view.slower_nodes() == ("gpu-slow",)
    slow = view.standings["gpu-slow"]
    assert slow.slower == ("bandwidth",)
    # Five values 3.4, 4.3, 4.343, 4.386, 4.429 (×1e12): the median is 4.343e12.
    median = 4.3e12 * 1.01
    assert slow.ratios["bandwidth"].value == pytest.approx(3.4e12 / median)
    assert slow.ratios["bandwidth"].low == pytest.approx(3.4e12 * 0.99 / (median * 1.01))
    assert slow.ratios["bandwidth"].high == pytest.approx(3.4e12 * 1.01 / (median * 0.99))
    assert slow.ratios["peak"].value == pytest.approx(1.0)
    # The slow node's ridge point is higher, which is not slower.
    assert slow.ratios["ridge point"].value > 1.2
    assert all(not view.standings[f"gpu-{i}"].slower for i in range(4))
    (only,) = view.classes
    assert only.nodes == ("gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-slow")
    assert only.medians["bandwidth"].value == pytest.approx(median)


def test_a_node_below_the_threshold_within_its_uncertainty_is_not_slower() -> None:
    found = [member(f"gpu-{i}", 4.3e12, uncertainty=0.15) for i in range(4)]
    found.append(member("gpu-noisy", 4.3e12 * 0.88, uncertainty=0.15))
    view = fleet_view(found, 10)
    noisy = view.standings["gpu-noisy"]
    assert noisy.ratios["bandwidth"].value == pytest.approx(0.88)
    assert noisy.ratios["bandwidth"].high > 1
    assert view.slower_nodes() == ()


def test_the_threshold_decides_how_far_below_is_material() -> None:
    found = [member(f"gpu-{i}", 4.3e12) for i in range(4)] + [member("gpu-x", 4.3e12 * 0.85)]
    assert fleet_view(found, 10).slower_nodes() == ("gpu-x",)
    assert fleet_view(found, 20).slower_nodes() == ()


def test_a_slow_peak_is_slower_too() -> None:
    found = [member(f"gpu-{i}", 4.3e12) for i in range(3)] + [member("gpu-p", 4.3e12, 7e14)]
    view = fleet_view(found, 10)
    assert view.standings["gpu-p"].slower == ("peak",)


def test_classes_are_compared_apart_and_a_class_of_one_has_no_standing() -> None:
    found = [
        member("h200-a", 4.3e12),
        member("h200-b", 4.3e12),
        member("h100-a", 3.0e12, gpu_class="NVIDIA H100 80GB HBM3"),
    ]
    view = fleet_view(found, 10)
    assert [c.name for c in view.classes] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert set(view.standings) == {"h200-a", "h200-b"}
    # The H100 is far below the H200s, but it is not one of their peers.
    assert view.slower_nodes() == ()


def test_a_class_of_two_compares_each_with_their_mean() -> None:
    view = fleet_view([member("a", 4.0e12), member("b", 3.0e12)], 10)
    assert view.standings["b"].ratios["bandwidth"].value == pytest.approx(3.0 / 3.5)
    assert view.slower_nodes() == ("b",)


def test_members_are_every_device_published_under_the_current_spec_by_measured_product() -> None:
    current = from_compact(profile(device(0, bandwidth=4.3e12), device(1, bandwidth=3.9e12)), "h")
    older = from_compact(profile(device(bandwidth=4.3e12)), "old")
    records = {
        "gpu-a": NodeRecord("gpu-a", 2, result=current),
        "gpu-b": NodeRecord("gpu-b", 1, result=older),
        "gpu-c": NodeRecord("gpu-c", 1),
    }
    found = members(records, "h")
    assert [(m.node, m.gpu) for m in found] == [("gpu-a", 1), ("gpu-a", 0)], "worst GPU first"
    assert {m.gpu_class for m in found} == {"NVIDIA H200"}
    assert {m.device for m in found} == {"gpu"}
    assert found[0].numbers == current.worst_gpu().numbers


def test_no_node_label_moves_a_device_into_another_class() -> None:
    result = from_compact(profile(device(name="NVIDIA H200")), "h")
    records = {"a": NodeRecord("a", 1, result=result)}
    (only,) = members(records, "h")
    assert only.gpu_class == "NVIDIA H200"
    labelled = {"a": node("a", labels={PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"})}
    assert mismatches(records, labelled, "h") == {
        "a": LabelMismatch("NVIDIA-H100-80GB-HBM3", "NVIDIA H200")
    }
    cpu = from_compact(replace(profile(device(name="AMD EPYC 9654")), backend="cpu"), "h")
    on_cpu = {"a": NodeRecord("a", 1, result=cpu)}
    assert mismatches(on_cpu, labelled, "h") == {}, "the GPU label says nothing of a CPU"
    (cpu_member,) = members(on_cpu, "h")
    assert (cpu_member.device, cpu_member.gpu_class) == ("cpu", "AMD EPYC 9654")


def test_a_cpu_and_a_gpu_of_one_name_never_share_a_class() -> None:
    found = [
        member("a", 4.3e12),
        member("b", 4.3e12),
        replace(member("c", 1.0e12), device="cpu"),
    ]
    view = fleet_view(found, 10)
    assert [(c.device, c.name, c.nodes) for c in view.classes] == [
        ("cpu", "NVIDIA H200", ("c",)),
        ("gpu", "NVIDIA H200", ("a", "b")),
    ]
    assert set(view.standings) == {"a", "b"}


def test_each_gpu_of_a_node_is_compared_with_its_own_interval() -> None:
    """Node ``n2``'s GPU 3 is capped; its siblings are not, and neither is any peer."""
    found = [
        replace(member(f"n{n}", 4.3e12 * (0.6 if (n, g) == (2, 3) else 1.0)), gpu=g)
        for n in range(3)
        for g in range(4)
    ]
    view = fleet_view(found, 10)
    (only,) = view.classes
    assert (only.nodes, only.devices) == (("n0", "n1", "n2"), 12)
    capped = view.standings["n2"]
    assert capped.slower == ("bandwidth",)
    assert capped.slower_gpus() == (3,)
    assert capped.ratios["bandwidth"].value == pytest.approx(0.6)
    assert [d.gpu for d in capped.devices] == [0, 1, 2, 3]
    assert describe(capped).startswith("GPU 3: bandwidth 0.60 of the NVIDIA H200 median")
    assert view.slower_nodes() == ("n2",)


def test_a_noisy_gpu_does_not_hide_a_slower_sibling_in_the_nodes_ratio() -> None:
    """The node's ratio is its slower GPU's, even when a noisier sibling reads lower."""
    peers = [replace(member(f"p{i}", 4.3e12), gpu=0) for i in range(4)]
    slow = replace(member("n", 4.3e12 * 0.8, uncertainty=0.01), gpu=0)
    noisy = replace(member("n", 4.3e12 * 0.75, uncertainty=0.4), gpu=1)
    view = fleet_view([*peers, slow, noisy], 10)
    item = view.standings["n"]
    assert item.slower_gpus() == (0,)
    assert item.ratios["bandwidth"].value == pytest.approx(0.8, rel=1e-6)
    assert item.ratios["bandwidth"].high < 1


def test_the_gpus_of_one_node_are_peers_of_each_other() -> None:
    found = [replace(member("n", 4.3e12 * (0.6 if g == 5 else 1.0)), gpu=g) for g in range(8)]
    view = fleet_view(found, 10)
    assert view.standings["n"].slower_gpus() == (5,)


@given(
    values=st.lists(st.floats(1e9, 1e13), min_size=2, max_size=12),
    widths=st.lists(st.floats(0.0, 0.3), min_size=12, max_size=12),
)
@example(values=[4.3e12, 4.3e12], widths=[0.0] * 12)
def test_every_ratio_interval_contains_its_ratio_and_the_truth_it_covers(
    values: list[float], widths: list[float]
) -> None:
    """Whatever the numbers, each ratio lies in its interval; and a node whose true value and
    every peer's lie at their intervals' ends still finds its true ratio inside."""
    found = [
        Member(
            f"n{i}",
            "c",
            {
                **headline_numbers(v, v, 1.0, 1),
                BANDWIDTH: Estimate(v, (v * (1 - w), v * (1 + w))),
            },
        )
        for i, (v, w) in enumerate(zip(values, widths, strict=False))
    ]
    view = fleet_view(found, 10)
    lows = [m.numbers[BANDWIDTH].interval[0] for m in found]  # type: ignore[index]
    for m in found:
        ratio = view.standings[m.node].ratios["bandwidth"]
        assert ratio.low <= ratio.value <= ratio.high
        # The worst case for the upper end: this node at its high end, every other at its low.
        truth = [
            m2.numbers[BANDWIDTH].interval[1] if m2 is m else low  # type: ignore[index]
            for m2, low in zip(found, lows, strict=True)
        ]
        true_median = sorted(truth)[len(truth) // 2] if len(truth) % 2 else None
        if true_median is not None:
            true_ratio = m.numbers[BANDWIDTH].interval[1] / true_median  # type: ignore[index]
            assert true_ratio <= ratio.high * (1 + 1e-12)


def test_the_view_reads_peak_and_ridge_from_their_own_numbers() -> None:
    base = member("a", 4.0e12)
    other = replace(
        member("b", 4.0e12),
        numbers={**member("b", 4.0e12).numbers, PEAK: Estimate(2e15), RIDGE: Estimate(500.0)},
    )
    view = fleet_view([base, other], 10)
    assert view.standings["b"].ratios["peak"].value == pytest.approx(2e15 / 1.5e15)
    assert view.standings["b"].ratios["ridge point"].value == pytest.approx(500 / 375)
