"""The roofline picture: log–log ceilings with the measured sweep, and time per token vs batch."""

from __future__ import annotations

from pathlib import Path

from roofline_profiler.result import ProfileResult


def write_plot(result: ProfileResult, path: Path, itl_slo_seconds: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # With model plans, a second row shows them (model_plot.py).
    rows = 2 if any(d.models for d in result.devices) else 1
    fig = plt.figure(figsize=(13, 5.2 * rows))
    roof, per_token = fig.add_subplot(rows, 2, 1), fig.add_subplot(rows, 2, 2)
    if rows == 2:
        from roofline_profiler.model_plot import draw_model_panels

        draw_model_panels(
            fig.add_subplot(rows, 2, 3), fig.add_subplot(rows, 2, 4), result, itl_slo_seconds
        )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, d in enumerate(result.devices):
        color = colors[i % len(colors)]
        label = f"{d.device} {d.name}"[:48]
        peak, bw = d.peak_flops_per_second, d.bandwidth_bytes_per_second
        intensities = [e.point.arithmetic_intensity for e in d.sweep]
        low = min(min(intensities), d.ridge_point) / 2
        high = max(max(intensities), d.ridge_point) * 2
        roof.plot(
            [low, d.ridge_point, high],
            [low * bw, peak, peak],
            color=color,
            linewidth=2,
            label=f"{label}: roofline",
        )
        roof.axvline(d.ridge_point, color=color, linestyle=":", linewidth=1)
        roof.annotate(
            f"ridge {d.ridge_point:.0f}",
            (d.ridge_point, peak),
            textcoords="offset points",
            xytext=(4, -14),
            color=color,
            fontsize=8,
        )
        roof.plot(
            intensities,
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
        per_token.plot(
            [e.point.batch for e in d.sweep],
            [e.point.seconds_per_token * 1e3 for e in d.sweep],
            "o-",
            color=color,
            label=label,
        )
        per_token.axvline(
            d.recommended_min_batch,
            color=color,
            linestyle="--",
            linewidth=1,
            label=f"recommended min batch {d.recommended_min_batch}",
        )
    roof.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity (FLOP/byte)",
        ylabel="FLOP/s",
        title=f"Decode roofline, W {result.shape_k}x{result.shape_n}, {result.dtype}",
    )
    roof.grid(True, which="both", alpha=0.3)
    roof.legend(fontsize=7)
    per_token.set(
        xscale="log",
        yscale="log",
        xlabel="batch B (tokens per step)",
        ylabel="time per token (ms)",
        title="Decode step time per token",
    )
    per_token.grid(True, which="both", alpha=0.3)
    per_token.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
