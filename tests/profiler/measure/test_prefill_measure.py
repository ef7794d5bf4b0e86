"""Measuring the parts of prefill on this CPU, with tiny shapes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline_profiler.core.decode_model import AttentionRoofline
from roofline_profiler.core.model_config import model_from_config
from roofline_profiler.core.prefill_parts import PREFILL_ROOFLINE, causal_pairs
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.measure_settings import ROOFLINE_ATTENTION, MeasureSettings
from roofline_profiler.measure.prefill_measure import (
    measure_prefill,
    prefill_roofline_seconds,
    prefill_sizes,
)
from tests.model_configs import TINY_DENSE

ARCH = model_from_config(TINY_DENSE, "tiny")
SETTINGS = MeasureSettings(
    ARCH, "float32", 1, (1, 4), (64,), quick=True, chunk_tokens=(16, 64), prompt_tokens=(32, 128)
)


def test_the_bodies_are_timed_at_the_chunk_sizes_and_attention_at_the_prompts() -> None:
    (info,) = resolve_devices("cpu")
    p = measure_prefill(SETTINGS, info, lambda _: None)
    assert p is not None
    assert p.chunk_tokens == (16, 64)
    assert p.prompt_tokens == (32, 128)
    assert p.attention_source == "torch-sdpa"
    assert all(t.seconds > 0 and t.measurement is not None for t in p.layer_bodies["dense"])
    assert tuple(t.tokens for t in p.layer_glue["dense"]) == (16, 64)
    assert all(a.seconds > 0 and a.measurement is not None for a in p.attention)


def test_without_chunk_sizes_nothing_is_measured() -> None:
    (info,) = resolve_devices("cpu")
    assert measure_prefill(replace(SETTINGS, chunk_tokens=()), info, lambda _: None) is None


def test_from_the_roofline_prefill_attention_is_its_causal_flops_at_the_peak() -> None:
    roofline = AttentionRoofline(read_bytes_per_second=1e12, peak_flops_per_second=1e9)
    settings = replace(SETTINGS, attention=ROOFLINE_ATTENTION, attention_roofline=roofline)
    (info,) = resolve_devices("cpu")
    p = measure_prefill(replace(settings, chunk_tokens=(16,)), info, lambda _: None)
    assert p is not None
    assert p.attention_source == PREFILL_ROOFLINE
    flops = 4 * ARCH.num_heads * ARCH.head_dim * causal_pairs(128, 0)
    assert p.attention[1].seconds == pytest.approx(flops / 1e9)
    assert p.attention[1].measurement is None


def test_where_the_bytes_take_longer_the_roofline_takes_the_bytes() -> None:
    roofline = AttentionRoofline(read_bytes_per_second=1.0, peak_flops_per_second=1e30)
    kv = 2 * 128 * ARCH.num_kv_heads * ARCH.head_dim * 4
    assert prefill_roofline_seconds(roofline, SETTINGS, 128) == pytest.approx(kv)


@pytest.mark.parametrize(
    ("quick", "budget", "chunks"),
    [
        pytest.param(False, 2048, (16, 64, 256, 1024, 2048), id="the-default-budget"),
        pytest.param(False, 512, (16, 64, 256, 512), id="a-smaller-budget-is-timed-too"),
        pytest.param(True, 2048, (64, 512, 2048), id="quick"),
    ],
)
def test_chunk_sizes_run_up_to_the_steps_token_budget(
    quick: bool, budget: int, chunks: tuple[int, ...]
) -> None:
    assert prefill_sizes(quick, budget)[0] == chunks
