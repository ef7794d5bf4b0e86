"""An engine step that carries prompt chunks beside the running decodes, composed from the
measured parts (``decode_model``, ``prefill_parts``).

Under chunked prefill (vLLM's default; its V1 scheduler, ``vllm/v1/core/sched/scheduler.py``,
fills each step with the running requests' tokens first, then prompt chunks up to
``--max-num-batched-tokens``), a step of ``B`` decodes at mean context ``C`` and chunks of
``n_i`` prompt tokens after ``p_i`` earlier ones takes

    step = Σ_kind layers_kind · body_kind(T)               T = B + Σ n_i tokens through the GEMMs
         + layers · (attention(B, C) + Σ prefill_attention(n_i, p_i))
         + layers · 2 · all_reduce(T)                      tensor parallel
         + head(B + chunks)                                one logit row per request in the step
         + engine overhead(B + chunks sequences)

The head computes one row per scheduled request: vLLM takes the logits at each request's last
scheduled token and discards a partial prompt's sample. For an engine that fuses the layers' glue
(``engines``), the bodies are taken less their eager glue and the engine's per-layer work is
added, as for a decode step.

Every part is a curve through its measured points, linear between them, extended past the
largest along its last segment (a compute-bound body or attention grows in proportion to its
tokens or pairs), and made non-decreasing: more tokens, sequences or pairs never take less time,
so a step never shrinks as the batch, the context or a chunk grows. A decode-only step at a
measured batch is the decode plan's parts (``decode_model.parts_step_seconds``) wherever those
parts grow with the batch.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from roofline_profiler.core.decode_model import (
    ALL_REDUCES_PER_LAYER,
    MissingMeasurement,
    ModelMeasurements,
    attention_seconds,
    fuses_glue,
    layers_of_kind,
)
from roofline_profiler.core.engines import Engine
from roofline_profiler.core.prefill_parts import causal_pairs


@dataclass(frozen=True)
class Chunk:
    """``new_tokens`` prompt tokens of one request in one step, after ``prior_tokens`` of its
    prompt that earlier steps prefilled; ``completes`` when this chunk ends the prompt (the step
    then samples that request's first token)."""

    new_tokens: int
    prior_tokens: int
    completes: bool


#: Seconds of one engine step carrying ``decodes`` running sequences (one token each, their mean
#: context ``context_tokens``) and the prompt ``chunks``; never shorter as any of them grows.
StepCost = Callable[[int, int, Sequence[Chunk]], float]


class Curve:
    """A part's seconds as a function of its size (tokens, sequences, pairs): linear between
    measured points, extended along the last segment past the largest (in proportion to the size
    from a single point), the smallest point's time below it, and non-decreasing throughout."""

    def __init__(self, points: Sequence[tuple[float, float]]) -> None:
        if not points:
            raise MissingMeasurement("a part has no measured point")
        by_size: dict[float, float] = {}
        for size, seconds in sorted(points):
            by_size[size] = max(seconds, by_size.get(size, 0.0))
        xs, ys, top = [], [], 0.0
        for size in sorted(by_size):
            top = max(top, by_size[size])
            xs.append(size)
            ys.append(top)
        self.xs, self.ys = xs, ys

    def __call__(self, size: float) -> float:
        xs, ys = self.xs, self.ys
        if size <= xs[0]:
            return ys[0]
        if size >= xs[-1]:
            if len(xs) == 1:
                return ys[0] * size / xs[0] if xs[0] > 0 else ys[0]
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            return ys[-1] + slope * (size - xs[-1])
        i = bisect_left(xs, size)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (size - x0) / (x1 - x0)


def has_prefill(m: ModelMeasurements) -> bool:
    """Whether ``m`` holds the prefill parts a mixed step needs."""
    return m.prefill is not None and bool(m.prefill.attention) and bool(m.prefill.layer_bodies)


def mixed_step(m: ModelMeasurements, engine: Engine) -> StepCost:
    """``engine``'s step as a function of its decodes, their context and its prompt chunks."""
    prefill = m.prefill
    if prefill is None or not has_prefill(m):
        raise MissingMeasurement(f"{m.arch.name}: prefill was not measured")
    fused = fuses_glue(m, engine) and all(k in prefill.layer_glue for k in prefill.layer_bodies)
    bodies: dict[str, Curve] = {}
    for kind, times in m.layer_bodies.items():
        points = [(t.batch, t.seconds) for t in times]
        points += [(t.tokens, t.seconds) for t in prefill.layer_bodies.get(kind, ())]
        if fused:
            glue = {t.batch: t.seconds for t in m.layer_glue[kind]}
            glue |= {t.tokens: t.seconds for t in prefill.layer_glue[kind]}
            points = [(size, max(0.0, seconds - glue.get(size, 0.0))) for size, seconds in points]
        bodies[kind] = Curve(points)
    head = Curve([(t.batch, t.seconds) for t in m.head])
    prefill_attention = Curve([(0, 0.0), *((a.pairs, a.seconds) for a in prefill.attention)])
    all_reduce = Curve([(t.batch, t.seconds) for t in m.all_reduce]) if m.all_reduce else None
    layers = m.arch.num_layers

    measured_contexts = m.contexts

    @lru_cache(maxsize=4096)
    def decode_attention(context: int) -> Curve:
        # Never less than at a shorter measured context: two noisy measured contexts can draw a
        # line that falls, and a longer context reads more KV.
        shorter = [c for c in measured_contexts if c < context]
        points = [(0, 0.0)] + [
            (b, max(attention_seconds(m, b, c)[0] for c in (context, *shorter))) for b in m.batches
        ]
        return Curve(points)

    def step(decodes: int, context_tokens: int, chunks: Sequence[Chunk]) -> float:
        tokens = decodes + sum(c.new_tokens for c in chunks)
        sequences = decodes + len(chunks)
        if sequences == 0:
            return 0.0
        total = sum(layers_of_kind(m.arch, kind) * body(tokens) for kind, body in bodies.items())
        attention = sum(
            prefill_attention(causal_pairs(c.new_tokens, c.prior_tokens)) for c in chunks
        )
        if decodes:
            attention += decode_attention(max(1, context_tokens))(decodes)
        total += layers * attention + head(sequences)
        if m.tensor_parallel > 1:
            if all_reduce is None:
                raise MissingMeasurement("the all-reduce was not measured")
            total += layers * ALL_REDUCES_PER_LAYER * all_reduce(tokens)
        return total + engine.overhead_seconds(sequences, layers if fused else 0)

    return step


def chunks_of(prompt_tokens: int, budget: int) -> list[Chunk]:
    """A prompt alone in its steps: chunks of at most ``budget`` tokens, the last completing it."""
    if prompt_tokens < 1 or budget < 1:
        raise ValueError("a prompt and a step's token budget are at least one token")
    chunks, done = [], 0
    while done < prompt_tokens:
        n = min(budget, prompt_tokens - done)
        chunks.append(Chunk(n, done, done + n == prompt_tokens))
        done += n
    return chunks


def prefill_seconds(step: StepCost, prompt_tokens: int, max_num_batched_tokens: int) -> float:
    """Time to first token of one request alone on an idle engine: its prompt's chunk steps (the
    last samples the first token)."""
    return sum(step(0, 0, (c,)) for c in chunks_of(prompt_tokens, max_num_batched_tokens))
