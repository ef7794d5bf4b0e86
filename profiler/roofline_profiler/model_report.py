"""The model plans of a result, rendered for the terminal and for Markdown.

Pure module: no torch.
"""

from __future__ import annotations

from roofline_profiler.planning import ModelPlan

NO_FLAGS = "none (the model does not fit; see warnings)"
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "tensorrtLlm": "TensorRT-LLM"}


def _bytes(value: float) -> str:
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _title(plan: ModelPlan) -> str:
    return (
        f"{plan.name} ({plan.dtype}, tensor parallel {plan.tensor_parallel}, "
        f"context {plan.context_tokens})"
    )


def headline(plan: ModelPlan) -> list[tuple[str, str]]:
    """Key facts of one plan as (quantity, value) rows."""
    min_batch = "not reached" if plan.min_batch is None else str(plan.min_batch)
    if plan.min_batch_reason:
        min_batch += f" ({plan.min_batch_reason})"
    latency = (
        "no SLO given" if plan.max_batch_by_latency is None else str(plan.max_batch_by_latency)
    )
    rows = [
        ("weights per device", _bytes(plan.weight_bytes)),
        ("KV cache per token", _bytes(plan.kv_cache_bytes_per_token)),
        ("max batch by memory", str(plan.max_batch_by_memory)),
        ("min batch", min_batch),
        ("max batch by latency", latency),
    ]
    if plan.recommended_range is not None and plan.tokens_per_second_at_range is not None:
        (low, high), (tps_low, tps_high) = plan.recommended_range, plan.tokens_per_second_at_range
        rows.append(
            (
                "recommended batch",
                f"{low}–{high}: {tps_low:.4g}–{tps_high:.4g} tokens/s",
            )
        )
    else:
        rows.append(("recommended batch", "none (see warnings)"))
    return rows


def _table(plan: ModelPlan) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    costs = dict(plan.cost_per_million_tokens)
    header: tuple[str, ...] = ("B", "step (ITL)", "tokens/s")
    if costs:
        header += ("cost / 1M tokens",)
    rows = []
    for p in plan.predictions:
        row: tuple[str, ...] = (str(p.batch), _ms(p.step_seconds), f"{p.tokens_per_second:.4g}")
        if costs:
            row += (f"{costs[p.batch]:.4g}",)
        rows.append(row)
    return header, rows


def summary_lines(plans: tuple[ModelPlan, ...]) -> list[str]:
    lines: list[str] = []
    for plan in plans:
        lines += ["", f"  model {_title(plan)}"]
        lines += [f"    {key:<22} {value}" for key, value in headline(plan)]
        header, rows = _table(plan)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            lines.append("    " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        for engine, flags in plan.engine_settings.items():
            shown = " ".join(flags) or NO_FLAGS
            lines.append(f"    {ENGINE_NAMES.get(engine, engine):<13} {shown}")
        lines += [f"    warning: {w}" for w in plan.warnings]
    return lines


def _code(text: str) -> str:
    return f"`{text}`"


def markdown_lines(plans: tuple[ModelPlan, ...]) -> list[str]:
    lines: list[str] = []
    for plan in plans:
        lines += ["", f"### Model {_title(plan)}", "", "| quantity | value |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in headline(plan)]
        header, rows = _table(plan)
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines += ["", "| engine | flags |", "|---|---|"]
        lines += [
            f"| {ENGINE_NAMES.get(e, e)} | {_code(' '.join(flags)) if flags else NO_FLAGS} |"
            for e, flags in plan.engine_settings.items()
        ]
        if plan.warnings:
            lines += [""] + [f"- {w}" for w in plan.warnings]
    return lines
