"""From a model's measured parts to its plan under load (``load_plan.LoadPlan``): the step model
(``step_model``) run through the engine's scheduler (``load_model``) for one workload.

The running requests are capped by the smaller of the engine's ``--max-num-seqs`` and the
sequences whose KV cache fits at the workload's full context (prompt + output), the plan's max
batch by memory there: beyond it vLLM preempts, which the model does not follow.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline_profiler.core import kv_budget
from roofline_profiler.core.decode_model import ModelMeasurements
from roofline_profiler.core.engines import Engine
from roofline_profiler.core.load_model import (
    ladder_prompts,
    max_request_rate,
    simulate,
    ttft_ladder,
)
from roofline_profiler.core.load_plan import (
    LoadPlan,
    LoadPoint,
    LoadRequest,
    SchedulerLimits,
)
from roofline_profiler.core.prefill_parts import PREFILL_ROOFLINE
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.core.step_model import has_prefill, mixed_step

#: vLLM's CPU defaults for its OpenAI server (``EngineArgs.get_batch_defaults``, 0.32: a CPU
#: platform's ``max_num_batched_tokens`` 2048 and ``max_num_seqs`` 128 per worker).
VLLM_CPU_MAX_NUM_BATCHED_TOKENS = 2048
VLLM_CPU_MAX_NUM_SEQS = 128
#: Its defaults elsewhere (a GPU under 70 GiB; larger GPUs take more, set the flags there).
VLLM_MAX_NUM_BATCHED_TOKENS = 2048
VLLM_MAX_NUM_SEQS = 256


def default_limits(device_kind: str) -> tuple[int, int]:
    """vLLM's ``--max-num-batched-tokens`` and ``--max-num-seqs`` defaults for its server."""
    if device_kind == "cpu":
        return VLLM_CPU_MAX_NUM_BATCHED_TOKENS, VLLM_CPU_MAX_NUM_SEQS
    return VLLM_MAX_NUM_BATCHED_TOKENS, VLLM_MAX_NUM_SEQS


def plan_load(
    m: ModelMeasurements,
    engine: Engine,
    request: LoadRequest,
    itl_slo_seconds: float | None,
    device_kind: str,
    device_memory_bytes: int,
    gpu_memory_utilization: float,
    ladder_top: int,
) -> LoadPlan:
    """The plan under load of one measured model on one device for ``engine``."""
    batched, seqs = default_limits(device_kind)
    batched = request.max_num_batched_tokens or batched
    seqs = request.max_num_seqs or seqs
    workload = request.workload
    warnings = []
    if workload is not None:
        context = workload.prompt_tokens + workload.output_tokens
        fits = kv_budget.model_memory(
            m.arch, dtype_bytes(m.dtype), context, m.tensor_parallel, device_memory_bytes,
            gpu_memory_utilization,
        ).max_batch  # fmt: skip
        if fits < seqs:
            warnings.append(
                f"the KV cache holds {fits} sequences of {context} tokens, fewer than "
                f"--max-num-seqs {seqs}: the load model caps the running requests there"
            )
            seqs = max(1, fits)
    limits = SchedulerLimits(batched, seqs)
    step = mixed_step(m, engine)
    prompt = workload.prompt_tokens if workload else None
    ladder = ttft_ladder(step, ladder_prompts(ladder_top, prompt), limits)
    rates: tuple[LoadPoint, ...] = ()
    best = None
    if workload is not None:
        rates = tuple(simulate(step, workload, r, limits) for r in request.rates)
        best = max_request_rate(step, workload, limits, request.ttft_slo_seconds, itl_slo_seconds)
        warnings += [
            f"at {r.requests_per_second:g} requests/s the queue grows: past the replica's "
            "throughput, its TTFT is that of the simulated window only"
            for r in rates
            if r.saturated
        ]
    assert m.prefill is not None  # mixed_step has checked
    source = m.prefill.attention_source
    how = "from the device's roofline" if source == PREFILL_ROOFLINE else f"timed with {source}"
    method = (
        f"vLLM V1's scheduler (decodes first, then prompt chunks up to {batched} tokens a step, "
        f"at most {seqs} running) over the predicted mixed steps of {engine.name}; prefill "
        f"attention {how}; Poisson arrivals, seed 0"
    )
    return LoadPlan(
        name=m.arch.name,
        dtype=m.dtype,
        tensor_parallel=m.tensor_parallel,
        engine=engine.name,
        workload=workload,
        limits=limits,
        ttft_slo_seconds=request.ttft_slo_seconds,
        itl_slo_seconds=itl_slo_seconds,
        ttft_ladder=ladder,
        rates=rates,
        max_rate=best,
        method=method,
        warnings=tuple(warnings),
    )


def plan_loads(
    measurements: Sequence[ModelMeasurements],
    engine: Engine,
    request: LoadRequest,
    itl_slo_seconds: float | None,
    device_kind: str,
    device_memory_bytes: int,
    gpu_memory_utilization: float,
    ladder_top: int,
) -> tuple[LoadPlan, ...]:
    """One plan under load per measured model that has its prefill parts."""
    device = (itl_slo_seconds, device_kind, device_memory_bytes, gpu_memory_utilization, ladder_top)
    return tuple(plan_load(m, engine, request, *device) for m in measurements if has_prefill(m))
