"""The plan under load, drawn: the median TTFT and ITL a user sees against the request rate, each
model's maximum rate and the targets marked (``load_plan``)."""

from __future__ import annotations

from typing import Any

from roofline_profiler.cli.plot import label_log_axes, seconds_label
from roofline_profiler.wire.result import ProfileResult


def has_rates(result: ProfileResult) -> bool:
    """Whether any plan under load has rates to draw."""
    return any(load.rates for d in result.devices for load in d.loads)


def draw_load_panels(ttft: Any, itl: Any, result: ProfileResult) -> None:
    """Per device and model: the median TTFT (left) and ITL (right) at each rate, saturated rates
    hollow, the maximum rate a vertical line, the targets horizontal dotted lines."""
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    loads = [(d.device, load) for d in result.devices for load in d.loads if load.rates]
    for i, (device, load) in enumerate(loads):
        color = colors[i % len(colors)]
        label = f"{device} {load.name}"
        rates = [r.requests_per_second for r in load.rates]
        for axis, values, slo in (
            (ttft, [r.ttft_median_seconds for r in load.rates], load.ttft_slo_seconds),
            (itl, [r.itl_median_seconds for r in load.rates], load.itl_slo_seconds),
        ):
            axis.plot(rates, values, "-", color=color, label=label)
            for rate, value, point in zip(rates, values, load.rates, strict=True):
                face = "none" if point.saturated else color
                axis.plot([rate], [value], "o", color=color, markerfacecolor=face)
            if load.max_rate is not None and load.max_rate.requests_per_second > 0:
                axis.axvline(load.max_rate.requests_per_second, color=color, linestyle="--")
            if slo is not None:
                axis.axhline(slo, color=color, linestyle=":", linewidth=1)
    label_log_axes(
        ttft, "request rate (requests/s, one replica)", "median time to first token",
        "Predicted TTFT under load (hollow: saturated; dashed: max rate)", seconds_label,
    )  # fmt: skip
    label_log_axes(
        itl, "request rate (requests/s, one replica)", "median inter-token latency",
        "Predicted ITL under load (dotted: targets)", seconds_label,
    )  # fmt: skip
