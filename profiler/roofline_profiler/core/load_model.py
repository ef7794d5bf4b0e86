"""A replica under load: the engine's scheduler run over the predicted steps, request by request.

Time to first token and the latency between tokens under load follow from how the engine fills
its steps, which no single step time says: a request waits for a step with room for its prompt,
its prompt may be cut into chunks over several steps, and every step that carries a prompt chunk
is longer for the decodes it carries too (vLLM counts those steps in its inter-token latency).
So, as Vidur and NVIDIA's AIConfigurator do with their measured operations, this module runs the
named engine's scheduling rule step by step over the step model (``step_model.mixed_step``):

* **vLLM V1** (``vllm/v1/core/sched/scheduler.py``, 0.32): every step schedules the running
  requests first (a decoding request one token; a request whose prompt is not yet done its next
  chunk), then admits waiting requests first come, first served, while the step's token budget
  (``--max-num-batched-tokens``) and the cap on running requests (``--max-num-seqs``) allow, a
  prompt larger than what is left of the budget cut into a chunk (chunked prefill, on by default;
  ``long_prefill_token_threshold`` 0). The step that completes a prompt samples its first token;
  every later step one more, until the output length. vLLM's CPU platform turns asynchronous
  scheduling off (``vllm/platforms/cpu.py``), so steps follow each other without overlap, and a
  request that arrives during a step waits for the next.

``serve`` runs that rule over given arrival times (a recorded load window can be replayed
through it); a plan's arrivals are open-loop Poisson (the request rate's exponential gaps) from a
fixed seed, so a plan is reproducible. The first fifth of the requests warm the replica up and
the last fifth drain it; the requests between are the steady state measured: the median and 90th
percentile of their time to first token and of the gaps between their tokens (the percentile is
an estimate of the tail from one simulated sequence of arrivals), the mean number of requests in
the steps meanwhile and the output tokens per second. A rate past the replica's throughput leaves
a queue that grows over the window, and the tokens emitted in it fall short of what its arrivals
ask for: such a rate is ``saturated`` (its figures are those of the simulated window only).

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from roofline_profiler.core.load_plan import (
    LIMITED_BY_ITL,
    LIMITED_BY_SATURATION,
    LIMITED_BY_TTFT,
    LoadPoint,
    MaxRate,
    SchedulerLimits,
    TtftPoint,
    Workload,
)
from roofline_profiler.core.step_model import Chunk, StepCost, prefill_seconds

#: Requests simulated per rate (fewer for long outputs: a simulation takes a step per output token
#: of each request at worst, and this many tokens in all); the first and last
#: :data:`EDGE_SHARE` of them are not measured. Near the knee a queue builds and drains over
#: minutes, and a window of a few hundred requests reads the median ITL of one such episode:
#: the maximum rate of 600 requests moved by 24-44% between seeds (a small Llama's profile, four
#: workloads and targets), of 6000 requests (1500 for an output of 256 tokens) by 2-8%.
REQUESTS = 6000
MIN_REQUESTS = 120
SIMULATED_TOKENS = 400_000
EDGE_SHARE = 0.2
#: A queue that grew by this share of the measured requests (and at least
#: :data:`MIN_QUEUE_GROWTH` requests) over the window means the rate is past the throughput.
QUEUE_GROWTH_SHARE = 0.05
MIN_QUEUE_GROWTH = 3
#: Output tokens in the window below this share of what its arrivals ask for: the replica does
#: not keep up (in a steady state the two are equal up to the requests in flight at its edges).
THROUGHPUT_SHARE = 0.95
#: Bisection steps of the maximum rate (each halves the bracket's ratio on a log scale): from a
#: doubling's bracket to within 1.1%, finer than the simulated window's own spread.
BISECTIONS = 6
#: Contexts of the decodes are rounded to this many tokens for the step cost's cache.
CONTEXT_QUANTUM = 16


@dataclass
class _Request:
    arrival: float
    prompt: int
    output: int
    prefilled: int = 0
    tokens: list[float] = field(default_factory=list)

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.prompt

    @property
    def context(self) -> int:
        return self.prompt + len(self.tokens)


def _percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of ``values`` (``share`` 0.5: the median)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class _CachedStep:
    """The step cost with the decodes' context rounded, cached by step shape (a simulation asks
    for the same shapes over and over)."""

    def __init__(self, step: StepCost) -> None:
        self.step = step
        self.cache: dict[tuple[int, int, tuple[Chunk, ...]], float] = {}

    def __call__(self, decodes: int, context: int, chunks: Sequence[Chunk]) -> float:
        key = (decodes, -(-context // CONTEXT_QUANTUM) * CONTEXT_QUANTUM, tuple(chunks))
        seconds = self.cache.get(key)
        if seconds is None:
            seconds = self.step(*key)
            self.cache[key] = seconds
        return seconds


@dataclass(frozen=True)
class Served:
    """What the scheduler made of a sequence of arrivals (``serve``)."""

    #: When each request arrived (seconds, ascending).
    arrivals: tuple[float, ...]
    #: Each request's token times (the arrivals' clock), in arrival order.
    tokens: tuple[tuple[float, ...], ...]
    #: How many requests each one found waiting when it arrived, itself included.
    queued: tuple[int, ...]
    #: Every step: when it began and ended, and how many requests it carried.
    steps: tuple[tuple[float, float, int], ...]

    def ttfts(self, requests: Iterable[int]) -> list[float]:
        """The time to first token of each of ``requests`` (indices) that has one."""
        return [self.tokens[i][0] - self.arrivals[i] for i in requests if self.tokens[i]]

    def gaps(self, requests: Iterable[int]) -> list[float]:
        """Every gap between consecutive tokens of ``requests`` (indices)."""
        return [b - a for i in requests for a, b in itertools.pairwise(self.tokens[i])]

    def running(self, start: float, end: float) -> float:
        """The mean number of requests in the steps over ``[start, end]``."""
        carried = sum(max(0.0, min(b, end) - max(a, start)) * n for a, b, n in self.steps)
        return carried / max(end - start, 1e-12)


def serve(
    step: StepCost, arrivals: Sequence[float], workload: Workload, limits: SchedulerLimits
) -> Served:
    """Run the engine's scheduler over requests of ``workload`` arriving at ``arrivals`` (seconds,
    ascending), each step as long as ``step`` says, until every request has its output."""
    cost = step if isinstance(step, _CachedStep) else _CachedStep(step)
    if not all(math.isfinite(t) for t in arrivals) or any(
        b < a for a, b in itertools.pairwise(arrivals)
    ):
        raise ValueError("arrivals must be finite and in ascending order")
    requests = [_Request(t, workload.prompt_tokens, workload.output_tokens) for t in arrivals]
    waiting: list[_Request] = []
    running: list[_Request] = []
    queued: list[int] = []
    steps: list[tuple[float, float, int]] = []
    now, next_arrival = 0.0, 0
    # Every step gives at least one request a token or a prompt chunk, so this ends.
    while next_arrival < len(requests) or waiting or running:
        while next_arrival < len(requests) and requests[next_arrival].arrival <= now:
            waiting.append(requests[next_arrival])
            queued.append(len(waiting))
            next_arrival += 1
        if not waiting and not running:
            now = requests[next_arrival].arrival
            continue
        budget = limits.max_num_batched_tokens
        decodes: list[_Request] = []
        chunks: list[tuple[_Request, Chunk]] = []
        for r in running:
            if budget <= 0:
                break
            if r.decoding:
                decodes.append(r)
                budget -= 1
            else:
                n = min(budget, r.prompt - r.prefilled)
                chunks.append((r, Chunk(n, r.prefilled, r.prefilled + n == r.prompt)))
                budget -= n
        while waiting and budget > 0 and len(running) < limits.max_num_seqs:
            r = waiting.pop(0)
            running.append(r)
            n = min(budget, r.prompt)
            chunks.append((r, Chunk(n, 0, n == r.prompt)))
            budget -= n
        context = round(sum(r.context for r in decodes) / len(decodes)) if decodes else 0
        seconds = cost(len(decodes), context, tuple(c for _, c in chunks))
        start, now = now, now + seconds
        steps.append((start, now, len(decodes) + len(chunks)))
        for r, c in chunks:
            r.prefilled += c.new_tokens
            if c.completes:
                r.tokens.append(now)
        for r in decodes:
            r.tokens.append(now)
        running = [r for r in running if len(r.tokens) < r.output]
    return Served(
        tuple(arrivals), tuple(tuple(r.tokens) for r in requests), tuple(queued), tuple(steps)
    )


def poisson_arrivals(rate: float, requests: int, seed: int) -> list[float]:
    """``requests`` arrival times of a Poisson process of ``rate`` per second from ``seed``."""
    draw = random.Random(seed)
    arrivals, t = [], 0.0
    for _ in range(requests):
        t += draw.expovariate(rate)
        arrivals.append(t)
    return arrivals


def simulate(
    step: StepCost,
    workload: Workload,
    rate: float,
    limits: SchedulerLimits,
    *,
    seed: int = 0,
    requests: int | None = None,
) -> LoadPoint:
    """What a user sees at ``rate`` requests per second of ``workload``, in the steady state."""
    if rate <= 0 or not math.isfinite(rate):
        raise ValueError(f"a request rate must be positive and finite, not {rate!r}")
    if requests is None:
        requests = min(REQUESTS, max(MIN_REQUESTS, SIMULATED_TOKENS // workload.output_tokens))
    arrivals = poisson_arrivals(rate, requests, seed)
    served = serve(step, arrivals, workload, limits)
    first, last = int(requests * EDGE_SHARE), int(requests * (1 - EDGE_SHARE))
    window_start, window_end = arrivals[first], arrivals[last - 1]
    emitted = sum(1 for tokens in served.tokens for t in tokens if window_start <= t <= window_end)
    measured = range(first, last)
    ttft = served.ttfts(measured)
    gaps = served.gaps(measured)
    growth = served.queued[last - 1] - served.queued[first]
    asked = (last - 1 - first) * workload.output_tokens
    saturated = (
        len(ttft) < len(measured)
        or growth >= max(MIN_QUEUE_GROWTH, QUEUE_GROWTH_SHARE * len(measured))
        or emitted < THROUGHPUT_SHARE * asked
    )
    span = max(window_end - window_start, 1e-12)
    return LoadPoint(
        requests_per_second=rate,
        ttft_median_seconds=_median(ttft),
        ttft_p90_seconds=_percentile(ttft, 0.9),
        itl_median_seconds=_median(gaps) if gaps else 0.0,
        itl_p90_seconds=_percentile(gaps, 0.9) if gaps else 0.0,
        running_batch=served.running(window_start, window_end),
        output_tokens_per_second=emitted / span,
        saturated=saturated,
    )


def ttft_ladder(
    step: StepCost, prompts: Sequence[int], limits: SchedulerLimits
) -> tuple[TtftPoint, ...]:
    """Time to first token of one request alone at each prompt length."""
    return tuple(
        TtftPoint(p, prefill_seconds(step, p, limits.max_num_batched_tokens))
        for p in sorted(set(prompts))
    )


def ladder_prompts(top: int, workload_prompt: int | None = None, first: int = 128) -> list[int]:
    """Powers of two from ``first`` up to ``top`` (and ``top`` itself), plus the workload's."""
    prompts, p = [], first
    while p < top:
        prompts.append(p)
        p *= 2
    prompts.append(top)
    if workload_prompt is not None:
        prompts.append(workload_prompt)
    return sorted(set(prompts))


def _meets(point: LoadPoint, ttft_slo: float | None, itl_slo: float | None) -> str | None:
    """What ``point`` breaks first (saturation, then TTFT, then ITL), or None."""
    if point.saturated:
        return LIMITED_BY_SATURATION
    if ttft_slo is not None and point.ttft_median_seconds > ttft_slo:
        return LIMITED_BY_TTFT
    if itl_slo is not None and point.itl_median_seconds > itl_slo:
        return LIMITED_BY_ITL
    return None


def max_request_rate(
    step: StepCost,
    workload: Workload,
    limits: SchedulerLimits,
    ttft_slo: float | None,
    itl_slo: float | None,
    *,
    seed: int = 0,
) -> MaxRate:
    """The largest request rate whose steady state keeps the median TTFT within ``ttft_slo``, the
    median ITL within ``itl_slo`` (either None: no target) and the queue from growing, found by
    doubling, then bisecting on a log scale to :data:`BISECTIONS` halvings of the bracket."""
    cost = _CachedStep(step)
    alone = prefill_seconds(cost, workload.prompt_tokens, limits.max_num_batched_tokens)
    alone += (workload.output_tokens - 1) * cost(1, workload.prompt_tokens, ())
    low, high = 0.0, 0.5 / max(alone, 1e-9)
    broken = _meets(simulate(cost, workload, high, limits, seed=seed), ttft_slo, itl_slo)
    while broken is None:
        low, high = high, high * 2
        broken = _meets(simulate(cost, workload, high, limits, seed=seed), ttft_slo, itl_slo)
        if high > 1e9:
            break
    if low == 0.0:
        # Even a light load breaks a target: bisect below it, from a tenth of a request per lone
        # request time down.
        low = high / 1024
        if _meets(simulate(cost, workload, low, limits, seed=seed), ttft_slo, itl_slo):
            return MaxRate(0.0, broken or LIMITED_BY_SATURATION)
    for _ in range(BISECTIONS):
        middle = math.sqrt(low * high)
        why = _meets(simulate(cost, workload, middle, limits, seed=seed), ttft_slo, itl_slo)
        if why is None:
            low = middle
        else:
            high, broken = middle, why
    return MaxRate(low, broken or LIMITED_BY_SATURATION)
