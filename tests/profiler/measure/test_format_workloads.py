"""A weight format's roofline measured end to end on this machine's CPU, sized for a unit test."""

import pytest
import torch

from roofline_profiler.core.format_roofline import FormatRoofline
from roofline_profiler.core.weight_formats import awq_int4
from roofline_profiler.measure import quantized_linear
from roofline_profiler.measure.devices import DeviceInfo
from roofline_profiler.measure.format_workloads import FormatSweep, format_label, profile_format

INFO = DeviceInfo(torch.device("cpu"), 0, "test cpu", "cpu", 1 << 30, 1 << 20)
SWEEP = FormatSweep(
    shapes=((128, 256, 256),),
    k=256,
    n=512,
    batches=(1, 4, 64),
    bandwidth_kind="read",
    min_efficiency=0.5,
    quick=True,
)


@pytest.fixture(scope="module")
def awq() -> FormatRoofline:
    return profile_format(awq_int4(128), INFO, "bfloat16", SWEEP, lambda _: None)


def test_a_formats_roofline_names_the_kernel_that_ran_it(awq: FormatRoofline) -> None:
    assert awq.weight_format == "awq-int4-g128"
    assert awq.kernel == quantized_linear.TORCH_INT4_KERNEL


def test_a_formats_sweep_covers_the_profiles_batches_at_the_formats_bytes(
    awq: FormatRoofline,
) -> None:
    assert [p.batch for p in awq.points] == [1, 4, 64]
    # The bytes the kernel holds: torch's int4 layout keeps a 16-bit scale and offset a group.
    assert awq.bytes_per_weight == 0.5 + 2 * 2 / 128
    assert awq.activation_bytes == 2


def test_every_number_of_a_measured_format_lies_in_its_interval(awq: FormatRoofline) -> None:
    assert awq.peak.interval[0] <= awq.peak.value <= awq.peak.interval[1]
    assert awq.ridge_point_interval[0] <= awq.ridge_point <= awq.ridge_point_interval[1]
    low, high = awq.recommended_min_batch_interval
    assert low <= awq.recommended_min_batch <= high
    assert awq.ridge_point == pytest.approx(awq.peak.value / awq.slope.value)


def test_a_formats_peak_comes_from_its_own_gemm_never_the_dtypes(awq: FormatRoofline) -> None:
    assert awq.peak.kernel.startswith("awq-int4-g128 ")


def test_a_format_no_kernel_runs_takes_the_dtypes_matmul_as_its_compute_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quantized_linear, "torch_kernel", lambda *_: None)
    f = profile_format(awq_int4(128), INFO, "bfloat16", SWEEP, lambda _: None)
    assert f.kernel == quantized_linear.FORMAT_BYTES
    assert f.peak.kernel == "mm 128x256x256" or f.peak.kernel.startswith("awq-int4-g128 decode")


def test_a_formats_workloads_are_named_after_it() -> None:
    assert format_label(awq_int4(64), "decode B=8") == "awq-int4-g64 decode B=8"
