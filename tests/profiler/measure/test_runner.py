"""``profile_device`` end to end on this machine's CPU, sized small enough for a unit test."""

import pytest
import torch

from roofline_profiler.measure.devices import DeviceInfo
from roofline_profiler.measure.runner import ProfileRequest, profile_device
from roofline_profiler.wire.result import DeviceResult

INFO = DeviceInfo(torch.device("cpu"), 0, "test cpu", "cpu", 1 << 30, 1 << 20)


@pytest.fixture(scope="module")
def device() -> DeviceResult:
    request = ProfileRequest(
        devices=(INFO,),
        k=256,
        n=512,
        batches=(1, 4, 64),
        min_batch_efficiency_percent=50,
        bandwidth_kind="read",
        quick=True,
    )
    return profile_device(INFO, "float32", request, lambda _: None)


def test_every_workload_is_timed_in_at_least_three_interleaved_rounds(device: DeviceResult) -> None:
    assert device.rounds >= 3
    assert set(device.bandwidth) == {"read", "readMatvec", "copy"}
    for m in [*device.bandwidth.values(), *(e.measurement for e in device.sweep)]:
        assert len(m.round_bests) >= 3


def test_the_ceilings_are_maxima_over_their_families(device: DeviceResult) -> None:
    reads = [device.bandwidth[k].confirmed_rate for k in ("read", "readMatvec")]
    decode_bytes = [e.point.bytes_per_second for e in device.sweep]
    assert device.read_bandwidth_bytes_per_second == pytest.approx(max(reads + decode_bytes))
    flops = [c.flops_per_second for c in device.peak_candidates]
    decode_flops = [e.point.flops_per_second for e in device.sweep]
    assert device.peak_flops_per_second == pytest.approx(max(flops + decode_flops))
    assert device.ridge_point == pytest.approx(
        device.peak_flops_per_second / device.bandwidth_bytes_per_second
    )


def test_no_sweep_point_lies_above_the_roof(device: DeviceResult) -> None:
    for e in device.sweep:
        assert e.point.roofline_fraction <= 1 + 1e-9


def test_every_headline_number_lies_in_its_interval(device: DeviceResult) -> None:
    for value, (low, high) in [
        (device.bandwidth_bytes_per_second, device.interval("bandwidth_bytes_per_second")),
        (device.read_bandwidth_bytes_per_second, device.read_bandwidth_interval),
        (device.copy_bandwidth_bytes_per_second, device.copy_bandwidth_interval),
        (device.peak_flops_per_second, device.interval("peak_flops_per_second")),
        (device.ridge_point, device.interval("ridge_point")),
        (device.recommended_min_batch, device.interval("recommended_min_batch")),
    ]:
        assert low <= value <= high
