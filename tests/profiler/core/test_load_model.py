from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline_profiler.core.load_model import (
    ladder_prompts,
    max_request_rate,
    poisson_arrivals,
    serve,
    simulate,
    ttft_ladder,
)
from roofline_profiler.core.load_plan import (
    LIMITED_BY_ITL,
    LIMITED_BY_SATURATION,
    LIMITED_BY_TTFT,
    SchedulerLimits,
    Workload,
)
from roofline_profiler.core.step_model import Chunk

LIMITS = SchedulerLimits(max_num_batched_tokens=2048, max_num_seqs=128)


def constant(decodes: int, context: int, chunks: Sequence[Chunk]) -> float:
    """Every step 10 ms, whatever it carries."""
    return 0.01


def per_token(decodes: int, context: int, chunks: Sequence[Chunk]) -> float:
    """20 ms a step plus 0.5 ms a token through the GEMMs."""
    return 0.02 + 5e-4 * (decodes + sum(c.new_tokens for c in chunks))


def small_llama(decodes: int, context: int, chunks: Sequence[Chunk]) -> float:
    """13 ms a step, 0.4 ms more a sequence past eight and 0.45 ms a prompt token: about the
    shape of a small Llama's steps on two CPU cores."""
    sequences = decodes + len(chunks)
    return 0.013 + 4e-4 * max(0, sequences - 8) + 4.5e-4 * sum(c.new_tokens for c in chunks)


def test_a_lone_requests_ttft_is_its_prompts_chunk_steps() -> None:
    (point,) = ttft_ladder(per_token, [5000], LIMITS)
    assert point.seconds == pytest.approx(3 * 0.02 + 5e-4 * 5000)


def test_at_a_light_load_the_itl_is_a_decode_step_and_the_ttft_one_prefill_step() -> None:
    point = simulate(constant, Workload(512, 32), 0.5, LIMITS)
    assert point.ttft_median_seconds == pytest.approx(0.01, abs=0.011)
    assert point.itl_median_seconds == pytest.approx(0.01)
    assert not point.saturated
    # Little's law: each request holds a step slot for its 32 steps of 10 ms.
    assert point.running_batch == pytest.approx(0.5 * 32 * 0.01, rel=0.35)


def test_past_the_throughput_the_queue_grows_and_the_rate_is_saturated() -> None:
    # One running request at a time, 32 steps of 10 ms each: at most 3.1 requests a second.
    one_at_a_time = SchedulerLimits(2048, 1)
    assert simulate(constant, Workload(16, 32), 6.0, one_at_a_time).saturated
    assert not simulate(constant, Workload(16, 32), 1.0, one_at_a_time).saturated


def test_steps_carrying_prompt_chunks_lengthen_the_itl_under_load() -> None:
    light = simulate(per_token, Workload(1024, 64), 0.2, LIMITS)
    heavy = simulate(per_token, Workload(1024, 64), 1.5, LIMITS)
    assert heavy.itl_p90_seconds > 10 * light.itl_median_seconds
    assert heavy.itl_median_seconds >= light.itl_median_seconds


def test_a_served_request_gets_its_first_token_with_its_prompt_and_one_more_each_step() -> None:
    served = serve(per_token, [1.0], Workload(100, 3), LIMITS)
    prefill = 0.02 + 5e-4 * 100
    decode = 0.02 + 5e-4
    assert served.tokens[0] == pytest.approx(
        (1.0 + prefill, 1.0 + prefill + decode, 1.0 + prefill + 2 * decode)
    )
    assert served.queued == (1,)
    assert [carried for _, _, carried in served.steps] == [1, 1, 1]


def test_requests_arriving_during_a_step_wait_for_the_next_and_join_the_batch() -> None:
    # The second request arrives while the first's prompt step runs: it waits, then its prompt
    # shares a step with the first request's decode.
    served = serve(constant, [0.0, 0.005], Workload(16, 3), LIMITS)
    assert served.tokens[1][0] == pytest.approx(0.02)
    assert served.tokens[0] == pytest.approx((0.01, 0.02, 0.03))
    assert [carried for _, _, carried in served.steps] == [1, 2, 2, 1]


def test_a_request_finds_those_still_waiting_ahead_of_it() -> None:
    # One running request at a time: the three that arrive together queue behind each other.
    served = serve(constant, [0.0, 0.0, 0.0], Workload(16, 2), SchedulerLimits(2048, 1))
    assert served.queued == (1, 2, 3)
    assert [tokens[0] for tokens in served.tokens] == pytest.approx([0.01, 0.03, 0.05])


def test_arrivals_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="ascending"):
        serve(constant, [1.0, 0.5], Workload(16, 2), LIMITS)
    with pytest.raises(ValueError, match="finite"):
        serve(constant, [0.0, math.nan], Workload(16, 2), LIMITS)


@settings(deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=30),
    prompt=st.integers(1, 3000),
    output=st.integers(1, 8),
    seqs=st.integers(1, 8),
)
def test_any_ascending_arrivals_are_all_served_in_order(
    gaps: list[float], prompt: int, output: int, seqs: int
) -> None:
    arrivals = list(itertools.accumulate(gaps))
    served = serve(per_token, arrivals, Workload(prompt, output), SchedulerLimits(2048, seqs))
    assert served.arrivals == tuple(arrivals)
    for i, (arrival, tokens) in enumerate(zip(arrivals, served.tokens, strict=True)):
        assert len(tokens) == output
        assert tokens[0] > arrival
        assert all(b > a for a, b in itertools.pairwise(tokens))
        assert 1 <= served.queued[i] <= i + 1
    assert all(
        a_end <= b_start + 1e-12
        for (_, a_end, _), (b_start, _, _) in itertools.pairwise(served.steps)
    )
    assert all(0 < carried <= seqs for _, _, carried in served.steps)


@settings(deadline=None)
@given(arrivals=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=10))
def test_arrivals_out_of_order_or_not_finite_are_one_clear_error(arrivals: list[float]) -> None:
    ordered = all(math.isfinite(t) for t in arrivals) and arrivals == sorted(arrivals)
    if ordered:
        served = serve(constant, arrivals, Workload(16, 1), LIMITS)
        assert len(served.tokens) == len(arrivals)
    else:
        with pytest.raises(ValueError, match="finite and in ascending order"):
            serve(constant, arrivals, Workload(16, 1), LIMITS)


def test_poisson_arrivals_ascend_at_their_rate_and_are_fixed_by_their_seed() -> None:
    arrivals = poisson_arrivals(2.0, 400, seed=5)
    assert arrivals == sorted(arrivals)
    assert 400 / arrivals[-1] == pytest.approx(2.0, rel=0.15)
    assert arrivals == poisson_arrivals(2.0, 400, seed=5)
    assert arrivals != poisson_arrivals(2.0, 400, seed=6)


def test_near_the_knee_the_median_itl_hardly_depends_on_the_arrival_path() -> None:
    # Just below the knee a queue builds and drains over minutes: a window of 600 requests read
    # a median ITL of 15-36 ms over these six seeds, one of 6000 reads 23-26 ms.
    itls = [
        simulate(small_llama, Workload(512, 64), 3.3, LIMITS, seed=seed).itl_median_seconds
        for seed in range(6)
    ]
    assert max(itls) < 1.3 * min(itls)


def test_the_same_seed_simulates_the_same_arrivals() -> None:
    a = simulate(per_token, Workload(256, 32), 2.0, LIMITS, seed=3)
    assert a == simulate(per_token, Workload(256, 32), 2.0, LIMITS, seed=3)


def test_the_max_rate_without_targets_is_where_the_queue_starts_to_grow() -> None:
    # One request at a time, 32 steps of 10 ms each: 3.125 requests a second at most. A sampled
    # Poisson window runs a few percent either side of its nominal rate.
    best = max_request_rate(constant, Workload(16, 32), SchedulerLimits(2048, 1), None, None)
    assert best.limited_by == LIMITED_BY_SATURATION
    assert 3.125 * 0.9 < best.requests_per_second < 3.125 * 1.1


def test_a_tight_itl_target_limits_the_rate_before_saturation() -> None:
    free = max_request_rate(per_token, Workload(512, 64), LIMITS, None, None)
    bound = max_request_rate(per_token, Workload(512, 64), LIMITS, None, 0.03)
    assert bound.limited_by == LIMITED_BY_ITL
    assert bound.requests_per_second < free.requests_per_second


def test_a_ttft_target_a_lone_request_misses_allows_no_rate() -> None:
    best = max_request_rate(per_token, Workload(2048, 16), LIMITS, 0.5, None)
    assert best.requests_per_second == 0.0
    assert best.limited_by == LIMITED_BY_TTFT


def test_the_ladder_doubles_up_to_the_planned_context_and_holds_the_workloads_prompt() -> None:
    assert ladder_prompts(1000, 300) == [128, 256, 300, 512, 1000]


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        simulate(constant, Workload(16, 16), 0.0, LIMITS)


@settings(deadline=None)
@given(rate=st.floats(0.05, 3.0), more=st.floats(1.1, 3.0))
def test_more_requests_a_second_never_shorten_the_median_ttft(rate: float, more: float) -> None:
    # Monotone at any window's length: a short one keeps the examples quick.
    workload = Workload(512, 16)
    slow = simulate(per_token, workload, rate, LIMITS, requests=600)
    fast = simulate(per_token, workload, rate * more, LIMITS, requests=600)
    assert fast.ttft_median_seconds >= slow.ttft_median_seconds * 0.999
