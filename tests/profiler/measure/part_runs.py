"""A stand-in for ``component_timing.time_parts`` that runs the parts as its passes do, without
timing them, for tests of what each run reads."""

from __future__ import annotations

from roofline_profiler.core.stats import Measurement
from roofline_profiler.measure.component_timing import Part


def interleaved(parts: list[Part], *_: object) -> list[Measurement]:
    """``time_parts`` as a round runs it, each batch a few runs then the next, with each part's
    own run index starting over."""
    for runs in (3, 1, 2):
        for part in parts:
            for i in range(runs):
                part.run(i)
    return [Measurement(part.label, (1e-3,)) for part in parts]
