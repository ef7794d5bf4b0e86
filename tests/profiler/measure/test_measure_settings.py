"""The memory a model's measurement may use, and how much it must touch between two reuses."""

from __future__ import annotations

from dataclasses import replace

from roofline_profiler.core.model_config import model_from_config
from roofline_profiler.core.models import weight_bytes
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.measure_settings import (
    CACHE_MULTIPLE,
    MEMORY_FRACTION,
    UNKNOWN_MEMORY_BYTES,
    MeasureSettings,
    evicting_bytes,
    memory_budget,
)
from tests.model_configs import TINY_LLAMA


def test_runs_touch_several_caches_unless_the_whole_model_is_smaller() -> None:
    (info,) = resolve_devices("cpu")
    tiny = model_from_config(TINY_LLAMA, "tiny")
    settings = MeasureSettings(tiny, "float32", 1, (1,), (64,), quick=True)
    assert evicting_bytes(settings, info) == weight_bytes(tiny, 4)  # a tiny model fits a cache
    huge = replace(tiny, num_layers=4096, hidden_size=4096, intermediate_size=16384)
    big = replace(settings, arch=huge)
    assert evicting_bytes(big, info) == CACHE_MULTIPLE * info.cache_bytes


def test_the_memory_budget_is_a_share_of_the_devices_memory() -> None:
    (info,) = resolve_devices("cpu")
    assert memory_budget(replace(info, memory_bytes=8 << 30)) == int((8 << 30) * MEMORY_FRACTION)
    unknown = replace(info, memory_bytes=None)
    assert memory_budget(unknown) == int(UNKNOWN_MEMORY_BYTES * MEMORY_FRACTION)
