"""Peak resident memory of ``roofline profile`` as profiler pods run it, for the memory request
and limit the operator gives them (``roofline_operator.decide.pod_resources``).

Each configuration runs in a fresh process, and its peak resident set (``ru_maxrss`` of that one
child, from ``os.wait4``) is what the pod's memory cgroup must hold; the process's time is
printed beside it. On a CPU the measured buffers (the decode weights, the bandwidth buffers, a
model's layer and KV cache) live in that resident set; on a GPU they live in device memory and
the host keeps the interpreter, torch and the CUDA context.

    python bench/profiler_memory.py                  # every configuration, a record in results/
    python bench/profiler_memory.py --only default   # the configurations whose name has "default"
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _models(name: str, preset: str, context: int) -> list[str]:
    entry = {"name": name, "preset": preset, "contextTokens": context, "tensorParallel": 1}
    return ["--models-json", json.dumps([entry])]


#: What profiler pods run (``decide.pods.profiler_command``) on a CPU: the CLI's default
#: (float32), a CPU profile's pod (the CRD's default dtype, bfloat16), and with model plans.
CONFIGS: dict[str, list[str]] = {
    # Where no GPU is visible this exits 2 before CUDA initialises: what is left is the host side
    # every pod has (the interpreter, torch and the profiler), the floor of a GPU pod's memory.
    "host floor: --device cuda with no GPU visible (exits 2)": ["--device", "cuda"],
    "cpu default (float32, 4096x14336)": ["--device", "cpu"],
    "cpu bfloat16 (a CPU profile's default pod)": ["--device", "cpu", "--dtype", "bfloat16"],
    "cpu bfloat16 + llama-3.1-8b plan, 4096 tokens": [
        *("--device", "cpu", "--dtype", "bfloat16"),
        *_models("llama-8b", "llama-3.1-8b", 4096),
    ],
    "cpu bfloat16 + llama-3.1-70b plan, 8192 tokens": [
        *("--device", "cpu", "--dtype", "bfloat16"),
        *_models("llama-70b", "llama-3.1-70b", 8192),
    ],
}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def largest_cache_bytes() -> int:
    """The largest cache the kernel reports for CPU 0 (the profiler sizes its buffers by it)."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=0)


def memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def peak_rss(argv: list[str]) -> tuple[int, float, int]:
    """``(peak resident bytes, wall seconds, exit status)`` of one fresh process."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        process = subprocess.Popen(
            [*argv, "--compact", str(Path(scratch) / "compact")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, time.monotonic() - started, process.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="run only configurations whose name has this")
    parser.add_argument("--no-record", action="store_true", help="print, write no record")
    args = parser.parse_args(argv)
    roofline = [sys.executable, "-m", "roofline_cli", "profile"]
    load = os.getloadavg()
    rows = []
    for name, flags in CONFIGS.items():
        if args.only not in name:
            continue
        rss, seconds, code = peak_rss([*roofline, *flags])
        row = f"| {name} | {rss / 2**30:.2f} | {seconds:.0f} | {code} |"
        print(row, flush=True)
        rows.append((name, flags, row))
    if args.no_record or not rows:
        return 0
    today = datetime.date.today().isoformat()
    slug = re.sub(r"[^a-z0-9]+", "-", cpu_model().lower()).strip("-")
    path = RESULTS / f"profiler-memory-{slug}-{today}.md"
    lines = [
        f"# Peak resident memory of `roofline profile` ({cpu_model()}, {today})",
        "",
        f"`python bench/profiler_memory.py{' --only ' + args.only if args.only else ''}`; "
        f"{os.cpu_count()} CPUs, largest cache {largest_cache_bytes() >> 20} MiB, "
        f"{memory_bytes() / 2**30:.1f} GiB of memory, load average {load[0]:.1f} before the runs "
        "(a shared machine: times are noisy, the memory is not).",
        "",
        "| configuration | peak RSS (GiB) | seconds | exit |",
        "|---|---|---|---|",
        *(row for _, _, row in rows),
        "",
        "Commands (each with `--compact FILE`):",
        "",
        *(f"- {name}: `roofline profile {shlex.join(flags)}`" for name, flags, _ in rows),
        "",
    ]
    path.write_text("\n".join(lines))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
