"""The model plans of a result, rendered for the terminal and for Markdown.

Pure module: no torch.
"""

from __future__ import annotations

from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.core.units import format_bytes, format_rate, format_seconds, significant

NO_FLAGS = "none (the model does not fit; see warnings)"
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "tensorrtLlm": "TensorRT-LLM"}


def _bytes(value: float) -> str:
    return format_bytes(value)


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


def _batch_range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def flags_batch(plan: ModelPlan) -> int:
    """The batch the engine flags are written for: the recommended range's top, or, without a
    range, the largest batch memory and latency allow (at least 1)."""
    if plan.recommended_range is not None:
        return plan.recommended_range[1]
    by_latency = plan.max_batch_by_latency
    high = (
        plan.max_batch_by_memory
        if by_latency is None
        else min(plan.max_batch_by_memory, by_latency)
    )
    return max(1, high)


def engine_note(plan: ModelPlan) -> str | None:
    """Says when the engine flags are a fallback rather than the recommended range's top."""
    if plan.recommended_range is not None or plan.max_batch_by_memory < 1:
        return None
    return (
        f"no recommended range, so the engine flags below are a fallback for batch "
        f"{flags_batch(plan)} (see warnings)"
    )


def _title(plan: ModelPlan) -> str:
    weights = f"{plan.weight_format} weights, " if plan.weight_format else ""
    cache = f"{plan.kv_cache_dtype} KV cache, " if plan.kv_cache_dtype != "auto" else ""
    return (
        f"{plan.name} ({plan.dtype}, {weights}{cache}tensor parallel {plan.tensor_parallel}, "
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
        rate = (
            format_rate(tps_low)
            if low == high
            else f"{significant(tps_low)}–{format_rate(tps_high)}"
        )
        rows.append(("recommended batch", f"{_batch_range(low, high)}: {rate}"))
    else:
        rows.append(("recommended batch", "none (see warnings)"))
    note = engine_note(plan)
    if note is not None:
        rows.append(("engine flags", note))
    return rows


def _table(plan: ModelPlan) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    costs = dict(plan.cost_per_million_tokens)
    header: tuple[str, ...] = ("B", "step (ITL)", "tokens/s")
    if costs:
        header += ("cost / 1M tokens",)
    rows = []
    for p in plan.predictions:
        row: tuple[str, ...] = (str(p.batch), _ms(p.step_seconds), significant(p.tokens_per_second))
        if costs:
            row += (significant(costs[p.batch]),)
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
