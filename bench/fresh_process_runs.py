"""Default-mode ``roofline profile`` runs in fresh processes, quiet and beside a background load.

Every run lies between two readings of the host-state monitor (``stream_reference``), and keeps
the figures the goals of ``profiler_vs_references.py`` judge and its record prints, the memory
level of each of its rounds among them. Parts 2 to 4 of that script, imported by it as a sibling
module.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofline_profiler.core.ceilings import sweep_kernel
from roofline_profiler.core.roofline import arithmetic_intensity, dtype_bytes
from roofline_profiler.measure.workloads import peak_label
from roofline_profiler.wire.host_state_detection import Roles, round_levels
from roofline_profiler.wire.result import ProfileResult
from stream_reference import background_load, crossed

BURST_ON_SECONDS, BURST_OFF_SECONDS = 1.0, 1.0
#: "On" for the continuous load: longer than any bench.
CONTINUOUS_SECONDS = 1e6
CONTINUOUS_RUNS = 2


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


@dataclasses.dataclass(frozen=True)
class Runs:
    """The fresh-process profile runs of every condition, and the loads they ran beside."""

    quiet: list[dict[str, Any]]
    loaded: list[dict[str, Any]]
    contended: list[dict[str, Any]]
    quick: list[dict[str, Any]]
    #: How the bursty and the continuous load were made.
    bursty_load: str
    continuous_load: str


def profile_every_condition(
    binary: Path | None, runs: int, monitor: Callable[[], float | None]
) -> Runs:
    """The default-mode runs quiet, beside a bursty and beside a continuous load, then the quick
    runs, each between two readings of the host-state monitor."""
    print("quiet runs", file=sys.stderr)
    quiet = profile_runs(runs, False, monitor)
    print("loaded runs", file=sys.stderr)
    with background_load(binary, BURST_ON_SECONDS, BURST_OFF_SECONDS) as load:
        loaded = profile_runs(runs, False, monitor)
    print("runs beside a continuous load", file=sys.stderr)
    with background_load(binary, CONTINUOUS_SECONDS, 0.0) as held:
        contended = profile_runs(CONTINUOUS_RUNS, False, monitor) if binary else []
    print("quick runs", file=sys.stderr)
    quick = profile_runs(2, True, monitor)
    return Runs(quiet, loaded, contended, quick, load, held)
