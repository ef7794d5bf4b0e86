"""Human-readable renderings of a result: the terminal summary and a Markdown report."""

from __future__ import annotations

from roofline_profiler.cli import format_report, load_report
from roofline_profiler.cli.model_report import markdown_lines, summary_lines
from roofline_profiler.core.units import format_seconds, format_si
from roofline_profiler.wire.result import DeviceResult, ProfileResult


def _si(value: float, unit: str) -> str:
    return format_si(value, unit)


def _seconds(value: float) -> str:
    return format_seconds(value)


def _interval(low: float, high: float, unit: str) -> str:
    return f"95% {_si(low, unit)} to {_si(high, unit)}"


def _headline(d: DeviceResult) -> list[tuple[str, str]]:
    knee = str(d.knee_batch) if d.knee_batch is not None else "not reached"
    low_batch, high_batch = d.interval("recommended_min_batch")
    ridge_low, ridge_high = d.interval("ridge_point")
    batch_range = (
        f"95% {low_batch}" if low_batch == high_batch else f"95% {low_batch} to {high_batch}"
    )
    crossing = (
        f", crossing B ≈ {d.min_batch_crossing:.0f}" if d.min_batch_crossing is not None else ""
    )
    return [
        (
            "read bandwidth",
            f"{_si(d.read_bandwidth_bytes_per_second, 'B/s')} "
            f"({_interval(*d.read_bandwidth_interval, 'B/s')}; {d.read_bandwidth_kernel})",
        ),
        (
            "copy bandwidth",
            f"{_si(d.copy_bandwidth_bytes_per_second, 'B/s')} "
            f"({_interval(*d.copy_bandwidth_interval, 'B/s')}; read+write)",
        ),
        (
            "peak matrix",
            f"{_si(d.peak_flops_per_second, 'FLOP/s')} "
            f"({_interval(*d.interval('peak_flops_per_second'), 'FLOP/s')}; "
            f"{d.source('peak_flops_per_second')})",
        ),
        (
            "ridge point",
            f"{d.ridge_point:.1f} FLOP/byte (95% {ridge_low:.1f} to {ridge_high:.1f}; "
            f"slope: {d.bandwidth_kind} bandwidth, "
            f"{d.source('bandwidth_bytes_per_second')})",
        ),
        ("observed knee", f"B ≈ {knee}"),
        (
            "recommended min batch",
            f"{d.recommended_min_batch} ({batch_range}; from the "
            f"{d.source('recommended_min_batch')}{crossing})",
        ),
        ("rounds", f"{d.rounds} interleaved"),
    ]


_SWEEP_HEADER = ("B", "step", "per token", "achieved", "of roofline", "of peak", "intensity")


def _sweep_rows(d: DeviceResult) -> list[tuple[str, ...]]:
    return [
        (
            str(e.point.batch),
            _seconds(e.point.step_seconds),
            _seconds(e.point.seconds_per_token),
            _si(e.point.flops_per_second, "FLOP/s"),
            f"{e.point.roofline_fraction:.0%}",
            f"{e.point.peak_fraction:.0%}",
            f"{e.point.arithmetic_intensity:.1f}",
        )
        for e in d.sweep
    ]


def text_summary(result: ProfileResult, models_only: bool = False) -> str:
    if models_only:
        lines = [f"model plan from the profile of {result.created_at}"]
        for d in result.devices:
            lines += ["", f"{d.device}  {d.name}  [{d.backend}, {d.dtype}]"]
            lines += summary_lines(d.models)
            lines += load_report.summary_lines(d.loads)
        return "\n".join(lines) + "\n"
    lines = [
        f"decode roofline: W {result.shape_k}x{result.shape_n}, {result.mode} mode, "
        f"{result.duration_seconds:.1f} s",
    ]
    for d in result.devices:
        lines.append("")
        lines.append(f"{d.device}  {d.name}  [{d.backend}, {d.dtype}]")
        lines.extend(f"  {key:<22} {value}" for key, value in _headline(d))
        rows = [_SWEEP_HEADER, *_sweep_rows(d)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_SWEEP_HEADER))]
        for row in rows:
            lines.append(
                "  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True))
            )
        lines += format_report.summary_lines(d)
        for w in d.warnings:
            lines.append(f"  warning {w.code}: {w.message}")
        lines += summary_lines(d.models)
        lines += load_report.summary_lines(d.loads)
    return "\n".join(lines) + "\n"


def markdown_report(result: ProfileResult) -> str:
    env = result.environment
    lines = [
        "# Decode roofline profile",
        "",
        f"Measured {result.created_at} on `{env.get('hostname', '?')}` in {result.mode} mode "
        f"({result.duration_seconds:.1f} s): torch {env.get('torch', '?')}, "
        f"weight {result.shape_k}×{result.shape_n}, "
        f"minimum-batch efficiency {result.min_batch_efficiency_percent}% of peak.",
    ]
    for d in result.devices:
        lines += ["", f"## {d.device}: {d.name} ({d.backend}, {d.dtype})", ""]
        lines += ["| quantity | value |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in _headline(d)]
        lines += ["", "| " + " | ".join(_SWEEP_HEADER) + " |", "|" + "---|" * len(_SWEEP_HEADER)]
        lines += ["| " + " | ".join(row) + " |" for row in _sweep_rows(d)]
        lines += format_report.markdown_lines(d)
        if d.warnings:
            lines += [""] + [f"- **{w.code}**: {w.message}" for w in d.warnings]
        lines += markdown_lines(d.models)
        lines += load_report.markdown_lines(d.loads)
    return "\n".join(lines) + "\n"
