from __future__ import annotations

import pytest

from roofline_profiler.core.engines import VLLM_CPU
from roofline_profiler.core.load_plan import LoadRequest, Workload
from roofline_profiler.core.load_planning import default_limits, plan_load, plan_loads
from tests.profiler.core.prefill_builders import with_prefill
from tests.profiler.core.step_builders import synthetic

GIB = 1 << 30


def test_without_a_workload_the_plan_holds_the_ttft_ladder_alone() -> None:
    p = plan_load(with_prefill(), VLLM_CPU, LoadRequest(), None, "cpu", 64 * GIB, 0.9, 4096)
    assert p.workload is None
    assert [t.prompt_tokens for t in p.ttft_ladder] == [128, 256, 512, 1024, 2048, 4096]
    assert p.rates == ()
    assert p.max_rate is None
    assert "prefill attention from timed with" not in p.method
    assert "vllm-cpu-test" in p.method


def test_a_workload_gets_its_rates_and_a_maximum_rate_under_the_targets() -> None:
    request = LoadRequest(Workload(512, 32), rates=(0.05, 0.1), ttft_slo_seconds=20.0)
    p = plan_load(with_prefill(), VLLM_CPU, request, 0.5, "cpu", 64 * GIB, 0.9, 4096)
    assert [r.requests_per_second for r in p.rates] == [0.05, 0.1]
    assert p.max_rate is not None
    assert p.max_rate.requests_per_second > 0
    assert p.itl_slo_seconds == 0.5
    assert (p.limits.max_num_batched_tokens, p.limits.max_num_seqs) == default_limits("cpu")


def test_the_running_requests_are_capped_where_the_kv_cache_is_full() -> None:
    request = LoadRequest(Workload(4000, 96))
    # Llama 3.1 8B's 16 GB of weights leave room for a handful of 4K sequences in 20 GiB.
    p = plan_load(with_prefill(), VLLM_CPU, request, None, "cpu", 20 * GIB, 0.9, 4096)
    assert p.limits.max_num_seqs < 128
    assert any("KV cache holds" in w for w in p.warnings)


def test_models_without_prefill_parts_have_no_plan_under_load() -> None:
    plans = plan_loads(
        [synthetic(), with_prefill()], VLLM_CPU, LoadRequest(), None, "cpu", 64 * GIB, 0.9, 512
    )
    assert len(plans) == 1


@pytest.mark.parametrize("kind", ["cuda", "rocm"])
def test_engines_on_a_gpu_take_vllms_gpu_defaults(kind: str) -> None:
    assert default_limits(kind) == (2048, 256)
