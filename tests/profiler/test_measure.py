import math

import torch

from roofline_profiler.devices import DeviceInfo
from roofline_profiler.measure import (
    CACHE_MULTIPLE,
    MIN_BANDWIDTH_BUFFER_BYTES,
    WEIGHT_CACHE_MULTIPLE,
    bandwidth_buffer_bytes,
    measure_sweep,
    weight_copies,
)
from roofline_profiler.timing import QUICK


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


def test_the_sweep_times_every_batch_with_the_decode_flop_count() -> None:
    seen: list[str] = []
    results = measure_sweep(_info(1 << 20, None), "float32", 256, 512, (1, 8), QUICK, seen.append)
    assert [b for b, _ in results] == [1, 8]
    assert results[1][1].work == 2 * 8 * 256 * 512
    assert all(m.repeats >= QUICK.min_runs for _, m in results)
    assert seen == ["decode sweep B=1 (1/2)", "decode sweep B=8 (2/2)"]
