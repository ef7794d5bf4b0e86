"""vLLM's steps under load, one by one, against the plan's step of the same shape.

`vllm_load.py` scores what a user sees under load (median TTFT and ITL, the running batch, the
maximum rate); where they miss it cannot say whether the engine's steps cost what the plan's step
model says, or whether the engine schedules them otherwise. This bench logs every step the engine
takes under open-loop load (``vllm_step_log/sitecustomize.py`` on the server's path: when each
step began and ended and the tokens it scheduled per request; a clock read per step, no profiler),
then rebuilds each step's shape (its decodes and their mean context, its prompt chunks and how much
of each prompt came before) and asks the plan's step model (``step_model.mixed_step`` of a profile
taken from vLLM's environment once the server is gone) what that step costs.

A step's time is its cycle, from one step's start to the next's: what the running requests wait
between tokens, the engine core's scheduling between steps included. A step after which the engine
idled (no request left running: the next step began more than :data:`IDLE_GAP` after this one
ended) counts as its own time plus the median gap between busy steps. Per rate, the record groups
the steps by kind (decode-only by running batch; prompt-carrying by prompt tokens) with the
median cycle beside the plan's median, and sums both over the window: the time the engine was
busy and what the plan says the same steps cost.

Each window's arrivals (the client's send times) are then replayed through the plan's scheduler
(``load_model.serve``), once with the plan's steps and once with every step lengthened by the
window's ratio of vLLM's busy time to the plan's: what the plan predicts for the very arrivals
vLLM served, and what it would predict were its steps as long as vLLM's on average. Where the
second matches vLLM and the first does not, the steps' cost separates the two; where neither
does, the engine schedules otherwise than the model.

    python bench/vllm_load_steps.py [--only llama-small|qwen3-small] [--mix 512/64] [--rates R,R]
        [--seeds S,S]

Without ``--rates``: :data:`RATE_FACTORS` of the server's burst throughput at the mix. Each rate
runs once per seed of ``--seeds`` (an arrival path: ``vllm_load.py``'s bisection uses 99-101);
without it the i-th rate runs seed i. Needs
``scripts/vllm-cpu.sh`` (run on first use) and the project's profiler.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler_vs_references import cpu_model, cpu_slug
from roofline_profiler.core.engines import VLLM_CPU
from roofline_profiler.core.load_model import serve
from roofline_profiler.core.load_plan import SchedulerLimits, Workload
from roofline_profiler.core.step_model import Chunk, StepCost, mixed_step
from roofline_profiler.wire.result import ProfileResult
from vllm_load import (
    CONFIGS,
    MAX_NUM_SEQS,
    PROBE_REQUESTS,
    roofline,
    vllm_load,  # the load generator (tests/vllm_load.py), shared with the tests
)
from vllm_reference import CHUNK_TOKENS, engine_identity, load_average, served, stamp

HOOK = Path(__file__).resolve().parent / "vllm_step_log"
#: Rates as shares of the burst throughput: below, at and past the knee `vllm_load.py` found.
RATE_FACTORS = (0.5, 0.75, 0.85)
#: Seconds of arrivals per rate, and the first of them discarded.
DURATION, WARMUP = 45.0, 10.0
#: Decode-only steps grouped by running batch in these bands (lower bounds).
BANDS = (1, 2, 4, 8, 16, 32, 64)
#: Seconds between one step's end and the next's start beyond which the engine idled between
#: them (busy, the engine core schedules the next step in about a millisecond on this CPU).
IDLE_GAP = 0.010


@dataclass(frozen=True)
class Step:
    """One logged engine step and its shape."""

    start: float
    #: Seconds to the next step's start, or the step's own time and the median busy gap where
    #: the engine idled after it (None for the last step logged).
    cycle: float | None
    decodes: int
    context_tokens: int
    chunks: tuple[Chunk, ...]
    #: When its tokens were sampled, and the requests it sampled one for (each decode, and each
    #: request whose prompt its chunk completed).
    sampled_at: float
    sampled: tuple[str, ...]


def read_steps(rows: Sequence[Mapping[str, Any]], prompt_tokens: int) -> list[Step]:
    """Each logged step's shape: a request whose tokens so far cover its prompt decodes; one
    still short of it carries a prompt chunk after the tokens it had (every prompt here is
    ``prompt_tokens`` long, no prefix is cached, so a request's tokens start at 0)."""
    seen: dict[str, int] = {}
    steps = []
    gaps = [b["t0"] - a["t1"] for a, b in itertools.pairwise(rows)]
    busy_gap = statistics.median([g for g in gaps if g <= IDLE_GAP] or [0.0])
    for i, row in enumerate(rows):
        decodes, contexts, chunks, sampled = 0, [], [], []
        for request, tokens in row["tokens"].items():
            before = seen.get(request, 0)
            if before >= prompt_tokens:
                decodes += 1
                contexts.append(before)
            else:
                chunks.append(Chunk(tokens, before, before + tokens >= prompt_tokens))
            if before + tokens >= prompt_tokens:
                sampled.append(request)
            seen[request] = before + tokens
        following = None
        if i + 1 < len(rows):
            idled = gaps[i] > IDLE_GAP
            following = row["t1"] - row["t0"] + busy_gap if idled else rows[i + 1]["t0"] - row["t0"]
        context = round(statistics.fmean(contexts)) if contexts else 0
        steps.append(
            Step(row["t0"], following, decodes, context, tuple(chunks), row["t1"], tuple(sampled))
        )
    return steps


def engine_gaps(steps: Sequence[Step], start: float, end: float) -> list[float]:
    """The gaps between a request's tokens as the engine made them: when the steps that sampled
    its tokens (the one completing its prompt, then each decode) sampled them, for the requests
    whose first token came from a step that began in [start, end): the ITL before the server
    streams it, against the client's."""
    made: dict[str, list[float]] = {}
    first: dict[str, float] = {}
    for step in steps:
        for request in step.sampled:
            made.setdefault(request, []).append(step.sampled_at)
            first.setdefault(request, step.start)
    return [
        b - a
        for request, times in made.items()
        if start <= first[request] < end
        for a, b in itertools.pairwise(times)
    ]


def band(decodes: int) -> tuple[int, str]:
    """The band of a running batch: its lower bound and its label."""
    if decodes == 0:
        return 0, "0"
    low = max(b for b in BANDS if b <= decodes)
    high = next((b - 1 for b in BANDS if b > low), None)
    return low, str(low) if high == low else f"{low}–{high}" if high else f"{low}+"


def rows_for(steps: Sequence[Step], cost: StepCost) -> tuple[list[str], float, float]:
    """The record's rows for one rate's steps, and the summed seconds of vLLM's and the plan's."""
    groups: dict[tuple[int, int, int, str], list[tuple[float, float]]] = {}
    vllm_total = plan_total = 0.0
    for step in steps:
        if step.cycle is None:
            continue
        planned = cost(step.decodes, step.context_tokens, step.chunks)
        vllm_total += step.cycle
        plan_total += planned
        low, label = band(step.decodes)
        if step.chunks:
            prompt = sum(c.new_tokens for c in step.chunks)
            key = (1, prompt, low, f"{prompt} prompt tokens + {label} decodes")
        else:
            key = (0, 0, low, f"{label} decodes")
        groups.setdefault(key, []).append((step.cycle, planned))
    lines = []
    for key in sorted(groups):
        pairs = groups[key]
        real = statistics.median(r for r, _ in pairs)
        planned = statistics.median(p for _, p in pairs)
        lines.append(
            f"| {key[3]} | {len(pairs)} | {real * 1e3:.1f} ms | {planned * 1e3:.1f} ms | "
            f"{planned / real:.2f} |"
        )
    return lines, vllm_total, plan_total


def replayed(run: vllm_load.LoadRun, cost: StepCost, scale: float, limits: SchedulerLimits) -> str:
    """The window's arrivals through the plan's scheduler with its steps times ``scale``: the
    median TTFT and ITL of the requests the client measured, and the mean requests in a step
    over the same window, as the client's summary gives them."""

    def scaled(decodes: int, context: int, chunks: Sequence[Chunk]) -> float:
        return scale * cost(decodes, context, chunks)

    sent = [r.sent for r in run.requests]
    served = serve(scaled, sent, Workload(run.prompt_tokens, run.output_tokens), limits)
    measured = [i for i, at in enumerate(sent) if run.warmup <= at < run.duration]
    ttft = statistics.median(served.ttfts(measured))
    itl = statistics.median(served.gaps(measured))
    return (
        f"TTFT {ttft * 1e3:.0f} ms, ITL {itl * 1e3:.1f} ms, "
        f"running {served.running(run.warmup, run.duration):.1f}"
    )


def log_rows(log: Path) -> list[dict[str, Any]]:
    """The worker's log (the largest of the server's processes' logs: only the worker steps)."""
    files = sorted(log.parent.glob(log.name + ".*"), key=lambda p: p.stat().st_size)
    if not files:
        raise SystemExit("the engine logged no step: its worker did not load the step log hook")
    return [json.loads(line) for line in files[-1].read_text().splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="llama-small", choices=sorted(CONFIGS))
    parser.add_argument("--mix", default="512/64", help="prompt/output tokens")
    parser.add_argument("--rates", help="requests/s (default: shares of the burst throughput)")
    parser.add_argument("--seeds", help="arrival paths run at every rate (default: one each)")
    parser.add_argument(
        "--out", help="the record (default results/vllm-load-steps-<name>-<cpu>.md)"
    )
    args = parser.parse_args()
    prompt, output = (int(x) for x in args.mix.split("/"))
    config = CONFIGS[args.only]
    started = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory(prefix="vllm-load-steps-") as tmp:
        work = Path(tmp)
        log = work / "steps.log"
        env = (("PYTHONPATH", str(HOOK)), ("STEP_LOG", str(log)))
        windows: list[tuple[float, int, float, float, vllm_load.LoadRun]] = []
        longest = prompt + output + 16
        with served(config, work / "vllm", MAX_NUM_SEQS, longest, extra_env=env) as server:
            print(f"[{stamp()}] vLLM ready in {server.start_seconds:.0f} s", flush=True)
            if args.rates:
                rates = [float(r) for r in args.rates.split(",")]
                burst = None
            else:
                burst = vllm_load.burst_throughput(server, PROBE_REQUESTS, prompt, output)
                rates = [round(f * burst, 3) for f in RATE_FACTORS]
            paths = (
                [(rate, int(seed)) for rate in rates for seed in args.seeds.split(",")]
                if args.seeds
                else [(rate, i) for i, rate in enumerate(rates)]
            )
            for rate, seed in paths:
                begun = time.monotonic()
                run = vllm_load.run_load(server, rate, prompt, output, DURATION, WARMUP, seed=seed)
                windows.append((rate, seed, begun + WARMUP, begun + DURATION, run))
                print(f"[{stamp()}] {run.summary()}, load {load_average():.1f}", flush=True)
            python = str(server.python)
        config_path = work / "config.json"
        config_path.write_text(json.dumps(config))
        result = work / "result.json"
        profile = [
            "profile", "--device", "cpu", "--dtype", "bfloat16", "--model", str(config_path),
            "--context", f"256,{prompt + output // 2},2048",
            "--prompt-tokens", str(prompt), "--output-tokens", str(output),
            "--request-rate", ",".join(str(r) for r in rates),
            "--max-num-batched-tokens", str(CHUNK_TOKENS), "--max-num-seqs", str(MAX_NUM_SEQS),
            "--json", str(result),
        ]  # fmt: skip
        print(f"[{stamp()}] profiling", flush=True)
        roofline(*profile, python=python)
        (device,) = ProfileResult.from_dict(json.loads(result.read_text())).devices
        (measured,) = device.model_measurements
        cost = mixed_step(measured, VLLM_CPU)
        steps = read_steps(log_rows(log), prompt)
        shown = " ".join(a if a != str(config_path) else "config.json" for a in profile[:-2])
    cpu = cpu_model()
    lines = [
        f"# vLLM's steps under load against the plan's step model ({args.only}, {args.mix})",
        "",
        f"Measured {started.isoformat(timespec='seconds')} on {cpu} "
        f"({len(os.sched_getaffinity(0))} logical CPUs), {engine_identity()}.",
        "",
        f"Command: `python bench/vllm_load_steps.py --only {args.only} --mix {args.mix}"
        + (f" --rates {args.rates}" if args.rates else "")
        + (f" --seeds {args.seeds}`" if args.seeds else "`")
        + (f"; burst throughput {burst:.2f} requests/s" if burst else "")
        + f"; each rate's arrivals for {DURATION:.0f} s, the first {WARMUP:.0f} s left out; "
        f"load average at the end {load_average():.1f}.",
        "",
        f"Profile, from vLLM's environment once the server was gone: `roofline {shown} --json "
        "result.json`",
        "",
    ]
    limits = SchedulerLimits(CHUNK_TOKENS, MAX_NUM_SEQS)
    for rate, seed, start, end, run in windows:
        inside = [s for s in steps if start <= s.start < end]
        table, vllm_total, plan_total = rows_for(inside, cost)
        gaps = engine_gaps(steps, start, end)
        made = f"{statistics.median(gaps) * 1e3:.1f} ms" if gaps else "none"
        ratio = vllm_total / plan_total
        lines += [
            f"## {rate:g} requests/s, arrival path {seed}",
            "",
            f"Seen by the client: {run.summary()}. The engine's own gaps between a request's "
            f"tokens (the steps that sampled them, requests whose first token came in the "
            f"window): median {made}. {len(inside)} steps in {end - start:.0f} s; "
            f"their cycles sum to {vllm_total:.1f} s, the plan's steps of the same shapes to "
            f"{plan_total:.1f} s ({plan_total / vllm_total:.2f}).",
            "",
            f"The same arrivals through the plan's scheduler: with the plan's steps "
            f"{replayed(run, cost, 1.0, limits)}; with its steps × {ratio:.2f} (vLLM's busy "
            f"time over the plan's here) {replayed(run, cost, ratio, limits)}.",
            "",
            "| step | steps | vLLM (median cycle) | plan (median) | plan ÷ vLLM |",
            "|---|---:|---:|---:|---:|",
            *table,
            "",
        ]
    slug = cpu_slug(cpu)
    default = Path(__file__).parent / "results" / f"vllm-load-steps-{args.only}-{slug}.md"
    out = Path(args.out or default)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
