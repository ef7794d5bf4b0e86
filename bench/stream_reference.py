"""The C STREAM-style reference (``bench/stream.c``) and the host-state monitor built on it.

``profiler_vs_references.py`` compares the profiler's read and copy rates with the C loops, runs
the C read loop around every measurement as a monitor of the host's state (a host whose memory
switches between levels within seconds would otherwise be taken for run-to-run spread) and runs
a one-core copy loop beside the profiler as a background load. Imported by the script as a
sibling module (``python bench/profiler_vs_references.py`` puts ``bench/`` on the path).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from roofline_profiler.wire.warning_codes import STATE_GAP

HERE = Path(__file__).resolve().parent
TRIALS = 20
BURST_BYTES = 256 << 20

#: Trials of the host-state monitor around each run: about half a second of streaming.
MONITOR_TRIALS = 10

#: A monitor's levels before and after a measurement (None without a C compiler).
Monitored = tuple[float | None, float | None]


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


def steady_states(monitored: Sequence[Monitored]) -> list[list[int]]:
    """The positions of the steady measurements (the monitor saw one state around them) grouped
    by state, largest first."""
    levels = {
        i: (before + after) / 2
        for i, (before, after) in enumerate(monitored)
        if before is not None and after is not None and not crossed(before, after)
    }
    return states_of(levels)


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
