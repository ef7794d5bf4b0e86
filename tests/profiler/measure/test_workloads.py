import math

import pytest
import torch

from roofline_profiler.measure.devices import DeviceInfo
from roofline_profiler.measure.timing import QUICK
from roofline_profiler.measure.workloads import (
    CACHE_MULTIPLE,
    MIN_BANDWIDTH_BUFFER_BYTES,
    PEAK_FINALISTS,
    QUICK_CACHE_MULTIPLE,
    WEIGHT_CACHE_MULTIPLE,
    bandwidth_buffer_bytes,
    bandwidth_workloads,
    search_peak_shapes,
    sweep_workloads,
    weight_copies,
)


def _info(cache: int, memory: int | None, backend: str = "cpu") -> DeviceInfo:
    return DeviceInfo(torch.device("cpu"), 0, "test", backend, memory, cache)


def test_bandwidth_buffers_are_many_times_the_cache() -> None:
    info = _info(cache=96 << 20, memory=64 << 30)
    assert bandwidth_buffer_bytes(info) >= CACHE_MULTIPLE * (96 << 20)


def test_bandwidth_buffers_are_at_least_256_mib_on_small_caches() -> None:
    assert (
        bandwidth_buffer_bytes(_info(cache=1 << 20, memory=64 << 30)) == MIN_BANDWIDTH_BUFFER_BYTES
    )


def test_gpus_get_two_gib_buffers_when_memory_allows() -> None:
    assert (
        bandwidth_buffer_bytes(_info(cache=50 << 20, memory=141 << 30, backend="cuda")) == 2 << 30
    )


def test_bandwidth_buffers_never_take_more_than_a_tenth_of_memory() -> None:
    assert bandwidth_buffer_bytes(_info(cache=32 << 20, memory=1 << 30)) <= (1 << 30) // 10


def test_small_weights_are_rotated_so_the_cache_cannot_hold_them() -> None:
    cache = 32 << 20
    weight = 1024 * 1024 * 4
    copies = weight_copies(_info(cache=cache, memory=None), weight)
    assert copies == math.ceil(WEIGHT_CACHE_MULTIPLE * cache / weight)
    assert copies * weight >= WEIGHT_CACHE_MULTIPLE * cache


def test_a_weight_larger_than_the_cache_needs_one_copy() -> None:
    assert weight_copies(_info(cache=32 << 20, memory=None), 4096 * 14336 * 4) == 1


def test_quick_mode_takes_smaller_bandwidth_buffers_still_beyond_the_cache() -> None:
    info = _info(cache=256 << 20, memory=64 << 30)
    assert bandwidth_buffer_bytes(info, quick=True) == QUICK_CACHE_MULTIPLE * (256 << 20)
    assert bandwidth_buffer_bytes(info, quick=True) < bandwidth_buffer_bytes(info)


def test_the_bandwidth_family_has_two_read_kernels_and_a_copy() -> None:
    workloads = bandwidth_workloads(_info(cache=1 << 20, memory=None), quick=True)
    assert [w.label for w in workloads] == ["read", "readMatvec", "copy"]
    read, matvec, copy = workloads
    assert matvec.work == read.work  # 256 MiB divides into rows of 4096 elements
    assert copy.work == 2 * read.work
    for w in workloads:
        w.fn(0)


def test_the_sweep_has_one_workload_per_batch_with_the_decode_flop_count() -> None:
    workloads = sweep_workloads(_info(1 << 20, None), "float32", 256, 512, (1, 8))
    assert [w.label for w in workloads] == ["decode B=1", "decode B=8"]
    assert workloads[1].work == 2 * 8 * 256 * 512
    assert tuple(workloads[1].fn(3).shape) == (8, 512)  # type: ignore[attr-defined]


def test_the_peak_search_starts_small_and_keeps_the_best_shapes() -> None:
    seen: list[str] = []
    shapes = search_peak_shapes(_info(1 << 20, 64 << 30), "float32", QUICK, seen.append)
    assert seen[0] == "peak search mm 1024x1024x1024"
    assert 1 <= len(shapes) <= PEAK_FINALISTS
    assert all(f"peak search mm {m}x{n}x{k}" in seen for m, n, k in shapes)


def test_the_peak_search_never_grows_past_the_device_memory() -> None:
    # 3 operands of 1024x1024 fp32 are 12 MiB: with 16 MiB of memory only the first size fits.
    seen: list[str] = []
    shapes = search_peak_shapes(_info(1 << 20, 16 << 20), "float32", QUICK, seen.append)
    assert shapes == [(1024, 1024, 1024)]
    assert seen == ["peak search mm 1024x1024x1024"]


def test_every_run_of_the_sweep_takes_the_next_weight_copy_whichever_batch_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 64 MiB cache and 8 MiB weights: 16 copies; every use of a copy is 16 runs after the last.
    info = _info(cache=64 << 20, memory=None)
    k, n = 1024, 2048
    copies = weight_copies(info, k * n * 4)
    seen: list[int] = []
    real = torch.matmul

    def recording(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        seen.append(w.data_ptr())
        return real(x, w, out=out)

    workloads = sweep_workloads(info, "float32", k, n, [1, 2, 4])
    monkeypatch.setattr(torch, "matmul", recording)
    # Rounds as measure_rounds runs them: each batch a few runs, then the next batch.
    for runs in (3, 1, 2, 5, 1, 4):
        for w in workloads:
            for i in range(runs):
                w.fn(i)  # each workload's own run index starts over: it must not matter
    monkeypatch.undo()
    gaps = [
        later - earlier
        for earlier in range(len(seen))
        for later in range(earlier + 1, len(seen))
        if seen[later] == seen[earlier] and seen[earlier] not in seen[earlier + 1 : later]
    ]
    assert copies == 16
    assert len(set(seen)) == copies
    assert min(gaps) == copies
