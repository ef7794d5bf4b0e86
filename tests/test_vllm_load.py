"""The load generator's own logic, without an engine: Poisson arrivals, the steady window's medians,
the saturation test, the bisection on the rate and the error summary."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.vllm_load import (
    LoadRun,
    StreamedRequest,
    bisect_max_rate,
    log_errors,
    poisson_arrivals,
    result_loads,
    unburst,
    within_targets,
)


def request(sent: float, ttft: float, itl: float, tokens: int = 4) -> StreamedRequest:
    first = sent + ttft
    return StreamedRequest(sent, tuple(first + i * itl for i in range(tokens)))


def steady_run(**changes: object) -> LoadRun:
    """Ten seconds of one request a second, a two-second warm-up, every request 0.2 s to its
    first token and 0.05 s between tokens, two running."""
    requests = tuple(request(float(t), 0.2, 0.05) for t in range(10))
    gauges = tuple((t / 2, 2.0, 0.0) for t in range(24))
    fields: dict[str, object] = {
        "rate": 1.0, "prompt_tokens": 16, "output_tokens": 4, "duration": 10.0, "warmup": 2.0,
        "requests": requests, "gauges": gauges, "wall_seconds": 12.0,
    }  # fmt: skip
    fields.update(changes)
    return LoadRun(**fields)  # type: ignore[arg-type]


def test_poisson_arrivals_repeat_at_a_seed_and_average_the_rate() -> None:
    offsets = poisson_arrivals(2.0, 5000.0, seed=1)
    assert offsets == poisson_arrivals(2.0, 5000.0, seed=1)
    assert offsets != poisson_arrivals(2.0, 5000.0, seed=2)
    assert offsets == sorted(offsets)
    assert offsets[0] > 0
    assert offsets[-1] < 5000.0
    assert len(offsets) / 5000.0 == pytest.approx(2.0, rel=0.05)


def test_ttft_is_from_the_send_and_itl_between_successive_tokens() -> None:
    streamed = StreamedRequest(1.0, (1.5, 1.6, 1.6, 1.8))
    assert streamed.ttft_seconds == pytest.approx(0.5)
    assert streamed.itl_seconds == pytest.approx([0.1, 0.0, 0.2])


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        pytest.param([1.0, 1.1, 1.2], [1.0, 1.1, 1.2], id="one token a read"),
        pytest.param([1.0, 1.3, 1.3, 1.3], [1.0, 1.1, 1.2, 1.3], id="a burst over its gap"),
        pytest.param([1.0, 1.0, 1.2], [1.0, 1.0, 1.2], id="the first burst keeps its stamps"),
        pytest.param([1.0, 1.3, 1.3002, 1.5], [1.0, 1.1501, 1.3002, 1.5], id="reads within 0.5 ms"),
    ],
)
def test_tokens_read_in_a_burst_are_spread_over_the_gap_since_the_last(
    stamps: list[float], expected: list[float]
) -> None:
    assert unburst(stamps) == pytest.approx(expected)


def test_tokens_per_chunk_counts_the_measured_requests_chunks() -> None:
    coalesced = tuple(replace(r, chunks=2) for r in steady_run().requests)
    assert steady_run(requests=coalesced).tokens_per_chunk == pytest.approx(2.0)


def test_a_steady_run_measures_only_the_requests_sent_after_the_warm_up() -> None:
    run = steady_run()
    assert [r.sent for r in run.measured] == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert run.ttft_median_seconds == pytest.approx(0.2)
    assert run.itl_median_seconds == pytest.approx(0.05)
    assert run.running_batch == pytest.approx(2.0)
    assert not run.saturated
    assert within_targets(run, 0.25, 0.06)
    assert not within_targets(run, 0.15, 0.06)


def test_a_queue_that_waits_a_moment_but_does_not_grow_is_not_saturated() -> None:
    spiky = tuple((t / 2, 2.0, 8.0 if t == 19 else 0.0) for t in range(24))
    run = steady_run(gauges=spiky)
    assert run.queue_growth == pytest.approx(8.0 / 5)
    assert not run.saturated


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(
            {"requests": (*steady_run().requests[:5], StreamedRequest(5.0, (), "timed out"))},
            id="a measured request did not finish",
        ),
        pytest.param(
            {"gauges": tuple((t / 2, 2.0, max(0.0, t - 4.0)) for t in range(24))},
            id="the waiting queue grows over the window",
        ),
        pytest.param(
            {"requests": tuple(request(float(t), 0.2 * 2**t, 0.05) for t in range(10))},
            id="the TTFT keeps growing",
        ),
    ],
)
def test_a_run_whose_queue_grows_is_saturated(changes: dict[str, object]) -> None:
    assert steady_run(**changes).saturated


@given(
    threshold=st.floats(1.5, 9.0),
    steps=st.integers(1, 8),
)
def test_bisection_keeps_a_met_rate_within_its_factor_of_the_threshold(
    threshold: float, steps: int
) -> None:
    best, tries = bisect_max_rate(lambda r: r <= threshold, 1.0, 10.0, steps)
    assert len(tries) == steps
    assert 1.0 <= best <= threshold
    assert best >= threshold / 10 ** (1 / 2**steps) * (1 - 1e-9)
    assert all(ok == (rate <= threshold) for rate, ok in tries)


def test_errors_are_the_geometric_mean_and_the_worst_of_the_ratios() -> None:
    geometric, worst = log_errors([(1.1, 1.0), (1.0, 1.1)])
    assert geometric == pytest.approx(0.1)
    assert worst == pytest.approx(0.1)
    assert log_errors([(2.0, 1.0)])[1] == pytest.approx(1.0)
    assert math.isclose(log_errors([(3.0, 3.0)])[0], 0.0, abs_tol=1e-12)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(
            {"devices": [{"loads": [{"name": "a"}]}, {"loads": [{"name": "b"}]}]},
            id="each device's loads",
        ),
        pytest.param({"devices": [{}], "loads": [{"name": "a"}, {"name": "b"}]}, id="top-level"),
    ],
)
def test_a_results_plans_under_load_are_read_wherever_it_keeps_them(
    document: dict[str, Any],
) -> None:
    assert [load["name"] for load in result_loads(document)] == ["a", "b"]
