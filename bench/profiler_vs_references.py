"""The profiler's ceilings against independent references, measured side by side in one run.

    python bench/profiler_vs_references.py [--runs 5] [--out bench/results/profiler.md]

On the CPU (the device this runs on without a GPU):

* read bandwidth: the profiler's read kernel against numpy's ``sum`` and a C STREAM-style read loop
  (``bench/stream.c``, compiled here with the system C compiler and OpenMP, same thread count);
* copy bandwidth: against ``numpy.copyto`` and the C copy loop (bytes read + written);
* peak FLOP/s: against the best ``torch.mm`` over a wide range of square sizes;
* then ``--runs`` complete ``roofline profile`` runs (default mode) in fresh processes, for the
  run-to-run spread (CoV) of the ridge point and the wall time of each mode.

Every reference keeps its best trial, as STREAM does; so do the profiler's ceilings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from roofline_profiler.devices import resolve_devices
from roofline_profiler.measure import bandwidth_buffer_bytes, measure_bandwidth, measure_peak
from roofline_profiler.timing import DEFAULT

HERE = Path(__file__).resolve().parent
TRIALS = 20


def best_seconds(fn: Callable[[], object], trials: int = TRIALS) -> float:
    fn()
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def c_stream(size: int, threads: int) -> dict[str, float] | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "stream"
        subprocess.run(
            [
                compiler,
                "-O3",
                "-march=native",
                "-fopenmp",
                str(HERE / "stream.c"),
                "-o",
                str(binary),
            ],
            check=True,
        )
        out = subprocess.run(
            [str(binary), str(size), str(TRIALS)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "spread"},
        ).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}


def numpy_references(size: int) -> dict[str, float]:
    src = np.random.default_rng(0).random(size // 4, dtype=np.float32)
    dst = np.zeros_like(src)
    return {
        "read": size / best_seconds(lambda: src.sum()),
        "copy": 2 * size / best_seconds(lambda: np.copyto(dst, src)),
    }


def best_torch_mm() -> tuple[float, int]:
    best = (0.0, 0)
    for size in (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096):
        a, b = torch.randn(size, size), torch.randn(size, size)
        out = torch.empty(size, size)
        trials = max(3, min(TRIALS, int(2e9 / (2 * size**3)) + 3))
        rate = 2 * size**3 / best_seconds(lambda a=a, b=b, out=out: torch.mm(a, b, out=out), trials)
        best = max(best, (rate, size))
    return best


def profile_runs(runs: int, quick: bool) -> list[dict[str, float]]:
    rows = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "r.json"
            args = ["profile", "--device", "cpu", "--json", str(path)] + (
                ["--quick"] if quick else []
            )
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "roofline_profiler.cli", *args],
                check=True,
                capture_output=True,
            )
            wall = time.perf_counter() - start
            device = json.loads(path.read_text())["devices"][0]
        rows.append(
            {
                "wall": wall,
                "ridge": device["ridgePoint"],
                "bandwidth": device["bandwidthBytesPerSecond"],
                "peak": device["peakFlopsPerSecond"],
                "minBatch": device["recommendedMinBatch"],
            }
        )
    return rows


def cov(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved bandwidth rounds")
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = parser.parse_args()

    (info,) = resolve_devices("cpu")
    threads = torch.get_num_threads()
    size = bandwidth_buffer_bytes(info)
    # The profiler and the references take turns, and each keeps its best round: a shared host's
    # memory bandwidth drifts over minutes, and a side-by-side ratio must not measure the drift.
    ours_bw: dict[str, float] = {"read": 0.0, "copy": 0.0}
    refs_np: dict[str, float] = {"read": 0.0, "copy": 0.0}
    refs_c: dict[str, float] | None = None
    for _ in range(args.rounds):
        for kind, m in measure_bandwidth(info, DEFAULT).items():
            ours_bw[kind] = max(ours_bw[kind], m.best_rate)
        for kind, rate in numpy_references(size).items():
            refs_np[kind] = max(refs_np[kind], rate)
        c_round = c_stream(size, threads)
        if c_round is not None:
            refs_c = {k: max(v, (refs_c or {}).get(k, 0.0)) for k, v in c_round.items()}
    ours_peak = max(c.flops_per_second for c in measure_peak(info, "float32", DEFAULT, quick=False))
    mm_rate, mm_size = best_torch_mm()

    lines = [
        f"CPU: {info.name}, {threads} torch threads, buffers {size >> 20} MiB, "
        f"best of {args.rounds} interleaved rounds, "
        f"torch {torch.__version__}, numpy {np.__version__}",
        "",
        "| quantity | profiler | reference | value | profiler / reference |",
        "|---|---|---|---|---|",
    ]
    for kind in ("read", "copy"):
        ours = ours_bw[kind]
        refs = {"numpy": refs_np[kind]}
        if refs_c:
            refs["C STREAM-style"] = refs_c[kind]
        for name, value in refs.items():
            lines.append(
                f"| {kind} bandwidth | {ours / 1e9:.1f} GB/s | {name} | {value / 1e9:.1f} GB/s "
                f"| {ours / value:.3f} |"
            )
    lines.append(
        f"| peak fp32 | {ours_peak / 1e9:.1f} GFLOP/s | best torch.mm ({mm_size}³) "
        f"| {mm_rate / 1e9:.1f} GFLOP/s | {ours_peak / mm_rate:.3f} |"
    )

    default_runs = profile_runs(args.runs, quick=False)
    quick_runs = profile_runs(2, quick=True)
    ridges = [r["ridge"] for r in default_runs]
    lines += [
        "",
        f"{args.runs} default-mode runs of `roofline profile --device cpu` in fresh processes:",
        "",
        "| run | wall s | ridge point | bandwidth GB/s | peak GFLOP/s | min batch |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {i} | {r['wall']:.1f} | {r['ridge']:.3f} | {r['bandwidth'] / 1e9:.1f} "
        f"| {r['peak'] / 1e9:.1f} | {r['minBatch']:.0f} |"
        for i, r in enumerate(default_runs, start=1)
    ]
    lines += [
        "",
        f"ridge point: mean {statistics.fmean(ridges):.3f}, CoV {cov(ridges):.2%}; "
        f"bandwidth CoV {cov([r['bandwidth'] for r in default_runs]):.2%}; "
        f"peak CoV {cov([r['peak'] for r in default_runs]):.2%}",
        f"wall time: default mode max {max(r['wall'] for r in default_runs):.1f} s; "
        f"quick mode max {max(r['wall'] for r in quick_runs):.1f} s",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
