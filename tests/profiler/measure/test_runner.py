"""``profile_device`` end to end on this machine's CPU, sized small enough for a unit test."""

import pytest
import torch

from roofline_profiler.core.stats import Measurement
from roofline_profiler.core.weight_formats import WeightFormat, awq_int4, int8_w8a8
from roofline_profiler.measure import runner
from roofline_profiler.measure.devices import DeviceInfo
from roofline_profiler.measure.format_workloads import FormatSweep
from roofline_profiler.measure.runner import ProfileRequest, profile_device
from roofline_profiler.wire import host_state
from roofline_profiler.wire.measurement_rounds import restrict
from roofline_profiler.wire.result import DeviceResult
from roofline_profiler.wire.warning_codes import FORMAT_FAILED, HOST_STATE_CODE
from tests.profiler.synthetic import synthetic_format

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


def kept(device: DeviceResult, m: Measurement) -> Measurement:
    """``m`` in the rounds the device's numbers come from: all of them, or those of the state
    the profile kept where the host changed state while it ran (as this host's memory level
    sometimes does)."""
    report = device.host_states
    if report is None:
        return m
    rounds = report.fast_rounds if report.state == host_state.FAST else report.slow_rounds
    return restrict(m, rounds)


def test_every_workload_is_timed_in_at_least_three_interleaved_rounds(device: DeviceResult) -> None:
    assert set(device.bandwidth) == {"read", "readMatvec", "copy"}
    for m in [*device.bandwidth.values(), *(e.measurement for e in device.sweep)]:
        assert len(m.round_bests) >= 3
    report = device.host_states
    if report is None:
        assert device.rounds >= 3
    else:  # the numbers come from one state's rounds, and the result says so
        kept_rounds = report.fast_rounds if report.state == host_state.FAST else report.slow_rounds
        assert len(report.fast_rounds) + len(report.slow_rounds) >= 3
        assert device.rounds <= len(kept_rounds)
        assert HOST_STATE_CODE in {w.code for w in device.warnings}


def test_the_ceilings_are_maxima_over_their_families(device: DeviceResult) -> None:
    reads = [kept(device, device.bandwidth[k]).confirmed_rate for k in ("read", "readMatvec")]
    decode_bytes = [e.point.bytes_per_second for e in device.sweep]
    assert device.read_bandwidth_bytes_per_second == pytest.approx(max(reads + decode_bytes))
    flops = [kept(device, c.measurement).confirmed_rate for c in device.peak_candidates]
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


def formats_request(*formats: WeightFormat) -> ProfileRequest:
    return ProfileRequest(
        devices=(INFO,),
        k=256,
        n=512,
        batches=(1, 4),
        min_batch_efficiency_percent=50,
        bandwidth_kind="read",
        quick=True,
        weight_formats=formats,
    )


def test_each_requested_weight_format_gets_its_roofline_at_the_profiles_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, FormatSweep]] = []

    def measured(fmt: WeightFormat, info: DeviceInfo, dtype: str, at: FormatSweep, _: object):  # type: ignore[no-untyped-def]
        seen.append((fmt.name, at))
        return synthetic_format(fmt.name, k=at.k, n=at.n, batches=at.batches)

    monkeypatch.setattr(runner, "profile_format", measured)
    device = profile_device(
        INFO, "bfloat16", formats_request(awq_int4(128), int8_w8a8()), lambda _: None
    )
    assert [f.weight_format for f in device.weight_formats] == ["awq-int4-g128", "int8-w8a8"]
    (_, at), _ = seen
    assert (at.k, at.n, at.batches, at.min_efficiency, at.quick) == (256, 512, (1, 4), 0.5, True)
    assert at.shapes  # the device's own peak shapes


def test_a_format_that_fails_fails_alone_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(fmt: WeightFormat, *_: object) -> None:
        raise RuntimeError("kernel refused the shape\nstack...")

    monkeypatch.setattr(runner, "profile_format", fails)
    device = profile_device(INFO, "bfloat16", formats_request(awq_int4(128)), lambda _: None)
    assert device.weight_formats == ()
    assert device.sweep
    (warning,) = [w for w in device.warnings if w.code == FORMAT_FAILED]
    assert warning.message == "weight format awq-int4-g128: kernel refused the shape"
