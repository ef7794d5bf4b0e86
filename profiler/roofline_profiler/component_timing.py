"""Time the parts of a model's decode step, batch by batch, in interleaved passes.

Each part (a layer body, the head, attention) is timed at every batch. Timing one batch after the
other would let a burst of interference from another process land on one batch and, multiplied
by the layer count, bend the predicted curve there. So the batches are timed in
:data:`PASSES` round-robin passes and each batch's samples from all passes form its measurement
(the same defence as the reference bench's interleaved rounds): a burst then costs every batch a
little instead of one batch a lot.

Within a pass a fast part is timed adaptively (``timing.measure``: warm-up, then runs until the
precision target or the pass's budget). A part whose first run takes :data:`SLOW_RUN_SECONDS` or
more (a compute-bound batch of a large model) is dominated by its work, not by one-time costs: that
first run is a sample, and it is run once more per later pass (``--quick``: not again), which keeps
an 8B model's largest batches within a profile's time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from roofline_profiler.stats import Measurement
from roofline_profiler.timing import TimingPolicy, measure, synchronize

#: Round-robin passes over the batches.
PASSES = 2
#: A part whose first run takes this long is timed once per pass (once in all with --quick).
SLOW_RUN_SECONDS = 0.1

#: Per pass and batch: many cheap runs, within a small budget.
QUICK_PASS = TimingPolicy(
    min_runs=2, max_runs=20, budget_seconds=0.04, warmup_seconds=0.01, precision_target=0.03
)
DEFAULT_PASS = TimingPolicy(
    min_runs=3, max_runs=100, budget_seconds=0.15, warmup_seconds=0.03, precision_target=0.01
)


@dataclass(frozen=True)
class Part:
    """One part at one batch: ``run(i)`` does run ``i`` (rotating its inputs by ``i``)."""

    batch: int
    label: str
    run: Callable[[int], object]


def _once(run: Callable[[int], object], index: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    run(index)
    synchronize(device)
    return time.perf_counter() - start


def time_parts(
    parts: Sequence[Part],
    quick: bool,
    device: torch.device,
    progress: Callable[[str], None],
) -> list[Measurement]:
    """Measurements of every part, in the order given."""
    policy = QUICK_PASS if quick else DEFAULT_PASS
    samples: list[list[float]] = [[] for _ in parts]
    warmups = [0] * len(parts)
    slow = [False] * len(parts)
    next_index = [1] * len(parts)
    for number in range(PASSES):
        for i, part in enumerate(parts):
            progress(f"{part.label} (pass {number + 1}/{PASSES})")
            if number == 0:
                first = _once(part.run, 0, device)
                slow[i] = first >= SLOW_RUN_SECONDS
                if slow[i]:
                    # A run this long is its work, not one-time costs: it counts as a sample.
                    samples[i].append(first)
                    continue
                warmups[i] += 1
            if slow[i]:
                if not quick:
                    samples[i].append(_once(part.run, next_index[i], device))
                    next_index[i] += 1
                continue
            m = measure(part.run, label=part.label, work=0.0, device=device, policy=policy)
            samples[i].extend(m.times)
            warmups[i] += m.warmup_runs
    return [
        Measurement(label=part.label, times=tuple(times), warmup_runs=warmup)
        for part, times, warmup in zip(parts, samples, warmups, strict=True)
    ]
