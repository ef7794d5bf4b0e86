"""Timing a decode step's parts in interleaved passes (fake clock and fake CPU wait counter)."""

from __future__ import annotations

import time

import pytest
import torch

from roofline_profiler.measure import timing
from roofline_profiler.measure.component_timing import DEFAULT_PASS, QUICK_PASS, Part, time_parts

CPU = torch.device("cpu")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """Every run advances the clock by its seconds and waits for a CPU half of that time."""
    state = {"now": 0.0, "waited": 0.0}
    monkeypatch.setattr(time, "perf_counter", lambda: state["now"])
    monkeypatch.setattr(timing, "cpu_wait_seconds", lambda: state["waited"])
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    return state


def _part(clock: dict[str, float], batch: int, seconds: float) -> Part:
    def run(_: int) -> None:
        clock["now"] += seconds
        clock["waited"] += seconds / 2

    return Part(batch, f"layer B={batch}", run)


def test_each_pass_is_a_round_of_the_parts_measurement_with_its_cpu_wait_share(
    clock: dict[str, float],
) -> None:
    fast, slow = time_parts(
        [_part(clock, 1, 0.01), _part(clock, 64, 0.5)], False, CPU, lambda _: None
    )
    assert set(fast.rounds) == set(range(DEFAULT_PASS.passes))
    assert fast.repeats >= DEFAULT_PASS.passes * DEFAULT_PASS.min_runs
    # One run per pass after the warm-up.
    assert slow.times == pytest.approx((0.5,) * DEFAULT_PASS.passes)
    assert slow.rounds == tuple(range(DEFAULT_PASS.passes))
    # Half of each run's time spent waiting, over two threads: a quarter of the CPU time.
    assert fast.cpu_waits == pytest.approx((0.25,) * DEFAULT_PASS.passes)
    assert slow.cpu_waits == pytest.approx((0.25,) * DEFAULT_PASS.passes)
    assert slow.confirmed_cpu_wait == pytest.approx(0.25)


def test_a_slow_part_in_quick_mode_is_one_sample_of_one_pass(clock: dict[str, float]) -> None:
    (slow,) = time_parts([_part(clock, 64, 0.5)], True, CPU, lambda _: None)
    assert slow.times == pytest.approx((0.5,))
    assert slow.rounds == (0,)
    assert slow.cpu_waits == pytest.approx((0.25,))


def test_without_a_cpu_wait_counter_the_passes_still_keep_their_samples(
    clock: dict[str, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing, "cpu_wait_seconds", lambda: None)
    (part,) = time_parts([_part(clock, 1, 0.01)], True, CPU, lambda _: None)
    assert set(part.rounds) == set(range(QUICK_PASS.passes))
    assert part.cpu_waits == ()


def test_the_first_run_of_a_slow_part_is_a_warm_up_not_a_sample(clock: dict[str, float]) -> None:
    runs: list[int] = []

    def run(index: int) -> None:
        runs.append(index)
        clock["now"] += 1.0 if index == 0 else 0.5  # one-time costs in the first run

    (slow,) = time_parts([Part(64, "layer B=64", run)], False, CPU, lambda _: None)
    assert slow.times == pytest.approx((0.5,) * DEFAULT_PASS.passes)
    assert slow.warmup_runs == 1
    assert runs == list(range(DEFAULT_PASS.passes + 1))


def test_on_a_gpu_a_graph_of_several_runs_is_replayed_and_its_time_shared_among_them(
    clock: dict[str, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    from roofline_profiler.measure import component_timing

    captured: list[int] = []

    def capture(part: Part, device: torch.device) -> component_timing.Graphed:
        captured.append(part.period)

        def replay(_: int) -> None:
            clock["now"] += 0.004 * part.period  # four runs of 4 ms each

        return component_timing.Graphed(run=replay, runs=part.period)

    monkeypatch.setattr(component_timing, "_graphs_on", lambda _: True)
    monkeypatch.setattr(component_timing, "capture_graph", capture)
    notes: list[str] = []
    (part,) = time_parts(
        [Part(8, "layer B=8", lambda _: None, period=4)], True, CPU, lambda _: None, notes
    )
    assert captured == [4]  # captured once, replayed in every pass
    assert part.times == pytest.approx([0.004] * len(part.times))
    assert set(part.rounds) == {0, 1}
    assert notes == []


def test_on_a_gpu_a_part_that_cannot_be_captured_is_timed_eagerly_and_noted(
    clock: dict[str, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    from roofline_profiler.measure import component_timing

    def capture(part: Part, device: torch.device) -> component_timing.Graphed:
        raise RuntimeError("operation not permitted when stream is capturing\nmore detail")

    monkeypatch.setattr(component_timing, "_graphs_on", lambda _: True)
    monkeypatch.setattr(component_timing, "capture_graph", capture)
    notes: list[str] = []
    fast, _ = time_parts(
        [_part(clock, 1, 0.01), _part(clock, 8, 0.01)], True, CPU, lambda _: None, notes
    )
    assert fast.times == pytest.approx([0.01] * len(fast.times))
    (note,) = notes
    assert note.startswith("2 of 2 parts (layer B=1, layer B=8) could not be captured")
    assert "(operation not permitted when stream is capturing)" in note
    assert "more detail" not in note


def test_a_burst_through_three_whole_passes_leaves_the_parts_time_at_its_quiet_runs(
    clock: dict[str, float],
) -> None:
    passes_seen: list[str] = []

    def run(_: int) -> None:
        burst = len(passes_seen) >= 3  # the last three passes run 40% slower
        clock["now"] += 0.004 * (1.4 if burst else 1.0)

    (part,) = time_parts(
        [Part(2, "layer B=2", run)], False, CPU, lambda label: passes_seen.append(label)
    )
    assert len(passes_seen) == DEFAULT_PASS.passes
    assert part.quiet_median == pytest.approx(0.004)
    assert part.median == pytest.approx(0.0056)  # what the median of every sample makes of it
    slowed = [t for t, r in zip(part.times, part.rounds, strict=True) if r >= 2]
    assert slowed == pytest.approx([0.0056] * len(slowed))
