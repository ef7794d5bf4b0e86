"""Command-line side of the model plan: ``roofline profile --model ...`` and ``roofline plan``.

``roofline plan --from result.json --model M`` re-plans from a saved profile without the device:
the result keeps every model's measured decode-step parts, so a new context, ITL SLO, GPU-hour
cost or memory utilisation is a pure computation. A model whose shapes (and tensor-parallel
degree) the profile did not measure is an input error that says what to re-profile.

No torch here: bad input is rejected before the measuring code is imported.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from roofline_profiler import limits
from roofline_profiler.model_config import ModelArch, ModelError, load_model
from roofline_profiler.models import check_tensor_parallel
from roofline_profiler.planning import ModelPlan, PlanOptions, parse_duration

DEFAULT_CONTEXT = limits.DEFAULT_CONTEXT_TOKENS
MAX_CONTEXT = limits.MAX_CONTEXT_TOKENS
MAX_TENSOR_PARALLEL = limits.MAX_TENSOR_PARALLEL


class ModelInputError(ValueError):
    """Bad model-plan input; the CLI reports it in one line with exit status 2."""


def add_model_arguments(p: argparse.ArgumentParser, *, plan: bool = False) -> None:
    """The model-plan flags, shared by ``profile`` and ``plan``."""
    p.add_argument(
        "--model",
        action="append",
        metavar="M",
        required=plan,
        help="a preset (llama-3.1-8b, llama-3.1-70b, qwen3-8b, mixtral-8x7b, qwen3-30b-a3b) or "
        "the path of a Hugging Face config.json; repeatable",
    )
    p.add_argument(
        "--context",
        metavar="TOKENS",
        help=f"context length(s) to plan for, comma-separated (default {DEFAULT_CONTEXT}"
        + ("; plan: the profiled contexts)" if plan else ")"),
    )
    p.add_argument(
        "--tensor-parallel",
        metavar="N",
        default="1",
        help="tensor-parallel degree: shapes sharded as the engines shard them (default 1)",
    )
    p.add_argument("--itl-slo", metavar="TIME", help="inter-token latency SLO, e.g. 50ms")
    p.add_argument(
        "--gpu-hour-cost", metavar="COST", help="price of one GPU-hour: adds cost per 1M tokens"
    )
    p.add_argument(
        "--gpu-memory-utilization",
        metavar="FRACTION",
        default="0.9",
        help="share of device memory the engine may use (default 0.9)",
    )


def parse_contexts(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if text is None:
        return default
    parts = [p.strip() for p in text.split(",")]
    contexts = []
    for part in parts:
        try:
            value = int(part)
        except ValueError:
            raise ModelInputError(f"--context: {part!r} is not an integer") from None
        if not 1 <= value <= MAX_CONTEXT:
            raise ModelInputError(f"--context: {value} is not a context length in 1..{MAX_CONTEXT}")
        contexts.append(value)
    return tuple(sorted(set(contexts)))


def _positive_float(text: str | None, flag: str, upper: float | None = None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ModelInputError(f"{flag} {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0 or (upper is not None and value > upper):
        bound = f" in (0, {upper:g}]" if upper is not None else " above 0"
        raise ModelInputError(f"{flag} {text!r} must be a number{bound}")
    return value


def parse_tensor_parallel(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ModelInputError(f"--tensor-parallel {text!r} is not an integer") from None
    if not 1 <= value <= MAX_TENSOR_PARALLEL:
        raise ModelInputError(f"--tensor-parallel {value} must lie in 1..{MAX_TENSOR_PARALLEL}")
    return value


def parse_plan_options(args: argparse.Namespace, min_efficiency_percent: int) -> PlanOptions:
    slo = None
    if args.itl_slo is not None:
        try:
            slo = parse_duration(args.itl_slo)
        except ValueError as exc:
            raise ModelInputError(f"--itl-slo: {exc}") from None
    utilization = _positive_float(args.gpu_memory_utilization, "--gpu-memory-utilization", 1.0)
    return PlanOptions(
        itl_slo_seconds=slo,
        gpu_hour_cost=_positive_float(args.gpu_hour_cost, "--gpu-hour-cost"),
        gpu_memory_utilization=utilization if utilization is not None else 0.9,
        min_efficiency_percent=min_efficiency_percent,
    )


def load_models(refs: list[str] | None, tensor_parallel: int) -> tuple[ModelArch, ...]:
    archs = []
    for ref in refs or ():
        try:
            arch = load_model(ref)
            check_tensor_parallel(arch, tensor_parallel)
        except ModelError as exc:
            raise ModelInputError(f"--model {ref}: {exc}") from None
        archs.append(arch)
    return tuple(archs)


def run_plan_command(
    args: argparse.Namespace,
    output_path: Callable[[str | None, str], Path | None],
    write_atomic: Callable[[Path, bytes], None],
) -> int:
    """``roofline plan --from result.json --model M ...``: re-plan from saved measurements."""
    from roofline_profiler.decode_model import plan_models, same_shapes
    from roofline_profiler.report import markdown_report, text_summary

    tp = parse_tensor_parallel(args.tensor_parallel)
    archs = load_models(args.model, tp)
    outputs = {
        flag: output_path(getattr(args, flag.lstrip("-")), flag)
        for flag in ("--json", "--markdown", "--plot")
    }
    if outputs["--plot"] is not None and outputs["--plot"].suffix.lower() != ".png":
        raise ModelInputError(f"--plot {args.plot}: the plot is written as PNG, name it *.png")
    source = Path(args.source)
    result = _read_result(source)
    options = parse_plan_options(args, result.min_batch_efficiency_percent)

    devices = []
    for device in result.devices:
        plans: list[ModelPlan] = []
        for arch in archs:
            candidates = [
                m
                for m in device.model_measurements
                if same_shapes(m.arch, arch) and m.tensor_parallel == tp
            ]
            if not candidates:
                ref = args.model[archs.index(arch)]
                raise ModelInputError(
                    f"{source.name} has no measurements for {arch.name} at tensor parallel {tp} "
                    f"on {device.device}; re-run roofline profile --model {ref}"
                    + (f" --tensor-parallel {tp}" if tp > 1 else "")
                )
            measured = replace(candidates[0], arch=arch)
            contexts = parse_contexts(args.context, measured.contexts)
            plans.extend(
                plan_models(
                    measured,
                    contexts,
                    device.memory_bytes or 0,
                    device.peak_flops_per_second,
                    options,
                )
            )
        devices.append(replace(device, models=tuple(plans)))
    planned = replace(result, devices=tuple(devices))
    document = planned.to_dict()
    if outputs["--json"] is not None:
        write_atomic(outputs["--json"], (json.dumps(document, indent=2) + "\n").encode())
    if outputs["--markdown"] is not None:
        write_atomic(outputs["--markdown"], markdown_report(planned).encode())
    if outputs["--plot"] is not None:
        from roofline_profiler.model_plot import write_model_plot

        write_model_plot(planned, outputs["--plot"], options.itl_slo_seconds)
    print(text_summary(planned, models_only=True), end="")
    print("".join(f"wrote {path}\n" for path in outputs.values() if path is not None), end="")
    return 0


def _read_result(path: Path) -> Any:
    from roofline_profiler.result import ProfileResult

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelInputError(f"--from {path}: cannot read it ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ModelInputError(f"--from {path}: not a JSON result document") from None
    try:
        return ProfileResult.from_dict(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelInputError(f"--from {path}: not a roofline result ({exc})") from None
