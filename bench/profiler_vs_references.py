"""The profiler against independent references and against itself, on this machine's CPU.

    python bench/profiler_vs_references.py [--runs 5] [--rounds 3] [--out PATH]

One command measures every goal of the profiler's specification and writes a Markdown record
(default ``bench/results/profiler-<cpu model>.md``) with the CPU model, date and command:

1. **Ceilings against references, interleaved.** ``--rounds`` times in turn: a complete in-process
   ``profile_device`` (default mode; its read, copy and peak are the published numbers), the C
   STREAM-style read and copy loops (``bench/stream.c``, compiled here with the system C compiler
   and OpenMP, same thread count, same buffer size), and the best ``torch.mm`` over square sizes
   1024…4096. Every reference is its confirmed best (the second-fastest trial), the estimator the
   profiler's own numbers use, so the ratio compares kernels, not a lone lucky trial against a
   confirmed value; the ratio to the fastest single trial is printed beside it. Each side keeps
   its best round, so the ratio does not measure the host's drift.
   Goal: profiler / reference ≥ 0.95 for read, copy and peak. The copy reference keeps ordinary
   stores, as torch's ``copy_`` does; the same loop with non-temporal stores is printed beside it.
2. **Run to run.** ``--runs`` default-mode ``roofline profile`` runs in fresh processes. A plain
   streaming loop (the C read loop, :data:`MONITOR_TRIALS` trials) runs before and after every run
   as a monitor of the host's state: a run whose two monitor levels differ by
   ``warning_codes.STATE_GAP`` or more crossed states, the others were steady at their level, and
   steady runs within that gap of each other share a state. Goals: within each state, ridge-point
   CoV ≤ 3% and the same recommended min batch in every run; every run that crossed states warns
   ``HostStateChanged`` and no steady run does; wall time ≤ 30 s. (A monitor around a run cannot
   see a state that came and went within it: such a run counts as steady, and its warning as a
   false alarm, which the record's monitor columns let a reader check. Nor can it tell a switch
   during the rounds from one during the peak search before them or after them, which leaves
   every round in one state and rightly no warning: the column of memory levels by round, each
   round's median rate relative to the confirmed rate over the memory-bound workloads
   (``host_state_detection.round_levels``; none for rounds that waited for a CPU), shows which
   rounds the run's own samples put apart.)
3. **Under bursty load.** The same runs beside a STREAM-style copy loop on one core, 1 s on and 1 s
   off, started here and always stopped. Goals: no sweep point above the roof, every ridge point
   within 10% of the quiet runs' mean. Then two runs beside the same loop running continuously,
   where no quiet round exists. Goal: each of them warns ``CpuContention``, and no quiet or quick
   run does (under bursty load the warning is right where the burst hit the rounds behind a
   number; the record counts those).
4. **Quick mode.** Two ``--quick`` runs. Goal: wall time ≤ 10 s.

The ceilings' rounds are monitored too: only rounds that stayed in one state, and of those the
state with the most rounds, are compared, so a profiler round in one state is never set against
a reference round in the other.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from roofline_profiler.core.ceilings import sweep_kernel
from roofline_profiler.core.limits import DEFAULT_BATCHES, DEFAULT_SHAPE
from roofline_profiler.core.roofline import arithmetic_intensity, dtype_bytes
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.runner import ProfileRequest, profile_device
from roofline_profiler.measure.workloads import bandwidth_buffer_bytes, peak_label
from roofline_profiler.wire.host_state_detection import Roles, round_levels
from roofline_profiler.wire.result import ProfileResult
from roofline_profiler.wire.warning_codes import STATE_GAP

HERE = Path(__file__).resolve().parent
TRIALS = 20
MM_SIZES = (1024, 1536, 2048, 3072, 4096)
#: Trials of each reference matmul size last about this long (the profiler's search: 0.25 s).
MM_SECONDS = 0.5
BURST_ON_SECONDS, BURST_OFF_SECONDS = 1.0, 1.0
#: "On" for the continuous load: longer than any bench.
CONTINUOUS_SECONDS = 1e6
CONTINUOUS_RUNS = 2
BURST_BYTES = 256 << 20

#: Trials of the host-state monitor around each run: about half a second of streaming.
MONITOR_TRIALS = 10

GOAL_RATIO = 0.95
GOAL_RIDGE_COV = 0.03
GOAL_LOADED_RIDGE = 0.10
GOAL_DEFAULT_SECONDS = 30.0
GOAL_QUICK_SECONDS = 10.0


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


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


def compile_stream(directory: Path) -> Path | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    binary = directory / "stream"
    subprocess.run(
        [compiler, "-O3", "-march=native", "-fopenmp", str(HERE / "stream.c"), "-o", str(binary)],
        check=True,
    )
    return binary


def stream_lines(binary: Path, size: int, trials: int, threads: int) -> list[str]:
    """The C STREAM binary's output, a line a kernel (name, confirmed best, fastest trial), its
    OpenMP threads spread over the cores."""
    return subprocess.run(
        [str(binary), str(size), str(trials)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "spread"},
    ).stdout.splitlines()


def c_stream(binary: Path, size: int, threads: int) -> dict[str, tuple[float, float]]:
    """Each kernel's (confirmed best, fastest trial) rate."""
    rates = {}
    for line in stream_lines(binary, size, TRIALS, threads):
        name, confirmed, fastest = line.split()
        rates[name] = (float(confirmed), float(fastest))
    return rates


def monitor_level(binary: Path | None, size: int, threads: int) -> float | None:
    """The host's state now: the C read loop's confirmed rate (None without a C compiler)."""
    if binary is None:
        return None
    lines = stream_lines(binary, size, MONITOR_TRIALS, threads)
    return next(float(line.split()[1]) for line in lines if line.startswith("read "))


def crossed(before: float | None, after: float | None) -> bool:
    """Whether the monitor saw the host change state between the two readings."""
    if before is None or after is None:
        return False
    return abs(after / before - 1) >= STATE_GAP


def states_of(levels: dict[int, float]) -> list[list[int]]:
    """Keys grouped by level: sorted levels split wherever two neighbours lie ``STATE_GAP``
    apart; the largest group first."""
    groups: list[list[int]] = []
    last = 0.0
    for key in sorted(levels, key=lambda k: levels[k]):
        if groups and levels[key] < last * (1 + STATE_GAP):
            groups[-1].append(key)
        else:
            groups.append([key])
        last = levels[key]
    return sorted(groups, key=len, reverse=True)


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


@contextlib.contextmanager
def background_load(binary: Path | None, on: float, off: float) -> Iterator[str]:
    """A STREAM-style copy on one core, ``on`` seconds on and ``off`` off (``off=0``: always),
    for as long as the block runs."""
    if binary is None:
        yield "no C compiler: no background load"
        return
    command = [str(binary), "--burst", str(BURST_BYTES), str(on), str(off)]
    if shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    proc = subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        how = f"{on:.0f} s on / {off:.0f} s off" if off else "continuous"
        yield f"one-core STREAM-style copy over {BURST_BYTES >> 20} MiB arrays, {how}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def memory_round_levels(document: dict[str, Any]) -> dict[int, float]:
    """The level of the memory-bound workloads in each round of a run, relative to their
    confirmed rates (``host_state_detection.round_levels``; rounds that waited for a CPU have
    none)."""
    result = ProfileResult.from_dict(document)
    device = result.devices[0]
    peak = {peak_label((c.m, c.n, c.k)): c.measurement for c in device.peak_candidates}
    every = {
        **device.bandwidth,
        **peak,
        **{sweep_kernel(e.point.batch): e.measurement for e in device.sweep},
    }
    element_bytes = dtype_bytes(device.dtype)
    roles = Roles(
        tuple(device.bandwidth),
        tuple(peak),
        {
            sweep_kernel(b): arithmetic_intensity(b, result.shape_k, result.shape_n, element_bytes)
            for b in result.batches
        },
    )
    memory, _ = roles.resources(every)
    return round_levels(memory.labels, every)


def profile_runs(
    runs: int, quick: bool, monitor: Callable[[], float | None]
) -> list[dict[str, Any]]:
    rows = []
    for _ in range(runs):
        before = monitor()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "r.json"
            args = ["profile", "--device", "cpu", "--json", str(path)] + (
                ["--quick"] if quick else []
            )
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "roofline_profiler.cli.commands", *args],
                check=True,
                capture_output=True,
            )
            wall = time.perf_counter() - start
            document = json.loads(path.read_text())
            device = document["devices"][0]
        after = monitor()
        above = max(p["rooflineFraction"] for p in device["sweep"])
        rows.append(
            {
                "monitor": (before, after),
                "roundLevels": memory_round_levels(document),
                "hostStates": device.get("hostStates"),
                "wall": wall,
                "ridge": device["ridgePoint"],
                "ridgeInterval": device["ridgePointInterval"],
                "bandwidth": device["bandwidthBytesPerSecond"],
                "kernel": device["bandwidthKernel"],
                "peak": device["peakFlopsPerSecond"],
                "peakKernel": device["peakKernel"],
                "minBatch": device["recommendedMinBatch"],
                "crossing": device["minBatchCrossing"],
                "maxRooflineFraction": above,
                "warnings": [w["code"] for w in device["warnings"]],
            }
        )
    return rows


def run_states(rows: list[dict[str, Any]]) -> list[list[int]]:
    """The steady runs (the monitor saw one state around them) grouped by state, largest first."""
    levels = {
        i: (r["monitor"][0] + r["monitor"][1]) / 2
        for i, r in enumerate(rows)
        if None not in r["monitor"] and not crossed(*r["monitor"])
    }
    return states_of(levels)


def within_states(rows: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    """Ridge CoV and min batches of the runs in each state the monitor saw; met when every state
    with two runs or more meets both goals (and at least one state has two)."""
    lines, met, judged = [], True, False
    for group in run_states(rows):
        level = statistics.fmean(sum(rows[i]["monitor"]) / 2 for i in group) / 1e9
        if len(group) < 2:
            lines.append(f"one run at {level:.1f} GB/s")
            continue
        judged = True
        ridge_cov = cov([rows[i]["ridge"] for i in group])
        batches = sorted({rows[i]["minBatch"] for i in group})
        met = met and ridge_cov <= GOAL_RIDGE_COV and len(batches) == 1
        lines.append(
            f"{len(group)} runs at {level:.1f} GB/s: ridge CoV {ridge_cov:.2%}, min batch {batches}"
        )
    return met and judged, lines or ["no monitored run"]


def flagged_crossings(rows: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether every run the monitor saw cross states warned HostStateChanged and no steady one."""
    monitored = [r for r in rows if None not in r["monitor"]]
    crossing = [r for r in monitored if crossed(*r["monitor"])]
    steady = [r for r in monitored if not crossed(*r["monitor"])]
    hit = sum("HostStateChanged" in r["warnings"] for r in crossing)
    false = sum("HostStateChanged" in r["warnings"] for r in steady)
    line = f"{hit} of {len(crossing)} that crossed, {false} of {len(steady)} steady"
    return bool(monitored) and hit == len(crossing) and false == 0, line


def quiet_mean_near(quiet: list[dict[str, Any]], row: dict[str, Any]) -> float:
    """The mean ridge of the quiet runs in ``row``'s state (the monitor's), else of all."""
    if None in row["monitor"]:
        return statistics.fmean(r["ridge"] for r in quiet)
    level = sum(row["monitor"]) / 2
    near = [
        r["ridge"]
        for r in quiet
        if None not in r["monitor"]
        and not crossed(*r["monitor"])
        and abs(sum(r["monitor"]) / 2 / level - 1) < STATE_GAP
    ]
    return statistics.fmean(near or [r["ridge"] for r in quiet])


def cov(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def runs_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| run | monitor GB/s before → after | wall s | ridge point (95%) | slope GB/s (kernel) "
        "| peak GFLOP/s (kernel) | min batch (crossing) | max of roofline | warnings "
        "| memory level by round |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, start=1):
        interval = r["ridgeInterval"]
        crossing = f"{r['crossing']:.0f}" if r["crossing"] else "-"
        before, after = r["monitor"]
        seen = (
            f"{before / 1e9:.1f} → {after / 1e9:.1f}"
            + (" (crossed)" if crossed(before, after) else "")
            if before is not None and after is not None
            else "-"
        )
        lines.append(
            f"| {i} | {seen} | {r['wall']:.1f} | {r['ridge']:.2f} ({interval['low']:.2f}–"
            f"{interval['high']:.2f}) | {r['bandwidth'] / 1e9:.1f} ({r['kernel']}) "
            f"| {r['peak'] / 1e9:.0f} ({r['peakKernel']}) | {r['minBatch']} ({crossing}) "
            f"| {r['maxRooflineFraction']:.3f} | {', '.join(r['warnings']) or '-'} "
            f"| {' '.join(f'{i}: {v:.2f}' for i, v in r['roundLevels'].items()) or '-'} |"
        )
    return lines


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
    keys = ("read", "copy", "copy_nt", "peak")
    per_round: list[dict[str, Any]] = []
    for position in range(rounds):
        print(f"ceilings round {position + 1}/{rounds}", file=sys.stderr)
        before = monitor_level(binary, size, threads)
        d = profile_device(info, "float32", request, lambda _: None)
        taken: dict[str, Any] = {
            "ours": {
                "read": (d.read_bandwidth_bytes_per_second, d.read_bandwidth_kernel),
                "copy": (d.copy_bandwidth_bytes_per_second, "copy"),
                "copy_nt": (d.copy_bandwidth_bytes_per_second, "copy"),
                "peak": (d.peak_flops_per_second, d.source("peak_flops_per_second")),
            },
            "refs": dict.fromkeys(keys, (0.0, 0.0)),
            "warnings": [w.code for w in d.warnings],
        }
        if binary is not None:
            taken["refs"].update(c_stream(binary, size, threads))
        rate, fast, at = best_torch_mm()
        taken["refs"]["peak"], taken["mm"] = (rate, fast), at
        taken["monitor"] = (before, monitor_level(binary, size, threads))
        per_round.append(taken)
    # Only rounds that stayed in one state, and of those the state with the most rounds.
    steady = {
        i: sum(r["monitor"]) / 2
        for i, r in enumerate(per_round)
        if None not in r["monitor"] and not crossed(*r["monitor"])
    }
    chosen = states_of(steady)[0] if steady else list(range(rounds))
    ours = dict.fromkeys(keys, 0.0)
    kernels: dict[str, str] = {}
    refs = dict.fromkeys(keys, 0.0)  # confirmed bests
    fastest = dict.fromkeys(keys, 0.0)  # fastest single trials
    mm_size = 0
    for i in chosen:
        r = per_round[i]
        for key in keys:
            value, kernel = r["ours"][key]
            if value > ours[key]:
                ours[key], kernels[key] = value, kernel
            confirmed, fast = r["refs"][key]
            fastest[key] = max(fastest[key], fast)
            if confirmed > refs[key]:
                refs[key] = confirmed
                if key == "peak":
                    mm_size = r["mm"]
    names = {
        "read": "C STREAM-style read loop",
        "copy": "C STREAM-style copy loop",
        "copy_nt": "the same copy, non-temporal stores (not a goal: torch's copy_ does not stream)",
        "peak": f"best torch.mm over {MM_SIZES[0]}…{MM_SIZES[-1]} ({mm_size}³)",
    }
    units = {"read": ("GB/s", 1e9), "copy": ("GB/s", 1e9), "copy_nt": ("GB/s", 1e9)}
    units["peak"] = ("GFLOP/s", 1e9)
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
        "| quantity | profiler (kernel) | reference | value | profiler / reference | goal ≥ 0.95 "
        "| fastest trial | profiler / fastest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    met = []
    for key in keys:
        unit, scale = units[key]
        if not refs[key]:
            lines.append(f"| {key} | {ours[key] / scale:.1f} {unit} | {names[key]} | n/a | | |")
            continue
        ratio = ours[key] / refs[key]
        goal = verdict(ratio >= GOAL_RATIO) if key != "copy_nt" else "-"
        if key != "copy_nt":
            met.append(ratio >= GOAL_RATIO)
        lines.append(
            f"| {key} | {ours[key] / scale:.1f} {unit} ({kernels[key]}) | {names[key]} "
            f"| {refs[key] / scale:.1f} {unit} | {ratio:.3f} | {goal} "
            f"| {fastest[key] / scale:.1f} {unit} | {ours[key] / fastest[key]:.3f} |"
        )
    lines += [
        "",
        "Each reference is its confirmed best (the second-fastest trial), the estimator of the "
        "profiler's numbers; the last two columns compare with the fastest single trial instead.",
    ]
    return lines, met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved ceiling rounds")
    parser.add_argument("--out", type=Path, help="where to write the Markdown record")
    args = parser.parse_args()
    model = cpu_model()
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"\([^)]*\)", "", model.lower())).strip("-")
    out = args.out or HERE / "results" / f"profiler-{slug}.md"
    command = "python bench/profiler_vs_references.py " + " ".join(sys.argv[1:])
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_before = os.getloadavg()[0]

    with tempfile.TemporaryDirectory() as tmp:
        binary = compile_stream(Path(tmp))
        (info,) = resolve_devices("cpu")
        monitor = functools.partial(
            monitor_level, binary, bandwidth_buffer_bytes(info), torch.get_num_threads()
        )
        ceiling_lines, ceilings_met = compare_ceilings(args.rounds, binary)
        print("quiet runs", file=sys.stderr)
        quiet = profile_runs(args.runs, False, monitor)
        print("loaded runs", file=sys.stderr)
        with background_load(binary, BURST_ON_SECONDS, BURST_OFF_SECONDS) as load:
            loaded = profile_runs(args.runs, False, monitor)
        print("runs beside a continuous load", file=sys.stderr)
        with background_load(binary, CONTINUOUS_SECONDS, 0.0) as held:
            contended = profile_runs(CONTINUOUS_RUNS, False, monitor) if binary else []
        print("quick runs", file=sys.stderr)
        quick = profile_runs(2, True, monitor)

    load_after = os.getloadavg()[0]
    ridges = [r["ridge"] for r in quiet]
    mean_ridge = statistics.fmean(ridges)
    within, state_lines = within_states(quiet)
    flagging, flag_line = flagged_crossings(quiet + quick)
    loaded_dev = max(abs(r["ridge"] / quiet_mean_near(quiet, r) - 1) for r in loaded)
    loaded_above = max(r["maxRooflineFraction"] for r in loaded)
    slowest = max(r["wall"] for r in quiet + loaded)
    slowest_quick = max(r["wall"] for r in quick)
    ridge_cov = cov(ridges)
    warned = sum("CpuContention" in r["warnings"] for r in contended)
    false_alarms = sum("CpuContention" in r["warnings"] for r in quiet + quick)
    burst_warned = sum("CpuContention" in r["warnings"] for r in loaded)
    goals = [
        ("read, copy, peak ≥ 0.95× references", all(ceilings_met) and len(ceilings_met) == 3),
        (
            "within each state the monitor saw: ridge CoV ≤ 3% and the same min batch ("
            + "; ".join(state_lines)
            + ")",
            within,
        ),
        (
            f"HostStateChanged in every run that crossed states and no steady one ({flag_line})",
            flagging,
        ),
        (
            f"no sweep point above the roof under load (max {loaded_above:.3f} of the roof)",
            loaded_above <= 1 + 1e-9,
        ),
        (
            f"ridge within 10% of quiet under load (worst {loaded_dev:.1%})",
            loaded_dev <= GOAL_LOADED_RIDGE,
        ),
        (
            f"CpuContention in every run beside a continuous load ({warned} of {len(contended)}) "
            f"and in no quiet run ({false_alarms} of {len(quiet + quick)}; under bursty load "
            f"{burst_warned} of {len(loaded)}, where it says the burst hit the rounds behind a "
            "number)",
            bool(contended) and warned == len(contended) and false_alarms == 0,
        ),
        (f"default mode ≤ 30 s (slowest {slowest:.1f} s)", slowest <= GOAL_DEFAULT_SECONDS),
        (
            f"quick mode ≤ 10 s (slowest {slowest_quick:.1f} s)",
            slowest_quick <= GOAL_QUICK_SECONDS,
        ),
    ]
    lines = [
        "# Profiler against references and against itself (CPU)",
        "",
        f"CPU model (/proc/cpuinfo): {model}; {os.cpu_count()} logical CPUs. Measured {started}.",
        "",
        f"One-minute load average before the bench {load_before:.2f}, after it {load_after:.2f} "
        "(the bench itself adds about the number of CPUs while it runs): a figure well above that "
        "means other work shared the machine, and the quiet-run goals do not apply.",
        "",
        "Command (from the repository root, with the dev environment of `make test`):",
        "",
        "```sh",
        f".venv/bin/{command.strip()}",
        "```",
        "",
        "## Goals",
        "",
        *[f"- {name}: {verdict(ok)}" for name, ok in goals],
        "",
        "## Ceilings against references, interleaved",
        "",
        *ceiling_lines,
        "",
        f"## {args.runs} default-mode runs, fresh processes",
        "",
        *runs_table(quiet),
        "",
        f"ridge point over every run, whatever its state: mean {mean_ridge:.3f}, "
        f"CoV {ridge_cov:.2%}; "
        f"slope CoV {cov([r['bandwidth'] for r in quiet]):.2%}; "
        f"peak CoV {cov([r['peak'] for r in quiet]):.2%}",
        "",
        f"## {args.runs} default-mode runs under bursty load ({load})",
        "",
        *runs_table(loaded),
        "",
        f"ridge point: mean {statistics.fmean(r['ridge'] for r in loaded):.3f}, worst deviation "
        f"from the mean of the quiet runs in the same state {loaded_dev:.1%}",
        "",
        f"## {len(contended)} default-mode runs beside a continuous load ({held})",
        "",
        "Not a goal of the numbers (no quiet round exists): the profile must say so.",
        "",
        *runs_table(contended),
        "",
        "## Quick mode",
        "",
        *runs_table(quick),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out.write_text(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
