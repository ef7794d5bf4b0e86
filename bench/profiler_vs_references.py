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
   streaming loop (the C read loop, ``stream_reference.MONITOR_TRIALS`` trials) runs before and
   after every run as a monitor of the host's state: a run whose two monitor levels differ by
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
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from ceiling_references import compare_ceilings, verdict
from flag_types import positive_int
from fresh_process_runs import Runs, profile_every_condition, runs_table
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.workloads import bandwidth_buffer_bytes
from roofline_profiler.wire.warning_codes import STATE_GAP
from stream_reference import compile_stream, crossed, monitor_level, steady_states

HERE = Path(__file__).resolve().parent

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


#: The /proc/cpuinfo flags that set a CPU's bf16 and int8 GEMM paths: hosts reporting the same model
#: name differ here (an ``AMD EPYC`` guest with AVX-512 BF16 ran a bf16 prompt about 15 times as
#: fast as one with AVX2 alone).
MATRIX_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8")


def cpu_features() -> str:
    """Which of :data:`MATRIX_FLAGS` the CPU reports, as a record names them (``unknown`` where
    /proc/cpuinfo cannot be read)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                found = [f for f in MATRIX_FLAGS if f in flags]
                return ", ".join(found) or "none of " + ", ".join(MATRIX_FLAGS)
    return "unknown"


def cpu_slug(cpu: str) -> str:
    """``cpu`` as a record's file name names it: lower case, trademarks dropped, words joined by
    hyphens (``AMD EPYC`` → ``amd-epyc``)."""
    return "-".join(cpu.lower().replace("(r)", "").replace("(tm)", "").split())


def within_states(rows: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    """Ridge CoV and min batches of the runs in each state the monitor saw; met when every state
    with two runs or more meets both goals (and at least one state has two)."""
    lines, met, judged = [], True, False
    for group in steady_states([r["monitor"] for r in rows]):
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


def worst_loaded_deviation(runs: Runs) -> float:
    """The largest deviation of a ridge under bursty load from the quiet runs' in its state."""
    return max(abs(r["ridge"] / quiet_mean_near(runs.quiet, r) - 1) for r in runs.loaded)


def load_goals(runs: Runs) -> list[tuple[str, bool]]:
    """The goals of the runs beside a load: the bursty load's roof and ridge, the continuous
    load's ``CpuContention``."""
    loaded_dev = worst_loaded_deviation(runs)
    loaded_above = max(r["maxRooflineFraction"] for r in runs.loaded)
    unloaded, loaded, contended = runs.quiet + runs.quick, runs.loaded, runs.contended
    warned = sum("CpuContention" in r["warnings"] for r in contended)
    false_alarms = sum("CpuContention" in r["warnings"] for r in unloaded)
    burst_warned = sum("CpuContention" in r["warnings"] for r in loaded)
    return [
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
            f"and in no quiet run ({false_alarms} of {len(unloaded)}; under bursty load "
            f"{burst_warned} of {len(loaded)}, where it says the burst hit the rounds behind a "
            "number)",
            bool(contended) and warned == len(contended) and false_alarms == 0,
        ),
    ]


def evaluate_goals(runs: Runs, ceilings_met: list[bool]) -> list[tuple[str, bool]]:
    """Every goal of the specification, named with the figures that decide it, in record order."""
    within, state_lines = within_states(runs.quiet)
    flagging, flag_line = flagged_crossings(runs.quiet + runs.quick)
    slowest = max(r["wall"] for r in runs.quiet + runs.loaded)
    slowest_quick = max(r["wall"] for r in runs.quick)
    return [
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
        *load_goals(runs),
        (f"default mode ≤ 30 s (slowest {slowest:.1f} s)", slowest <= GOAL_DEFAULT_SECONDS),
        (
            f"quick mode ≤ 10 s (slowest {slowest_quick:.1f} s)",
            slowest_quick <= GOAL_QUICK_SECONDS,
        ),
    ]


def record_preamble(model: str, started: str, load: tuple[float, float], command: str) -> list[str]:
    """The record's title, the machine, the load around the bench and the command."""
    return [
        "# Profiler against references and against itself (CPU)",
        "",
        f"CPU model (/proc/cpuinfo): {model}; {os.cpu_count()} logical CPUs. Measured {started}.",
        "",
        f"One-minute load average before the bench {load[0]:.2f}, after it {load[1]:.2f} "
        "(the bench itself adds about the number of CPUs while it runs): a figure well above that "
        "means other work shared the machine, and the quiet-run goals do not apply.",
        "",
        "Command (from the repository root, with the dev environment of `make test`):",
        "",
        "```sh",
        f".venv/bin/{command.strip()}",
        "```",
    ]


def runs_sections(runs: Runs, count: int) -> list[str]:
    """The record's tables of the runs of every condition, each with its summary line."""
    quiet = runs.quiet
    ridges = [r["ridge"] for r in quiet]
    return [
        f"## {count} default-mode runs, fresh processes",
        "",
        *runs_table(quiet),
        "",
        f"ridge point over every run, whatever its state: mean {statistics.fmean(ridges):.3f}, "
        f"CoV {cov(ridges):.2%}; "
        f"slope CoV {cov([r['bandwidth'] for r in quiet]):.2%}; "
        f"peak CoV {cov([r['peak'] for r in quiet]):.2%}",
        "",
        f"## {count} default-mode runs under bursty load ({runs.bursty_load})",
        "",
        *runs_table(runs.loaded),
        "",
        f"ridge point: mean {statistics.fmean(r['ridge'] for r in runs.loaded):.3f}, worst "
        f"deviation from the mean of the quiet runs in the same state "
        f"{worst_loaded_deviation(runs):.1%}",
        "",
        f"## {len(runs.contended)} default-mode runs beside a continuous load "
        f"({runs.continuous_load})",
        "",
        "Not a goal of the numbers (no quiet round exists): the profile must say so.",
        "",
        *runs_table(runs.contended),
        "",
        "## Quick mode",
        "",
        *runs_table(runs.quick),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--rounds", type=positive_int, default=3, help="interleaved ceiling rounds")
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
        runs = profile_every_condition(binary, args.runs, monitor)

    load_after = os.getloadavg()[0]
    lines = [
        *record_preamble(model, started, (load_before, load_after), command),
        "",
        "## Goals",
        "",
        *[f"- {name}: {verdict(ok)}" for name, ok in evaluate_goals(runs, ceilings_met)],
        "",
        "## Ceilings against references, interleaved",
        "",
        *ceiling_lines,
        "",
        *runs_sections(runs, args.runs),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out.write_text(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
