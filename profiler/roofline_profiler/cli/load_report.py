"""The plans under load of a result (``load_plan``), rendered for the terminal and for Markdown:
the TTFT of one request alone per prompt length, then, for a workload, the TTFT, ITL and running
batch at each request rate and the maximum rate per replica.

Pure module: no torch.
"""

from __future__ import annotations

from roofline_profiler.core.load_plan import LoadPlan
from roofline_profiler.core.units import format_seconds, significant


def _title(load: LoadPlan) -> str:
    workload = (
        "no workload given"
        if load.workload is None
        else f"prompt {load.workload.prompt_tokens}, output {load.workload.output_tokens} tokens"
    )
    return f"{load.name} under load ({workload}; {load.engine})"


def _max_rate(load: LoadPlan) -> str | None:
    if load.max_rate is None:
        return None
    targets = [
        f"{name} {format_seconds(slo)}"
        for name, slo in (("TTFT", load.ttft_slo_seconds), ("ITL", load.itl_slo_seconds))
        if slo is not None
    ]
    within = f"median {' and '.join(targets)}" if targets else "no target: until saturation"
    return (
        f"{significant(load.max_rate.requests_per_second)} requests/s per replica ({within}; "
        f"limited by {load.max_rate.limited_by})"
    )


def _rate_rows(load: LoadPlan) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    header: tuple[str, ...] = (
        "requests/s", "TTFT median", "TTFT p90 (est.)", "ITL median", "ITL p90 (est.)",
        "running", "tokens/s",
    )  # fmt: skip
    rows: list[tuple[str, ...]] = [
        (
            significant(r.requests_per_second) + (" (saturated)" if r.saturated else ""),
            format_seconds(r.ttft_median_seconds),
            format_seconds(r.ttft_p90_seconds),
            format_seconds(r.itl_median_seconds),
            format_seconds(r.itl_p90_seconds),
            significant(r.running_batch),
            significant(r.output_tokens_per_second),
        )
        for r in load.rates
    ]
    return header, rows


def summary_lines(loads: tuple[LoadPlan, ...]) -> list[str]:
    lines: list[str] = []
    for load in loads:
        lines += ["", f"  model {_title(load)}"]
        ladder = ", ".join(
            f"{p.prompt_tokens}: {format_seconds(p.seconds)}" for p in load.ttft_ladder
        )
        lines.append(f"    TTFT alone             {ladder}")
        best = _max_rate(load)
        if best is not None:
            lines.append(f"    max request rate       {best}")
        header, rows = _rate_rows(load)
        if rows:
            widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
            for row in [header, *rows]:
                lines.append(
                    "    " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
                )
        lines += [f"    warning: {w}" for w in load.warnings]
    return lines


def markdown_lines(loads: tuple[LoadPlan, ...]) -> list[str]:
    lines: list[str] = []
    for load in loads:
        lines += [
            "",
            f"### Model {_title(load)}",
            "",
            "| prompt tokens | TTFT alone |",
            "|---|---|",
        ]
        lines += [f"| {p.prompt_tokens} | {format_seconds(p.seconds)} |" for p in load.ttft_ladder]
        best = _max_rate(load)
        if best is not None:
            lines += ["", f"Maximum request rate: {best}."]
        header, rows = _rate_rows(load)
        if rows:
            lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines += ["", f"Method: {load.method}."]
        if load.warnings:
            lines += [""] + [f"- {w}" for w in load.warnings]
    return lines
