"""The profiler's prediction of a model's decode steps, as a user gets it from the command line.

The model's ``config.json`` is handed to ``roofline profile --model PATH`` in a fresh process (its
threads as the bench's, through ``OMP_NUM_THREADS``), and the predicted step of every batch and
context is read from the JSON it writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def predict(
    config_path: Path,
    batches: tuple[int, ...],
    contexts: tuple[int, ...],
    quick: bool,
    threads: int | None,
    device: str,
    dtype: str,
    extra: tuple[str, ...] = (),
    python: str = sys.executable,
) -> tuple[dict[tuple[int, int], float], float, str]:
    """Run the profiler CLI on the config (``extra``: more of its flags; ``python``: another
    environment's interpreter, which gets this checkout's source on its path); returns its
    predictions, wall time and command. The result stays beside the config as ``result.json``."""
    out = config_path.parent / "result.json"
    command = [
        python, "-m", "roofline_profiler.cli.commands", "profile", "--device", device,
        "--dtype", dtype,
        "--model", str(config_path),
        "--context", ",".join(str(c) for c in contexts),
        "--batches", ",".join(str(b) for b in batches),
        "--json", str(out),
    ]  # fmt: skip
    if quick:
        command.append("--quick")
    command += extra
    env = dict(os.environ)
    if python != sys.executable:
        source = Path(__file__).resolve().parents[1] / "profiler"
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"profiler failed: {proc.stderr.strip()}")
    document = json.loads(out.read_text())
    (measured,) = document["devices"]
    predictions = {
        (p["batch"], p["contextTokens"]): p["stepSeconds"]
        for plan in measured["models"]
        for p in plan["predictions"]
    }
    shown = (
        f"roofline profile --device {device} --dtype {dtype} --model config.json --context "
        + ",".join(str(c) for c in contexts)
        + " --batches "
        + ",".join(str(b) for b in batches)
        + (" --quick" if quick else "")
        + "".join(f" {flag}" for flag in extra)
    )
    return predictions, wall, shown
