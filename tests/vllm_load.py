"""A load generator for the real engine: what a user of a vLLM server sees under open-loop load.

Each request is an OpenAI completion streamed over its own connection (``stream: true``,
``ignore_eos``, ``max_tokens``, prompts as token ids); the client stamps every chunk on arrival.
vLLM may put more than one token in a chunk when the client falls behind, so every chunk carries
the running count of generated tokens (``stream_options.continuous_usage_stats``). Tokens that come
in a burst (one chunk of several, or several chunks read from one buffer: a tiny model's one-token
chunks came in bursts with 0 ms between them, the API server's process waiting for a CPU the
engine's threads held) are spread evenly over the gap since the previous burst (:func:`unburst`):
the engine made them a step apart in it. The tokens per chunk are kept (``tokens_per_chunk``).
TTFT is the first token's stamp less the request's send time; ITL the gaps between successive
tokens, as vLLM's own ``benchmark_serving`` reports them.

Arrivals are open-loop Poisson at a fixed seed: the send times are drawn before the run and do not
wait for the server (a closed loop would slow down with it and hide the queue). While the run lasts
``vllm:num_requests_running`` is read from ``/metrics``; its mean over the measurement window is the
running batch. The window: arrivals go on for ``duration`` seconds; the first ``warmup`` seconds of
them (at least one request's lifetime: by Little's law the running batch reaches its level after
one lifetime) are discarded; the requests sent after it are measured, each to its last token.
A rate past the server's throughput (``saturated``) is told by its queue: the requests waiting in
the last third of the window exceed, on average, those in its first third by more than a second's
arrivals (a queue that grows; one reading at the end of the arrivals flagged a rate saturated that
a higher one was not, as Poisson arrivals queue a few requests for a moment at any rate), or the
measured requests' TTFT keeps growing (the last third's median over twice the first third's).

Used by ``bench/vllm_load.py`` and ``tests/engine/test_load_against_vllm.py``; stdlib only.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.vllm_server import SERVED_NAME, VllmServer, prompts

#: Seconds a request may take before it is given up (a saturated run's queue).
REQUEST_TIMEOUT_SECONDS = 900.0
#: Tokens read within this of one another came in one burst (a decode step on this CPU takes
#: milliseconds; reads from one buffer microseconds).
BURST_SECONDS = 5e-4
#: Seconds past the end of the arrivals that a saturated run waits for its measured requests.
SATURATED_DRAIN_SECONDS = 60.0


@dataclass(frozen=True)
class StreamedRequest:
    """One streamed completion: when it was sent and when each of its tokens arrived."""

    sent: float
    token_times: tuple[float, ...]
    error: str | None = None
    #: Streamed chunks that carried tokens.
    chunks: int = 0

    @property
    def ttft_seconds(self) -> float:
        return self.token_times[0] - self.sent

    @property
    def itl_seconds(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False)]


def stream_completion(
    server: VllmServer,
    prompt: Sequence[int],
    max_tokens: int,
    sent: float | None = None,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
) -> StreamedRequest:
    """One completion streamed and stamped chunk by chunk (``time.monotonic``)."""
    body = {
        "model": SERVED_NAME,
        "prompt": list(prompt),
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    start = time.monotonic() if sent is None else sent
    times: list[float] = []
    chunks = 0
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request(
            "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        if response.status != 200:
            return StreamedRequest(start, (), f"HTTP {response.status}: {response.read()[:200]!r}")
        generated = 0
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            now = time.monotonic()
            usage = json.loads(line[5:]).get("usage") or {}
            count = int(usage.get("completion_tokens", generated))
            if count > generated:
                times.extend([now] * (count - generated))
                chunks += 1
            generated = count
    except (OSError, http.client.HTTPException, ValueError) as error:
        return StreamedRequest(start, tuple(times), repr(error), chunks)
    finally:
        connection.close()
    if len(times) != max_tokens:
        short = f"{len(times)} tokens of {max_tokens}"
        return StreamedRequest(start, tuple(times), short, chunks)
    return StreamedRequest(start, tuple(unburst(times)), None, chunks)


def unburst(times: Sequence[float], burst: float = BURST_SECONDS) -> list[float]:
    """Token stamps with each burst (tokens read within ``burst`` of one another: one chunk of
    several tokens, or several chunks read from one buffer) spread evenly over the gap since the
    previous burst's last token. The first burst keeps its stamps: there is no gap before it."""
    out: list[float] = []
    i = 0
    while i < len(times):
        j = i + 1
        while j < len(times) and times[j] - times[j - 1] <= burst:
            j += 1
        if not out:
            out.extend(times[i:j])
        else:
            previous, last, tokens = out[-1], times[j - 1], j - i
            out.extend(last - (last - previous) * (tokens - 1 - k) / tokens for k in range(tokens))
        i = j
    return out


def poisson_arrivals(rate: float, duration: float, seed: int) -> list[float]:
    """Send offsets (seconds from the start) of a Poisson process of ``rate`` per second."""
    rng = random.Random(seed)
    offsets, at = [], rng.expovariate(rate)
    while at < duration:
        offsets.append(at)
        at += rng.expovariate(rate)
    return offsets


@dataclass(frozen=True)
class LoadRun:
    """One open-loop run at one rate: every request and the running batch as read from /metrics."""

    rate: float
    prompt_tokens: int
    output_tokens: int
    duration: float
    warmup: float
    #: Every request, in send order; ``sent`` relative to the run's start.
    requests: tuple[StreamedRequest, ...]
    #: (seconds from the start, ``vllm:num_requests_running``, ``vllm:num_requests_waiting``).
    gauges: tuple[tuple[float, float, float], ...]
    wall_seconds: float
    load_average: tuple[float, float, float] = field(default=(0.0, 0.0, 0.0))

    @property
    def measured(self) -> list[StreamedRequest]:
        return [r for r in self.requests if self.warmup <= r.sent < self.duration]

    @property
    def completed(self) -> list[StreamedRequest]:
        return [r for r in self.measured if r.error is None]

    @property
    def ttft_median_seconds(self) -> float:
        return statistics.median(r.ttft_seconds for r in self.completed)

    @property
    def itl_median_seconds(self) -> float:
        return statistics.median(g for r in self.completed for g in r.itl_seconds)

    @property
    def running_batch(self) -> float:
        inside = [running for at, running, _ in self.gauges if self.warmup <= at < self.duration]
        return statistics.fmean(inside) if inside else math.nan

    @property
    def tokens_per_chunk(self) -> float:
        """Mean tokens per streamed chunk of the measured requests: 1 when vLLM streamed one
        chunk a token."""
        chunks = sum(r.chunks for r in self.completed)
        return sum(len(r.token_times) for r in self.completed) / chunks if chunks else math.nan

    @property
    def queue_growth(self) -> float:
        """How much the waiting queue grew over the measured window: the mean of
        ``vllm:num_requests_waiting`` over its last third less that over its first third (a mean
        over a third of the window, not one reading: Poisson arrivals queue a few requests for
        a moment at any rate)."""
        inside = [(at, w) for at, _, w in self.gauges if self.warmup <= at < self.duration]
        if len(inside) < 3:
            return 0.0
        third = (self.duration - self.warmup) / 3
        early = [w for at, w in inside if at < self.warmup + third]
        late = [w for at, w in inside if at >= self.duration - third]
        if not early or not late:
            return 0.0
        return statistics.fmean(late) - statistics.fmean(early)

    @property
    def saturated(self) -> bool:
        measured = self.measured
        if len(self.completed) < len(measured):
            return True
        if self.queue_growth > max(2.0, self.rate):
            return True
        thirds = max(1, len(measured) // 3)
        early = statistics.median(r.ttft_seconds for r in measured[:thirds])
        late = statistics.median(r.ttft_seconds for r in measured[-thirds:])
        return late > 2 * early + 0.5

    def summary(self) -> str:
        errors = sum(r.error is not None for r in self.measured)
        return (
            f"{self.rate:.3g} req/s: {len(self.measured)} measured ({errors} failed), "
            f"TTFT {self.ttft_median_seconds * 1e3:.0f} ms, ITL {self.itl_median_seconds * 1e3:.1f}"
            f" ms, running {self.running_batch:.1f}, {self.tokens_per_chunk:.2f} tokens a chunk"
            f"{', saturated' if self.saturated else ''}"
        )


def run_load(
    server: VllmServer,
    rate: float,
    prompt_tokens: int,
    output_tokens: int,
    duration: float,
    warmup: float,
    seed: int = 0,
    poll_seconds: float = 0.5,
) -> LoadRun:
    """Open-loop Poisson arrivals at ``rate`` for ``duration`` seconds; waits for the measured
    requests (at most :data:`SATURATED_DRAIN_SECONDS` past the arrivals when the queue grows)."""
    offsets = poisson_arrivals(rate, duration, seed)
    bodies = prompts(len(offsets), prompt_tokens, seed, server.vocab_size)
    results: list[StreamedRequest | None] = [None] * len(offsets)
    start = time.monotonic()
    deadline = start + duration + max(SATURATED_DRAIN_SECONDS, 4 * warmup)

    def one(index: int) -> None:
        sent = start + offsets[index]
        time.sleep(max(0.0, sent - time.monotonic()))
        timeout = max(1.0, deadline - time.monotonic())
        results[index] = stream_completion(server, bodies[index], output_tokens, sent, timeout)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(offsets))]
    for thread in threads:
        thread.start()
    gauges: list[tuple[float, float, float]] = []
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        sample = server.metrics()
        gauges.append((sample.at - start, sample.running, sample.waiting))
        time.sleep(poll_seconds)
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()) + 5)
    finished = [
        r if r is not None else StreamedRequest(start + offsets[i], (), "not finished")
        for i, r in enumerate(results)
    ]
    relative = tuple(
        StreamedRequest(r.sent - start, tuple(t - start for t in r.token_times), r.error, r.chunks)
        for r in finished
    )
    return LoadRun(
        rate, prompt_tokens, output_tokens, duration, warmup, relative, tuple(gauges),
        time.monotonic() - start, os.getloadavg(),
    )  # fmt: skip


def idle_ttft(server: VllmServer, prompt_tokens: int, repeats: int, seed: int = 0) -> list[float]:
    """TTFT of one request alone on the idle server, ``repeats`` times (distinct prompts: no
    prefix cache), with one output token beyond the first so that the stream is a real one."""
    bodies = prompts(repeats, prompt_tokens, seed, server.vocab_size)
    out = []
    for body in bodies:
        request = stream_completion(server, body, 2)
        if request.error is not None:
            raise RuntimeError(f"idle request at {prompt_tokens} tokens failed: {request.error}")
        out.append(request.ttft_seconds)
    return out


def within_targets(run: LoadRun, ttft_target: float, itl_target: float) -> bool:
    return (
        not run.saturated
        and run.ttft_median_seconds <= ttft_target
        and run.itl_median_seconds <= itl_target
    )


def bisect_max_rate(
    meets: Callable[[float], bool], low: float, high: float, steps: int
) -> tuple[float, list[tuple[float, bool]]]:
    """The largest rate that ``meets`` the targets, by bisection in log space between ``low``
    (meets, or 0) and ``high`` (does not): after ``steps`` tries the answer is within a factor of
    ``(high / low) ** (1 / 2**steps)``. Returns the best rate met and every try."""
    tries: list[tuple[float, bool]] = []
    for _ in range(steps):
        rate = math.sqrt(low * high) if low > 0 else high / 2
        ok = meets(rate)
        tries.append((rate, ok))
        low, high = (rate, high) if ok else (low, rate)
    return low, tries


def log_errors(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Geometric-mean error ``exp(mean |ln(p/m)|) − 1`` and the worst ``|p/m − 1|`` of
    (predicted, measured) pairs."""
    logs = [abs(math.log(p / m)) for p, m in pairs]
    return math.exp(statistics.fmean(logs)) - 1, max(abs(p / m - 1) for p, m in pairs)


def burst_throughput(
    server: VllmServer, requests: int, prompt_tokens: int, output_tokens: int, seed: int = 50
) -> float:
    """Requests per second the server completes when ``requests`` arrive at once: its throughput
    at the workload, which places a load run's rates (a rate above it saturates)."""
    bodies = prompts(requests, prompt_tokens, seed, server.vocab_size)
    done: list[StreamedRequest] = []
    start = time.monotonic()
    threads = [
        threading.Thread(
            target=lambda b=body: done.append(stream_completion(server, b, output_tokens)),
            daemon=True,
        )
        for body in bodies
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(REQUEST_TIMEOUT_SECONDS)
    failed = [r.error for r in done if r.error is not None]
    if failed or len(done) < requests:
        raise RuntimeError(f"burst of {requests}: {len(failed)} failed ({failed[:1]})")
    return requests / (max(r.token_times[-1] for r in done) - start)


def result_loads(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every plan under load of a profile's or plan's JSON: each device's ``loads`` (the result
    schema's ``devices[].loads``), or a top-level ``loads`` list."""
    loads = [load for device in document.get("devices", ()) for load in device.get("loads", ())]
    return loads or list(document.get("loads", ()))
