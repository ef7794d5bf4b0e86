"""Synthetic measured parts of a decode step, for the tests of composing and publishing them."""

from __future__ import annotations

from roofline_profiler.core.decode_model import (
    AttentionTime,
    ComponentTime,
    ModelMeasurements,
    layer_kinds,
)
from roofline_profiler.core.model_config import load_model
from roofline_profiler.core.stats import Measurement

BATCHES = (1, 2, 4, 8)
LLAMA_8B = load_model("llama-3.1-8b")


def synthetic(
    arch=LLAMA_8B,  # type: ignore[no-untyped-def]
    contexts: tuple[int, ...] = (1024, 4096),
    tp: int = 1,
) -> ModelMeasurements:
    """Body 1 ms + 0.1 ms/token of batch, head 2 ms, attention 1 µs per sequence-token + 5 µs."""
    kinds = layer_kinds(arch)
    return ModelMeasurements(
        arch=arch,
        dtype="bfloat16",
        tensor_parallel=tp,
        layer_bodies={
            kind: tuple(
                ComponentTime(b, 1e-3 + 1e-4 * b, Measurement("body", (1e-3,))) for b in BATCHES
            )
            for kind in kinds
        },
        head=tuple(ComponentTime(b, 2e-3) for b in BATCHES),
        head_scale=1.0,
        attention=tuple(
            AttentionTime(b, c, 5e-6 + 1e-9 * b * c, extrapolated=b == 8)
            for c in contexts
            for b in BATCHES
        ),
        all_reduce=tuple(ComponentTime(b, 1e-5) for b in BATCHES) if tp > 1 else (),
        all_reduce_measured=tp == 1,
    )


def waited(waits: tuple[float, ...]) -> Measurement:
    """A part measured in one pass per wait share, each pass's run 1 ms."""
    return Measurement(
        "part", (1e-3,) * len(waits), rounds=tuple(range(len(waits))), cpu_waits=waits
    )
