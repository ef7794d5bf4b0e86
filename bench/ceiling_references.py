"""The profiler's ceilings against independent references, in interleaved rounds.

Each round runs a complete in-process ``profile_device`` (default mode), the C STREAM-style read
and copy loops (``stream_reference``) and the best square ``torch.mm``, between two readings of
the host-state monitor; only rounds that stayed in one state, and of those the state with the
most rounds, are compared, and each side keeps its best of them. Every reference is its confirmed
best (the second-fastest trial), the estimator of the profiler's own numbers. Part 1 of
``profiler_vs_references.py``, imported by it as a sibling module.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from roofline_profiler.core.limits import DEFAULT_BATCHES, DEFAULT_SHAPE
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.runner import ProfileRequest, profile_device
from roofline_profiler.measure.workloads import bandwidth_buffer_bytes
from stream_reference import c_stream, monitor_level, steady_states

MM_SIZES = (1024, 1536, 2048, 3072, 4096)
#: Trials of each reference matmul size last about this long (the profiler's search: 0.25 s).
MM_SECONDS = 0.5

GOAL_RATIO = 0.95

#: The ceilings compared with a reference; ``copy_nt`` is the copy against the C loop with
#: non-temporal stores, printed but not a goal.
CEILINGS = ("read", "copy", "copy_nt", "peak")


def trial_seconds(fn: Callable[[], object], seconds: float, min_trials: int = 5) -> list[float]:
    """Sorted times of trials of ``fn`` for about ``seconds`` (at least ``min_trials``)."""
    fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < min_trials or spent < seconds:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return sorted(times)


def best_torch_mm() -> tuple[float, float, int]:
    """The best square ``torch.mm``: (confirmed best rate, fastest trial's rate, size)."""
    best = (0.0, 0.0, 0)
    for size in MM_SIZES:
        a, b = torch.randn(size, size), torch.randn(size, size)
        out = torch.empty(size, size)
        times = trial_seconds(functools.partial(torch.mm, a, b, out=out), MM_SECONDS)
        flops = 2 * size**3
        best = max(best, (flops / times[1], flops / times[0], size))
    return best


def verdict(ok: bool) -> str:
    """How the record marks a goal, here and in the script's list of goals."""
    return "**met**" if ok else "**missed**"


def ceilings_round(
    info: Any, request: ProfileRequest, binary: Path | None, size: int, threads: int
) -> dict[str, Any]:
    """One interleaved round: the profiler's ceilings, the C loops and the best ``torch.mm``,
    between two readings of the host-state monitor."""
    before = monitor_level(binary, size, threads)
    d = profile_device(info, "float32", request, lambda _: None)
    taken: dict[str, Any] = {
        "ours": {
            "read": (d.read_bandwidth_bytes_per_second, d.read_bandwidth_kernel),
            "copy": (d.copy_bandwidth_bytes_per_second, "copy"),
            "copy_nt": (d.copy_bandwidth_bytes_per_second, "copy"),
            "peak": (d.peak_flops_per_second, d.source("peak_flops_per_second")),
        },
        "refs": dict.fromkeys(CEILINGS, (0.0, 0.0)),
        "warnings": [w.code for w in d.warnings],
    }
    if binary is not None:
        taken["refs"].update(c_stream(binary, size, threads))
    rate, fast, at = best_torch_mm()
    taken["refs"]["peak"], taken["mm"] = (rate, fast), at
    taken["monitor"] = (before, monitor_level(binary, size, threads))
    return taken


@dataclasses.dataclass(frozen=True)
class BestOfRounds:
    """Each side's best over the compared rounds, so the ratio does not measure the host's drift."""

    ours: dict[str, float]
    kernels: dict[str, str]
    #: Each reference's confirmed best (its second-fastest trial).
    refs: dict[str, float]
    #: Each reference's fastest single trial.
    fastest: dict[str, float]
    #: The size of the square ``torch.mm`` whose confirmed best is the peak reference.
    mm_size: int


def best_of_rounds(per_round: list[dict[str, Any]], chosen: list[int]) -> BestOfRounds:
    ours = dict.fromkeys(CEILINGS, 0.0)
    kernels: dict[str, str] = {}
    refs = dict.fromkeys(CEILINGS, 0.0)
    fastest = dict.fromkeys(CEILINGS, 0.0)
    mm_size = 0
    for i in chosen:
        r = per_round[i]
        for key in CEILINGS:
            value, kernel = r["ours"][key]
            if value > ours[key]:
                ours[key], kernels[key] = value, kernel
            confirmed, fast = r["refs"][key]
            fastest[key] = max(fastest[key], fast)
            if confirmed > refs[key]:
                refs[key] = confirmed
                if key == "peak":
                    mm_size = r["mm"]
    return BestOfRounds(ours, kernels, refs, fastest, mm_size)


def ceilings_table(best: BestOfRounds) -> tuple[list[str], list[bool]]:
    """The table of profiler against reference, and whether each goal (read, copy, peak) is met."""
    names = {
        "read": "C STREAM-style read loop",
        "copy": "C STREAM-style copy loop",
        "copy_nt": "the same copy, non-temporal stores (not a goal: torch's copy_ does not stream)",
        "peak": f"best torch.mm over {MM_SIZES[0]}…{MM_SIZES[-1]} ({best.mm_size}³)",
    }
    units = {"read": ("GB/s", 1e9), "copy": ("GB/s", 1e9), "copy_nt": ("GB/s", 1e9)}
    units["peak"] = ("GFLOP/s", 1e9)
    lines = [
        "| quantity | profiler (kernel) | reference | value | profiler / reference | goal ≥ 0.95 "
        "| fastest trial | profiler / fastest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    met = []
    ours, refs, fastest = best.ours, best.refs, best.fastest
    for key in CEILINGS:
        unit, scale = units[key]
        if not refs[key]:
            lines.append(f"| {key} | {ours[key] / scale:.1f} {unit} | {names[key]} | n/a | | |")
            continue
        ratio = ours[key] / refs[key]
        goal = verdict(ratio >= GOAL_RATIO) if key != "copy_nt" else "-"
        if key != "copy_nt":
            met.append(ratio >= GOAL_RATIO)
        lines.append(
            f"| {key} | {ours[key] / scale:.1f} {unit} ({best.kernels[key]}) | {names[key]} "
            f"| {refs[key] / scale:.1f} {unit} | {ratio:.3f} | {goal} "
            f"| {fastest[key] / scale:.1f} {unit} | {ours[key] / fastest[key]:.3f} |"
        )
    return lines, met


def compare_ceilings(rounds: int, binary: Path | None) -> tuple[list[str], list[bool]]:
    (info,) = resolve_devices("cpu")
    threads = torch.get_num_threads()
    size = bandwidth_buffer_bytes(info)
    request = ProfileRequest(
        devices=(info,),
        k=DEFAULT_SHAPE[0],
        n=DEFAULT_SHAPE[1],
        batches=DEFAULT_BATCHES,
        min_batch_efficiency_percent=50,
        bandwidth_kind="read",
        quick=False,
    )
    per_round: list[dict[str, Any]] = []
    for position in range(rounds):
        print(f"ceilings round {position + 1}/{rounds}", file=sys.stderr)
        per_round.append(ceilings_round(info, request, binary, size, threads))
    # Only rounds that stayed in one state, and of those the state with the most rounds.
    states = steady_states([r["monitor"] for r in per_round])
    chosen = states[0] if states else list(range(rounds))
    table, met = ceilings_table(best_of_rounds(per_round, chosen))
    monitored = ", ".join(
        f"{i + 1}: {r['monitor'][0] / 1e9:.1f} → {r['monitor'][1] / 1e9:.1f} GB/s"
        + (f" ({', '.join(r['warnings'])})" if r["warnings"] else "")
        for i, r in enumerate(per_round)
        if None not in r["monitor"]
    )
    lines = [
        f"CPU: {info.name}, {threads} torch threads, bandwidth buffers {size >> 20} MiB, "
        f"best of rounds {', '.join(str(i + 1) for i in chosen)} of {rounds} interleaved rounds "
        f"(those in one state, the state with the most), torch {torch.__version__}",
        "",
        f"Host-state monitor (C read loop) before → after each round: {monitored or 'none'}",
        "",
        *table,
        "",
        "Each reference is its confirmed best (the second-fastest trial), the estimator of the "
        "profiler's numbers; the last two columns compare with the fastest single trial instead.",
    ]
    return lines, met
