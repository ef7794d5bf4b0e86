import itertools
import time

import pytest
import torch

from roofline_profiler.measure import timing
from roofline_profiler.measure.timing import (
    MIN_ROUNDS,
    TimingPolicy,
    Workload,
    measure,
    measure_rounds,
)
from roofline_profiler.wire.host_state_detection import Roles

CPU = torch.device("cpu")


def _policy(**overrides: float) -> TimingPolicy:
    fields = {
        "min_rounds": 3,
        "max_rounds": 8,
        "slice_seconds": 0.0,
        "warmup_seconds": 0.0,
        "budget_seconds": 30.0,
        "search_seconds": 0.0,
        "max_run_seconds": 1.0,
    }
    fields.update(overrides)
    return TimingPolicy(**fields)  # type: ignore[arg-type]


def _sleeper(label: str, seconds: float, order: list[str]) -> Workload:
    def run(_: int) -> None:
        order.append(label)
        time.sleep(seconds)

    return Workload(label, 1.0, run)


def test_rounds_interleave_the_workloads_and_record_each_samples_round() -> None:
    order: list[str] = []
    workloads = [_sleeper(name, 0.002, order) for name in ("a", "b", "c")]
    measured = measure_rounds(workloads, CPU, _policy(max_rounds=3), lambda _: None)
    timed = order[3:]  # after one warm-up call each
    assert sorted(timed) == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    assert [set(timed[i : i + 3]) for i in (0, 3, 6)] == [{"a", "b", "c"}] * 3
    assert timed[:3] != timed[3:6]  # the order rotates from round to round
    for m in measured.values():
        assert m.rounds == (0, 1, 2)
        assert m.warmup_runs == 1


def test_a_workload_interference_hit_gets_more_rounds_and_a_steady_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"now": 0.0}  # a fake clock, so the machine's own noise cannot confirm or refute
    monkeypatch.setattr(time, "perf_counter", lambda: clock["now"])
    # Each run slower than the last by a fifth: its fastest is never repeated, so it stays
    # unconfirmed.
    durations = itertools.chain([0.002], (0.002 * (1 + 0.2 * i) for i in itertools.count()))

    def steady(_: int) -> None:
        clock["now"] += 0.002

    def erratic(_: int) -> None:
        clock["now"] += next(durations)

    workloads = [Workload("steady", 1.0, steady), Workload("erratic", 1.0, erratic)]
    measured = measure_rounds(workloads, CPU, _policy(max_rounds=6), lambda _: None)
    assert len(measured["steady"].round_bests) == 3
    assert len(measured["erratic"].round_bests) == 6


def test_after_the_host_changes_state_a_settled_workload_is_measured_again_in_the_new_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"now": 0.0, "round": -1}  # a fake clock; the host turns slow from round 3 on
    monkeypatch.setattr(time, "perf_counter", lambda: clock["now"])
    fast_state = {"a": [1.0, 1.2, 1.4], "b": [1.0, 1.2, 1.4]}  # unsettled: never confirmed

    def memory_bound(label: str) -> Workload:
        def run(_: int) -> None:
            r = clock["round"]
            clock["now"] += 2.0 if r >= 3 else fast_state[label][max(r, 0)]

        return Workload(label, 1.0, run)

    def steady(_: int) -> None:
        clock["now"] += 2.0 if clock["round"] >= 3 else 1.0

    def progress(message: str) -> None:
        if message.startswith("round "):
            clock["round"] = int(message.split()[1].rstrip(":")) - 1

    workloads = [memory_bound("a"), memory_bound("b"), Workload("c", 1.0, steady)]
    policy = _policy(min_rounds=3, max_rounds=12, budget_seconds=1e6)
    roles = Roles(bandwidth=("a", "b"), peak=(), sweep={})
    measured = measure_rounds(workloads, CPU, policy, progress, roles=roles)
    # "c" settled in rounds 0-2 (fast); once "a" and "b" showed the slow state (rounds 3 and 4),
    # "c" was timed again until the slow state had two rounds of it, and then the rounds ended.
    assert sorted(set(measured["c"].rounds)) == [0, 1, 2, 5, 6]
    assert sorted(set(measured["a"].rounds)) == list(range(7))


def test_a_spent_budget_stops_the_rounds_at_three_so_a_best_run_can_still_be_confirmed() -> None:
    durations = (0.01 * (1 + 0.3 * i) for i in itertools.count())
    workload = Workload("slowing", 1.0, lambda _: time.sleep(next(durations)))
    policy = _policy(min_rounds=6, budget_seconds=0.0)
    measured = measure_rounds([workload], CPU, policy, lambda _: None)
    assert len(measured["slowing"].round_bests) == MIN_ROUNDS == 3


def test_the_budget_counts_from_the_profiles_start_not_from_the_rounds() -> None:
    def steady() -> Workload:
        return Workload("steady", 1.0, lambda _: time.sleep(0.005))

    policy = _policy(min_rounds=6, max_rounds=6, budget_seconds=5.0)
    # A profile whose search and allocation already took the whole budget gets the fewest rounds.
    late = measure_rounds([steady()], CPU, policy, lambda _: None, time.perf_counter() - 5.0)
    assert len(late["steady"].round_bests) == MIN_ROUNDS
    on_time = measure_rounds([steady()], CPU, policy, lambda _: None)
    assert len(on_time["steady"].round_bests) == 6


def test_a_round_starts_only_if_it_would_end_within_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"now": 0.0}  # a fake clock: every run takes exactly one second
    monkeypatch.setattr(time, "perf_counter", lambda: clock["now"])

    def run(_: int) -> None:
        clock["now"] += 1.0

    workload = Workload("steady", 1.0, run)
    policy = _policy(min_rounds=20, max_rounds=20, budget_seconds=10.5)
    measured = measure_rounds([workload], CPU, policy, lambda _: None, started=0.0)
    # Warm-up ends at 1 s and each round takes 1 s: the round from 10 s to 11 s would overrun.
    assert len(measured["steady"].round_bests) == 9
    assert clock["now"] == 10.0


def test_each_round_on_a_cpu_records_the_share_its_threads_waited_for_a_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"now": 0.0, "waited": 0.0}  # every run: one second, half a second of waiting
    monkeypatch.setattr(time, "perf_counter", lambda: clock["now"])
    monkeypatch.setattr(timing, "cpu_wait_seconds", lambda: clock["waited"])
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)

    def run(_: int) -> None:
        clock["now"] += 1.0
        clock["waited"] += 0.5

    measured = measure_rounds([Workload("held", 1.0, run)], CPU, _policy(), lambda _: None)
    assert measured["held"].cpu_waits == (0.25, 0.25, 0.25)  # 0.5 s of 2 threads x 1 s


def test_this_platform_reports_its_threads_cpu_waits_or_none() -> None:
    waited = timing.cpu_wait_seconds()
    assert waited is None or waited >= 0.0


def test_a_slice_holds_several_runs_of_a_fast_workload() -> None:
    workload = Workload("fast", 1.0, lambda _: time.sleep(0.001))
    measured = measure_rounds([workload], CPU, _policy(slice_seconds=0.01), lambda _: None)
    assert measured["fast"].repeats >= 3 * 4


def test_an_in_cache_workload_starts_every_slice_with_an_untimed_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"now": 0.0}
    monkeypatch.setattr(time, "perf_counter", lambda: clock["now"])
    # A streaming workload evicts the matmul's operands; the matmul's next run is slow.
    cache = {"warm": False}
    calls: list[int] = []

    def stream(_: int) -> None:
        cache["warm"] = False
        clock["now"] += 0.001

    def matmul(index: int) -> None:
        calls.append(index)
        clock["now"] += 0.001 if cache["warm"] else 0.004
        cache["warm"] = True

    workloads = [Workload("stream", 1.0, stream), Workload("matmul", 1.0, matmul, rewarm=True)]
    measured = measure_rounds(workloads, CPU, _policy(max_rounds=3), lambda _: None)["matmul"]
    assert measured.repeats == 3  # one timed run per slice (slice_seconds=0)
    assert measured.warmup_runs == 1 + 3  # the first call, then one per slice
    assert measured.times == pytest.approx((0.001,) * 3)  # no timed run paid for the eviction
    assert calls == list(range(7))  # untimed runs take their own indices too


def test_a_first_look_times_at_least_the_minimum_runs_after_a_warm_up_call() -> None:
    calls: list[int] = []
    m = measure(calls.append, label="noop", work=1.0, device=CPU, seconds=0.0, min_runs=4)
    assert m.repeats == 4
    assert calls == [0, 1, 2, 3, 4]  # each call gets its own index, for buffer rotation
