import json
from dataclasses import replace

import pytest

from roofline_profiler.wire.compact import MAX_COMPACT_BYTES, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from tests.profiler.headline_builders import (
    BANDWIDTH,
    MIN_BATCH,
    PEAK,
    RIDGE,
    WIDE,
    interval_of,
    with_all_intervals,
    with_values,
    without_intervals,
)
from tests.profiler.synthetic import synthetic_result


def test_each_gpu_carries_its_intervals_and_they_never_come_back_narrower() -> None:
    result = synthetic_result(devices=2)
    decoded = decode_compact(encode_compact(result.to_compact()))
    for device, after in zip(result.devices, decoded.devices, strict=True):
        for name in (BANDWIDTH, PEAK, RIDGE):
            measured, wire = device.interval(name), interval_of(after, name)
            assert wire is not None
            # Widths are rounded outward to two digits: never narrower, at most ~10% wider.
            assert wire[0] <= measured[0] * (1 + 1e-3)
            assert wire[1] >= measured[1] * (1 - 1e-3)
            assert wire[1] - wire[0] <= (measured[1] - measured[0]) * 1.11 + 2e-3 * measured[1]
        assert interval_of(after, MIN_BATCH) == device.interval(MIN_BATCH)


def test_intervals_travel_as_short_relative_widths_beside_the_gpu_arrays() -> None:
    compact = synthetic_result().to_compact()
    (device,) = compact.devices
    bandwidth = float(f"{device.bandwidth_bytes_per_second:.4g}")  # as on the wire
    peak = float(f"{device.peak_flops_per_second:.4g}")
    tight = (
        (bandwidth * 0.98765, bandwidth * 1.00123),
        (peak, peak),
        (device.ridge_point * 0.9, device.ridge_point * 1.2),
        (64, 128),
    )
    exact = with_all_intervals(
        with_values(device, bandwidth_bytes_per_second=bandwidth, peak_flops_per_second=peak),
        tight,
    )
    doc = json.loads(encode_compact(replace(compact, devices=(exact,))))
    (widths,) = doc["u"]
    assert widths[0] == pytest.approx(1.3, abs=0.01)  # 1.235% below, rounded up
    assert widths[1] == pytest.approx(0.13, abs=0.001)  # 0.123% above, rounded up
    assert widths[2:4] == [0, 0]
    assert widths[6:] == [64, 128]
    assert len(doc["g"][0]) == 7  # the GPU's own array keeps its layout


def test_a_result_without_intervals_writes_no_u_and_decodes_to_none() -> None:
    compact = synthetic_result(devices=2).to_compact()
    bare = replace(compact, devices=tuple(without_intervals(d) for d in compact.devices))
    text = encode_compact(bare)
    assert "u" not in json.loads(text)
    assert not any(d.has_intervals for d in decode_compact(text).devices)
    assert all(interval_of(d, RIDGE) is None for d in decode_compact(text).devices)


def test_one_gpu_without_intervals_among_others_is_null() -> None:
    compact = synthetic_result(devices=2).to_compact()
    first, second = compact.devices
    text = encode_compact(replace(compact, devices=(first, without_intervals(second))))
    assert json.loads(text)["u"][1] is None
    decoded = decode_compact(text)
    assert decoded.devices[0].has_intervals
    assert not decoded.devices[1].has_intervals


def test_an_eight_gpu_node_with_intervals_leaves_room_for_the_model_plans() -> None:
    compact = synthetic_result(
        devices=8, name="NVIDIA H200 NVL with a long product name"
    ).to_compact()
    worst = replace(compact, devices=tuple(with_all_intervals(d, WIDE) for d in compact.devices))
    text = encode_compact(worst)
    assert len(json.dumps(json.loads(text)["u"], separators=(",", ":"))) <= 8 * 60
    assert len(text.encode()) <= MAX_COMPACT_BYTES // 2


def _with_u(u: object) -> str:
    doc = json.loads(encode_compact(synthetic_result().to_compact()))
    doc["u"] = u
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(_with_u([]), "intervals and devices differ", id="count"),
        pytest.param(_with_u([[1, 1]]), "not an array of 8 fields", id="short"),
        pytest.param(_with_u([[1, 1, 1, 1, 1, 1, 128, 64]]), "ends below", id="batches-reversed"),
        pytest.param(_with_u([[1, -2, 1, 1, 1, 1, 64, 64]]), "ends below", id="bandwidth-reversed"),
        pytest.param(
            _with_u([[150, 1, 1, 1, 1, 1, 64, 64]]),
            "'bandwidth below' = 150 is outside",
            id="below-zero",
        ),
        pytest.param(
            _with_u([["x", 1, 1, 1, 1, 1, 64, 64]]),
            "'bandwidth below' is not a number",
            id="string",
        ),
        pytest.param(
            _with_u([[1, 1, 1, 1, 1, 1, 0, 64]]), "'min batch low' = 0 is outside", id="zero-batch"
        ),
        pytest.param(_with_u({"0": []}), "wrong type", id="object"),
    ],
)
def test_malformed_intervals_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason):
        decode_compact(text)


def test_intervals_are_dropped_last_when_a_result_would_not_fit_otherwise() -> None:
    compact = synthetic_result(devices=1, name="G" * 64).to_compact()
    (one,) = compact.devices
    many = tuple(replace(with_all_intervals(one, WIDE), index=i) for i in range(30))
    without = replace(compact, devices=tuple(without_intervals(d) for d in many))
    assert len(encode_compact(without).encode()) <= MAX_COMPACT_BYTES
    text = encode_compact(replace(compact, devices=many))
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    doc = json.loads(text)
    assert "u" not in doc
    assert doc["b"] == []  # the step times went first
    assert len(decode_compact(text).devices) == 30
