"""Synthetic prefill parts beside the synthetic decode parts of ``step_builders``."""

from __future__ import annotations

from dataclasses import replace

from roofline_profiler.core.decode_model import ModelMeasurements
from roofline_profiler.core.prefill_parts import (
    PrefillAttentionTime,
    PrefillMeasurements,
    PrefillTokensTime,
)
from tests.profiler.core.step_builders import synthetic

CHUNKS = (16, 64, 256, 1024)
PROMPTS = (128, 512)


def with_prefill(m: ModelMeasurements | None = None) -> ModelMeasurements:
    """``synthetic()`` (body 1 ms + 0.1 ms per token) with its body at chunk sizes on the same
    line and prefill attention 1 ns per causal pair."""
    m = m or synthetic()
    bodies = {
        kind: tuple(PrefillTokensTime(n, 1e-3 + 1e-4 * n) for n in CHUNKS)
        for kind in m.layer_bodies
    }
    attention = tuple(PrefillAttentionTime(p, 1e-9 * p * (p + 1) / 2) for p in PROMPTS)
    return replace(m, prefill=PrefillMeasurements(bodies, attention, "vllm-cpu-test"))
