"""Profile models on a device: measure each model's decode-step parts, then plan its serving.

Called by the runner after the roofline measurements of a device (whose peak FLOP/s the plan's
efficiency threshold refers to). Measuring is ``model_measure``; composing and planning are pure
(``decode_model``, ``planning``); this module only ties them to a device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from roofline_profiler.core.decode_model import ComponentTime, ModelMeasurements, plan_models
from roofline_profiler.core.engines import Engine, resolve_engine
from roofline_profiler.core.errors import first_line
from roofline_profiler.core.format_roofline import FormatRoofline, model_peak
from roofline_profiler.core.load_plan import LoadPlan, LoadRequest
from roofline_profiler.core.load_planning import default_limits, plan_loads
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.planning import ModelPlan, PlanOptions
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.core.stats import Measurement
from roofline_profiler.measure.collective import (
    measure_all_reduce,
    modelled_all_reduce_seconds,
)
from roofline_profiler.measure.devices import DeviceInfo
from roofline_profiler.measure.measure_settings import ROOFLINE_ATTENTION, MeasureSettings
from roofline_profiler.measure.model_measure import attention_source, linear_source, measure_model
from roofline_profiler.measure.prefill_measure import measure_prefill, prefill_sizes

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModelFailure:
    """A model that could not be measured on a device, and why (one line)."""

    name: str
    reason: str


@dataclass(frozen=True)
class ModelRequest:
    """The models to measure on every device, and how to plan them."""

    models: tuple[ModelArch, ...]
    contexts: tuple[int, ...]
    tensor_parallel: int
    options: PlanOptions


def _all_reduce(
    arch: ModelArch,
    info: DeviceInfo,
    dtype: str,
    batches: tuple[int, ...],
    tp: int,
    bandwidth: float,
) -> tuple[tuple[ComponentTime, ...], bool, tuple[str, ...]]:
    if tp == 1:
        return (), True, ()
    backend = None
    if info.backend == "cuda" and torch.cuda.device_count() >= tp:
        backend = "nccl"
    elif info.backend == "cpu":
        backend = "gloo"
    if backend is not None:
        samples = measure_all_reduce(backend, tp, arch.hidden_size, batches, dtype)
        times = tuple(
            ComponentTime(
                batch=b,
                seconds=Measurement(label=f"all-reduce B={b}", times=t).median,
                measurement=Measurement(label=f"all-reduce B={b}", times=t),
            )
            for b, t in samples
        )
        return times, True, ()
    modelled = tuple(
        ComponentTime(
            batch=b,
            seconds=modelled_all_reduce_seconds(
                b, arch.hidden_size, dtype_bytes(dtype), tp, bandwidth
            ),
        )
        for b in batches
    )
    note = (
        f"all-reduce modelled as a ring over {tp} devices at the measured memory bandwidth "
        "(a lower bound)"
    )
    return modelled, False, (note,)


def _attention_notes(engine: Engine, attention: str) -> tuple[str, ...]:
    """What a plan says when the engine's own attention kernel could not be timed."""
    if engine.cpu_attention_kernel is None or attention != ROOFLINE_ATTENTION:
        return ()
    return (
        f"{engine.name}'s own CPU attention kernel cannot be imported here (run the profiler "
        "from the engine's environment to time it): attention comes from the device's roofline, "
        "a lower bound (vLLM's CPU kernel read the KV cache at a quarter to a half of the read "
        "bandwidth on the CPU it was measured on), so steps at long contexts and large batches "
        "are predicted too fast",
    )


def profile_models(
    info: DeviceInfo,
    dtype: str,
    batches: tuple[int, ...],
    request: ModelRequest,
    quick: bool,
    peak_flops_per_second: float,
    bandwidth_bytes_per_second: float,
    progress: Progress,
    formats: tuple[FormatRoofline, ...] = (),
) -> tuple[tuple[ModelPlan, ...], tuple[ModelMeasurements, ...], tuple[ModelFailure, ...]]:
    """Measure and plan every requested model on one device; a model the device cannot measure
    (out of memory, a driver error) is a :class:`ModelFailure`, and the others go on. A
    quantized model's minimum batch compares with its format's peak where ``formats`` (the
    device's measured format rooflines) hold it (``format_roofline.model_peak``).

    ``bandwidth_bytes_per_second`` is the device's measured read bandwidth: attention on a device
    without an engine-grade decode kernel is predicted from it (and the peak), and a tensor-parallel
    all-reduce that cannot be measured is modelled at it."""
    engine = resolve_engine(request.options.engine, info.backend, str(info.device))
    attention, roofline = attention_source(
        info, engine, bandwidth_bytes_per_second, peak_flops_per_second
    )
    attention_notes = _attention_notes(engine, attention)
    linear = linear_source(info, engine)
    plans: list[ModelPlan] = []
    measured: list[ModelMeasurements] = []
    failures: list[ModelFailure] = []
    memory = info.memory_bytes or 0
    load = request.options.load or LoadRequest()
    budget = load.max_num_batched_tokens or default_limits(info.backend)[0]
    chunks, prompts = prefill_sizes(quick, budget)
    for arch in request.models:
        settings = MeasureSettings(
            arch=arch,
            dtype=dtype,
            tensor_parallel=request.tensor_parallel,
            batches=batches,
            contexts=request.contexts,
            quick=quick,
            attention=attention,
            attention_roofline=roofline,
            linear=linear,
            chunk_tokens=chunks,
            prompt_tokens=prompts,
        )
        try:
            m = measure_model(settings, info, progress)
            m = replace(m, prefill=measure_prefill(settings, info, progress))
            all_reduce, all_reduce_measured, all_reduce_notes = _all_reduce(
                arch, info, dtype, batches, request.tensor_parallel, bandwidth_bytes_per_second
            )
        except torch.OutOfMemoryError as exc:
            failures.append(ModelFailure(arch.name, f"out of GPU memory: {first_line(exc)}"))
            progress(f"model {arch.name}: out of GPU memory, skipped")
            continue
        except RuntimeError as exc:
            failures.append(ModelFailure(arch.name, first_line(exc, type(exc).__name__)))
            progress(f"model {arch.name}: failed ({first_line(exc)}), skipped")
            continue
        finally:
            if info.backend in ("cuda", "rocm"):
                torch.cuda.empty_cache()
        m = replace(
            m,
            all_reduce=all_reduce,
            all_reduce_measured=all_reduce_measured,
            notes=(*m.notes, *attention_notes, *all_reduce_notes),
        )
        measured.append(m)
        peak = model_peak(arch.weight_format, peak_flops_per_second, formats)
        plans.extend(plan_models(m, request.contexts, memory, peak, request.options, engine))
    return tuple(plans), tuple(measured), tuple(failures)


def plan_model_loads(
    measured: tuple[ModelMeasurements, ...], request: ModelRequest, info: DeviceInfo
) -> tuple[LoadPlan, ...]:
    """The plans under load of the measured models (each whose prefill was measured)."""
    engine = resolve_engine(request.options.engine, info.backend, str(info.device))
    return plan_loads(
        measured,
        engine,
        request.options.load or LoadRequest(),
        request.options.itl_slo_seconds,
        info.backend,
        info.memory_bytes or 0,
        request.options.gpu_memory_utilization,
        max(request.contexts),
    )
