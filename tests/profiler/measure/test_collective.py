"""The tensor-parallel all-reduce: timed among real processes (gloo on the CPU), or modelled."""

from __future__ import annotations

import pytest

from roofline_profiler.measure.collective import (
    RUNS,
    measure_all_reduce,
    modelled_all_reduce_seconds,
)


def test_a_ring_all_reduce_moves_two_n_minus_one_over_n_of_the_buffer() -> None:
    seconds = modelled_all_reduce_seconds(8, 4096, 2, 4, bandwidth=1e12)
    assert seconds == pytest.approx(2 * 3 / 4 * 8 * 4096 * 2 / 1e12)
    assert modelled_all_reduce_seconds(8, 4096, 2, 1, bandwidth=1e12) == 0.0


def test_the_all_reduce_is_timed_among_two_gloo_processes_per_batch() -> None:
    samples = measure_all_reduce("gloo", 2, 256, (1, 8), "float32")
    assert [batch for batch, _ in samples] == [1, 8]
    for _, times in samples:
        assert len(times) == RUNS
        assert all(0 < t < 1 for t in times)
