import time

import torch

from roofline_profiler.timing import TimingPolicy, measure

CPU = torch.device("cpu")


def test_measure_keeps_every_timed_run_and_counts_warmup_separately() -> None:
    calls: list[int] = []
    policy = TimingPolicy(
        min_runs=5, max_runs=5, budget_seconds=10, warmup_seconds=0.0, precision_target=0.0
    )
    m = measure(calls.append, label="noop", work=1.0, device=CPU, policy=policy)
    assert m.repeats == 5
    assert m.warmup_runs == len(calls) - 5
    assert calls == list(range(len(calls)))  # each call gets its own index, for buffer rotation


def test_a_time_budget_stops_repetition_after_the_minimum_runs() -> None:
    policy = TimingPolicy(
        min_runs=3, max_runs=1000, budget_seconds=0.05, warmup_seconds=0.0, precision_target=0.0
    )
    m = measure(lambda _: time.sleep(0.01), label="sleep", work=1.0, device=CPU, policy=policy)
    assert 3 <= m.repeats < 20
    assert all(t >= 0.009 for t in m.times)


def test_a_steady_workload_stops_once_precise() -> None:
    policy = TimingPolicy(
        min_runs=4, max_runs=1000, budget_seconds=30, warmup_seconds=0.0, precision_target=0.5
    )
    m = measure(lambda _: time.sleep(0.002), label="sleep", work=1.0, device=CPU, policy=policy)
    assert m.repeats < 100
