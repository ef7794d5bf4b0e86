"""The weight formats' rooflines in the terminal summary and the Markdown report: per format its
peak, ridge point and recommended minimum batch with their 95% intervals, and its decode step
against the dtype's at the smallest and largest swept batch."""

from __future__ import annotations

from roofline_profiler.core.format_roofline import FormatRoofline
from roofline_profiler.core.units import format_si
from roofline_profiler.wire.result import DeviceResult

HEADER = (
    "weight format",
    "kernel",
    "bytes/weight",
    "peak",
    "ridge point",
    "min batch",
    "step vs dtype",
)


def _batches(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def _step_ratios(f: FormatRoofline, d: DeviceResult) -> str:
    """The format's decode step over the dtype's at the smallest and the largest batch both
    swept (``0.31× at B=1``: the format's step takes 31% of the dtype's)."""
    dtype_steps = {e.point.batch: e.point.step_seconds for e in d.sweep}
    shared = [p for p in f.points if p.batch in dtype_steps]
    if not shared:
        return "—"
    ends = [shared[0]] if len(shared) == 1 else [shared[0], shared[-1]]
    return ", ".join(f"{p.step_seconds / dtype_steps[p.batch]:.2f}× at B={p.batch}" for p in ends)


def rows(d: DeviceResult) -> list[tuple[str, ...]]:
    """One row per format profiled on ``d`` (:data:`HEADER`)."""
    out: list[tuple[str, ...]] = []
    for f in d.weight_formats:
        peak_low, peak_high = f.peak.interval
        ridge_low, ridge_high = f.ridge_point_interval
        out.append(
            (
                f.weight_format,
                f.kernel,
                f"{f.bytes_per_weight:.3f}",
                f"{format_si(f.peak.value, 'FLOP/s')} (95% {format_si(peak_low, 'FLOP/s')} to "
                f"{format_si(peak_high, 'FLOP/s')})",
                f"{f.ridge_point:.1f} FLOP/byte (95% {ridge_low:.1f} to {ridge_high:.1f})",
                f"{f.recommended_min_batch} (95% {_batches(*f.recommended_min_batch_interval)}; "
                f"{f.recommended_min_batch_source})",
                _step_ratios(f, d),
            )
        )
    return out


def summary_lines(d: DeviceResult) -> list[str]:
    """The terminal summary's lines: one per format, after the dtype's sweep."""
    if not d.weight_formats:
        return []
    lines = ["  weight formats (each in rounds of its own with the read kernels):"]
    for row in rows(d):
        name, kernel, per_weight, peak, ridge, batch, ratios = row
        lines.append(f"    {name} [{kernel}, {per_weight} B/weight]")
        lines.append(f"      peak {peak}; ridge point {ridge}")
        lines.append(f"      recommended min batch {batch}; decode step {ratios} of the dtype's")
    return lines


def markdown_lines(d: DeviceResult) -> list[str]:
    """The Markdown report's table of the formats, empty without one."""
    if not d.weight_formats:
        return []
    return [
        "",
        "### Weight formats",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *("| " + " | ".join(row) + " |" for row in rows(d)),
    ]
