"""The roofline picture: log–log ceilings with the measured sweep, and time per token vs batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from roofline_profiler.core.units import format_seconds, format_si, significant
from roofline_profiler.wire.result import DeviceResult, ProfileResult


def _leading_digit(value: float) -> int:
    return int(f"{abs(value):e}"[0]) if value else 0


Labeller = Callable[[float], str]


def label_axis(axis: Any, text: Labeller) -> None:
    """Engineering-unit tick labels on a log axis (``400 TFLOP/s``, ``10 ms``, not ``4×10¹⁴``):
    every decade, and 2× and 5× in between so that an axis spanning less than a decade still
    reads."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _: text(value)))
    axis.set_minor_formatter(
        FuncFormatter(lambda value, _: text(value) if _leading_digit(value) in (2, 5) else "")
    )


def flops_label(value: float) -> str:
    return format_si(value, "FLOP/s", trim=True)


def seconds_label(value: float) -> str:
    return format_seconds(value, trim=True)


def plain_label(value: float) -> str:
    return significant(value, trim=True)


def roofline_figure(result: ProfileResult, itl_slo_seconds: float | None = None) -> Any:
    """The figure ``--plot`` writes: roofline and time per token, model plans below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from roofline_profiler.cli.load_plot import draw_load_panels, has_rates

    # With model plans, a second row shows them (model_plot.py), and a third the plans under
    # load at their rates (load_plot.py).
    rows = 1 + any(d.models for d in result.devices) + has_rates(result)
    fig = plt.figure(figsize=(13, 5.2 * rows))
    roof, per_token = fig.add_subplot(rows, 2, 1), fig.add_subplot(rows, 2, 2)
    if rows >= 2:
        from roofline_profiler.cli.model_plot import draw_model_panels

        draw_model_panels(
            fig.add_subplot(rows, 2, 3), fig.add_subplot(rows, 2, 4), result, itl_slo_seconds
        )
    if rows == 3:
        draw_load_panels(fig.add_subplot(rows, 2, 5), fig.add_subplot(rows, 2, 6), result)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, d in enumerate(result.devices):
        color = colors[i % len(colors)]
        label = f"{d.device} {d.name}"[:48]
        draw_ceilings(roof, d, color, label)
        draw_sweep(roof, d, color, label)
        draw_time_per_token(per_token, d, color, label)
    label_log_axes(
        roof,
        "arithmetic intensity (FLOP per byte)",
        "achieved matrix throughput",
        f"Decode roofline, W {result.shape_k}×{result.shape_n}, {result.dtype} "
        "(shaded: 95% intervals)",
        flops_label,
    )
    label_log_axes(
        per_token,
        "batch B (tokens per step)",
        "time per token",
        "Decode step time per token",
        seconds_label,
    )
    fig.tight_layout()
    return fig


def _intensity_span(d: DeviceResult) -> tuple[float, float]:
    """The arithmetic intensities the roofline is drawn over: the sweep and the ridge, with a
    factor of two of margin on each side."""
    intensities = [e.point.arithmetic_intensity for e in d.sweep]
    return min(min(intensities), d.ridge_point) / 2, max(max(intensities), d.ridge_point) * 2


def draw_ceilings(roof: Any, d: DeviceResult, color: str, label: str) -> None:
    """The roofline ``min(peak, intensity × bandwidth)`` and its ridge point, each with its 95%
    interval: the ridge point's as a band, the ceilings' as a shaded roof."""
    peak, bw = d.peak_flops_per_second, d.bandwidth_bytes_per_second
    low, high = _intensity_span(d)
    roof.plot(
        [low, d.ridge_point, high],
        [low * bw, peak, peak],
        color=color,
        linewidth=2,
        label=f"{label}: roofline",
    )
    roof.axvline(d.ridge_point, color=color, linestyle=":", linewidth=1)
    roof.axvspan(*d.interval("ridge_point"), color=color, alpha=0.08)
    bw_low, bw_high = d.interval("bandwidth_bytes_per_second")
    peak_low, peak_high = d.interval("peak_flops_per_second")
    xs = [low, *sorted({peak_low / bw_low, peak_high / bw_high}), high]
    roof.fill_between(
        xs,
        [min(peak_low, x * bw_low) for x in xs],
        [min(peak_high, x * bw_high) for x in xs],
        color=color,
        alpha=0.15,
        linewidth=0,
    )
    roof.annotate(
        f"ridge {d.ridge_point:.0f}",
        (d.ridge_point, peak),
        textcoords="offset points",
        xytext=(4, -14),
        color=color,
        fontsize=8,
    )


def draw_sweep(roof: Any, d: DeviceResult, color: str, label: str) -> None:
    """The measured decode sweep under the roofline, each point labelled with its batch."""
    roof.plot(
        [e.point.arithmetic_intensity for e in d.sweep],
        [e.point.flops_per_second for e in d.sweep],
        "o--",
        color=color,
        markersize=5,
        label=f"{label}: measured",
    )
    for e in d.sweep:
        roof.annotate(
            str(e.point.batch),
            (e.point.arithmetic_intensity, e.point.flops_per_second),
            textcoords="offset points",
            xytext=(3, 3),
            fontsize=7,
            color=color,
        )


def draw_time_per_token(per_token: Any, d: DeviceResult, color: str, label: str) -> None:
    """Time per token against batch, with the recommended minimum batch and its interval."""
    per_token.plot(
        [e.point.batch for e in d.sweep],
        [e.point.seconds_per_token for e in d.sweep],
        "o-",
        color=color,
        label=label,
    )
    per_token.axvspan(*d.interval("recommended_min_batch"), color=color, alpha=0.08)
    per_token.axvline(
        d.recommended_min_batch,
        color=color,
        linestyle="--",
        linewidth=1,
        label=f"recommended min batch {d.recommended_min_batch}",
    )


def label_log_axes(
    axis: Any, xlabel: str, ylabel: str, title: str, y_text: Labeller, keys: Sequence[Any] = ()
) -> None:
    """Log-log axes with engineering-unit ticks, a grid and a legend; ``keys`` are legend
    entries that follow the axis's own (what line styles mean, where colours name the lines)."""
    axis.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    label_axis(axis.yaxis, y_text)
    label_axis(axis.xaxis, plain_label)
    axis.grid(True, which="both", alpha=0.3)
    handles, _ = axis.get_legend_handles_labels()
    axis.legend(handles=[*handles, *keys], fontsize=7)
