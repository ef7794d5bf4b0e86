"""The shape of a step the load model asks the step model about: the running decodes and the
prompt chunks the engine's scheduler put into the same step.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


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
