from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline_profiler.core.decode_model import (
    MissingMeasurement,
    engine_step_seconds,
    parts_step_seconds,
)
from roofline_profiler.core.engines import NONE, VLLM_CPU
from roofline_profiler.core.step_model import (
    Chunk,
    Curve,
    chunks_of,
    has_prefill,
    mixed_step,
    prefill_seconds,
)
from tests.profiler.core.prefill_builders import with_prefill
from tests.profiler.core.step_builders import BATCHES, synthetic


def test_a_curve_is_linear_between_points_and_extends_its_last_segment() -> None:
    curve = Curve([(1, 1.0), (3, 2.0), (5, 4.0)])
    assert curve(2) == pytest.approx(1.5)
    assert curve(7) == pytest.approx(6.0)
    assert curve(0.5) == 1.0


def test_a_curve_never_falls_where_its_points_do() -> None:
    curve = Curve([(1, 2.0), (4, 1.0), (8, 3.0)])
    assert curve(4) == 2.0
    assert curve(2) == 2.0
    assert curve(6) == pytest.approx(2.5)


def test_one_point_scales_in_proportion_past_it() -> None:
    assert Curve([(2, 1.0)])(6) == pytest.approx(3.0)


def test_a_decode_only_step_at_a_measured_batch_is_the_decode_plans_step() -> None:
    m = with_prefill()
    step = mixed_step(m, VLLM_CPU)
    for batch in BATCHES:
        assert step(batch, 1024, ()) == pytest.approx(engine_step_seconds(m, VLLM_CPU, batch, 1024))


def test_a_prompt_chunk_adds_its_tokens_to_the_bodies_and_its_pairs_to_attention() -> None:
    m = with_prefill()
    step = mixed_step(m, NONE)
    layers = m.arch.num_layers
    # 4 decodes plus a completing 60-token chunk: the bodies at 64 tokens, the head for 5
    # sequences (2 ms: flat), decode attention at batch 4 and the chunk's 60·61/2 pairs.
    body = 1e-3 + 1e-4 * 64
    attention = (5e-6 + 1e-9 * 4 * 1024) + 1e-9 * 60 * 61 / 2
    expected = layers * (body + attention) + 2e-3
    assert step(4, 1024, (Chunk(60, 0, True),)) == pytest.approx(expected)


def test_an_idle_step_costs_nothing() -> None:
    assert mixed_step(with_prefill(), VLLM_CPU)(0, 0, ()) == 0.0


def test_a_prompt_alone_is_cut_into_chunks_of_the_step_budget() -> None:
    assert chunks_of(5000, 2048) == [
        Chunk(2048, 0, False),
        Chunk(2048, 2048, False),
        Chunk(904, 4096, True),
    ]
    step = mixed_step(with_prefill(), NONE)
    alone = prefill_seconds(step, 5000, 2048)
    assert alone == pytest.approx(sum(step(0, 0, (c,)) for c in chunks_of(5000, 2048)))


def test_without_prefill_parts_a_mixed_step_is_a_missing_measurement() -> None:
    m = synthetic()
    assert not has_prefill(m)
    with pytest.raises(MissingMeasurement, match="prefill was not measured"):
        mixed_step(m, NONE)


def test_a_faster_body_at_a_larger_batch_is_lifted_to_the_smaller_ones() -> None:
    m = with_prefill()
    bodies = tuple(
        replace(t, seconds=0.5e-3) if t.batch == 4 else t for t in m.layer_bodies["dense"]
    )
    m = replace(m, layer_bodies={"dense": bodies})
    step = mixed_step(m, NONE)
    assert parts_step_seconds(m, NONE, 4, 1024) < parts_step_seconds(m, NONE, 2, 1024)
    assert step(4, 1024, ()) >= step(2, 1024, ())


sizes = st.integers(min_value=0, max_value=3000)


@given(decodes=st.integers(0, 200), context=st.integers(1, 8192), new=sizes, prior=sizes)
def test_a_step_never_shrinks_as_its_decodes_context_or_chunk_grow(
    decodes: int, context: int, new: int, prior: int
) -> None:
    step = mixed_step(with_prefill(), VLLM_CPU)
    chunks = (Chunk(new, prior, True),) if new else ()
    base = step(decodes, context, chunks)
    assert step(decodes + 1, context, chunks) >= base
    assert step(decodes, context + 64, chunks) >= base
    assert step(decodes, context, (Chunk(new + 1, prior, True),)) >= base
    if new:
        assert step(decodes, context, (Chunk(new, prior + 1, True),)) >= base


def test_decode_attention_never_falls_as_the_context_grows() -> None:
    m = with_prefill()
    # Attention measured slower at the shorter context than at the longer one (noise).
    attention = tuple(
        replace(a, seconds=a.seconds * (20 if a.context_tokens == 1024 else 1)) for a in m.attention
    )
    m = replace(m, attention=attention)
    step = mixed_step(m, NONE)
    assert step(4, 2048, ()) >= step(4, 1024, ())
    assert step(4, 4096, ()) >= step(4, 1024, ())
