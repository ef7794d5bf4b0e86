"""The model plan picture: inter-token latency and tokens/s against batch, bounds drawn."""

from __future__ import annotations

from typing import Any

from roofline_profiler.cli.plot import label_log_axes, plain_label, seconds_label
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.wire.result import ProfileResult


def draw_model_panels(
    itl: Any, throughput: Any, result: ProfileResult, itl_slo_seconds: float | None = None
) -> None:
    """Per device, model and context: ITL (step time) and tokens/s against batch, with the max
    batch by memory (dashed), the max batch by latency and the ITL SLO (dotted), and the
    recommended range shaded; the legend says which is which."""
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    plans = [(d.device, plan) for d in result.devices for plan in d.models]
    for i, (device, plan) in enumerate(plans):
        draw_plan(itl, throughput, device, plan, colors[i % len(colors)])
    if itl_slo_seconds is not None:
        itl.axhline(
            itl_slo_seconds,
            color="black",
            linestyle=":",
            linewidth=1,
            label=f"ITL SLO {seconds_label(itl_slo_seconds)}",
        )
    label_model_panels(itl, throughput)


def draw_plan(itl: Any, throughput: Any, device: str, plan: ModelPlan, color: str) -> None:
    """One plan's predicted step time and tokens/s, its batch bounds on both panels."""
    label = f"{device} {plan.name} C={plan.context_tokens}"
    if plan.tensor_parallel > 1:
        label += f" TP{plan.tensor_parallel}"
    batches = [p.batch for p in plan.predictions]
    itl.plot(batches, [p.step_seconds for p in plan.predictions], "o-", color=color, label=label)
    throughput.plot(
        batches, [p.tokens_per_second for p in plan.predictions], "o-", color=color, label=label
    )
    for axis in (itl, throughput):
        draw_batch_bounds(axis, plan, color)
    if plan.max_batch_by_memory >= 1:
        itl.annotate(
            f"memory {plan.max_batch_by_memory}",
            (plan.max_batch_by_memory, itl.get_ylim()[1]),
            textcoords="offset points",
            xytext=(3, -12),
            fontsize=7,
            color=color,
            rotation=90,
            va="top",
        )


def draw_batch_bounds(axis: Any, plan: ModelPlan, color: str) -> None:
    """Max batch by memory (dashed), by latency (dotted), the recommended range (shaded)."""
    if plan.max_batch_by_memory >= 1:
        axis.axvline(plan.max_batch_by_memory, color=color, linestyle="--", linewidth=1)
    if plan.max_batch_by_latency:
        axis.axvline(plan.max_batch_by_latency, color=color, linestyle=":", linewidth=1.2)
    if plan.recommended_range is not None:
        low, high = plan.recommended_range
        axis.axvspan(low, max(high, low * 1.02), color=color, alpha=0.08)


def label_model_panels(itl: Any, throughput: Any) -> None:
    """Log axes in engineering units, and one legend per panel that also says, once and in
    grey, what the line styles and the shading mean: the colours are the models'."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    keys = [
        Line2D([], [], color="grey", linestyle="--", linewidth=1, label="max batch by memory"),
        Line2D([], [], color="grey", linestyle=":", linewidth=1.2, label="max batch by latency"),
        Patch(color="grey", alpha=0.15, label="recommended batch range"),
    ]
    batch = "batch (concurrent sequences)"
    latency = "inter-token latency (= decode step)"
    label_log_axes(itl, batch, latency, "Predicted inter-token latency", seconds_label, keys)
    tokens = "decode tokens/s (one replica)"
    label_log_axes(throughput, batch, tokens, "Predicted decode throughput", plain_label, keys)


def model_figure(result: ProfileResult, slo_seconds: float | None = None) -> Any:
    """The figure ``roofline plan --plot`` writes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from roofline_profiler.cli.load_plot import draw_load_panels, has_rates

    rows = 2 if has_rates(result) else 1
    fig = plt.figure(figsize=(13, 5.2 * rows))
    itl, throughput = fig.add_subplot(rows, 2, 1), fig.add_subplot(rows, 2, 2)
    draw_model_panels(itl, throughput, result, slo_seconds)
    if rows == 2:
        draw_load_panels(fig.add_subplot(rows, 2, 3), fig.add_subplot(rows, 2, 4), result)
    fig.tight_layout()
    return fig
