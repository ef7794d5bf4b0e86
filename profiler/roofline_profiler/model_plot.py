"""The model plan picture: inter-token latency and tokens/s against batch, bounds drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline_profiler.result import ProfileResult


def draw_model_panels(
    itl: Any, throughput: Any, result: ProfileResult, itl_slo_seconds: float | None = None
) -> None:
    """Per device, model and context: ITL (step time) and tokens/s against batch, with the max
    batch by memory (dashed), the max batch by latency and the ITL SLO (dotted), and the
    recommended range shaded."""
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    i = 0
    for d in result.devices:
        for plan in d.models:
            color = colors[i % len(colors)]
            i += 1
            label = f"{d.device} {plan.name} C={plan.context_tokens}"
            if plan.tensor_parallel > 1:
                label += f" TP{plan.tensor_parallel}"
            batches = [p.batch for p in plan.predictions]
            itl.plot(
                batches,
                [p.step_seconds * 1e3 for p in plan.predictions],
                "o-",
                color=color,
                label=label,
            )
            throughput.plot(
                batches,
                [p.tokens_per_second for p in plan.predictions],
                "o-",
                color=color,
                label=label,
            )
            for axis in (itl, throughput):
                if plan.max_batch_by_memory >= 1:
                    axis.axvline(plan.max_batch_by_memory, color=color, linestyle="--", linewidth=1)
                if plan.max_batch_by_latency:
                    axis.axvline(
                        plan.max_batch_by_latency, color=color, linestyle=":", linewidth=1.2
                    )
                if plan.recommended_range is not None:
                    low, high = plan.recommended_range
                    axis.axvspan(low, max(high, low * 1.02), color=color, alpha=0.08)
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
    if itl_slo_seconds is not None:
        itl.axhline(
            itl_slo_seconds * 1e3,
            color="black",
            linestyle=":",
            linewidth=1,
            label=f"ITL SLO {itl_slo_seconds * 1e3:g} ms",
        )
    itl.set(
        xscale="log",
        yscale="log",
        xlabel="batch (concurrent sequences)",
        ylabel="inter-token latency = step time (ms)",
        title="Predicted decode step; -- memory bound, : latency bound",
    )
    throughput.set(
        xscale="log",
        yscale="log",
        xlabel="batch (concurrent sequences)",
        ylabel="tokens/s (one replica)",
        title="Predicted throughput; shaded: recommended",
    )
    for axis in (itl, throughput):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)


def write_model_plot(result: ProfileResult, path: Path, slo_seconds: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (itl, throughput) = plt.subplots(1, 2, figsize=(13, 5.2))
    draw_model_panels(itl, throughput, result, slo_seconds)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
