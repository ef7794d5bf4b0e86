"""How well the ITL model ``step(B, C) ≈ α + β·B + γ·B·C`` reproduces the plan's own predictions.

Each plan states its fit's worst relative error over the points it was fitted to (the batches
that fit in memory × a quarter, half, three quarters and all of its context). This bench re-plans
saved results from their measurements (``roofline plan``'s path) and checks, per model, device
and context:

* the plan's own predictions (its context, every predicted batch the fit covers) against the
  stated error: they must lie within it, since they are fitted points;
* a denser grid inside the fitted range (contexts every sixteenth of the planned one from a
  quarter to all of it), which the fit did not see: how far the straight line strays between its
  points.

Sources: the H200 record's saved result (``bench/results/gpu/20261204-h200/model-result.json.gz``,
Llama 3.1 8B and Qwen3-30B-A3B at 4K and 32K), results given with ``--result``, and, with
``--profile-configs``, the three architectures of ``model_vs_transformers.py`` profiled on this
machine's CPU at its batches and contexts.

    python bench/itl_fit.py [--result PATH ...] [--profile-configs] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from roofline_profiler.core.decode_model import ModelMeasurements, plan_models, step_seconds
from roofline_profiler.core.itl_model import ItlModel, fit_contexts
from roofline_profiler.core.planning import PlanOptions
from roofline_profiler.wire.result import ProfileResult

HERE = Path(__file__).resolve().parent
H200_RESULT = HERE / "results" / "gpu" / "20261204-h200" / "model-result.json.gz"
#: Contexts of the denser check: every sixteenth of the planned context, from a quarter to all.
DENSE_STEPS = 16


@dataclass(frozen=True)
class FitCheck:
    source: str
    device: str
    model: str
    context: int
    itl: ItlModel
    worst_own: float
    worst_dense: float

    @property
    def own_within(self) -> bool:
        return self.worst_own <= self.itl.max_relative_error + 1e-12


def _relative(itl: ItlModel, batch: int, context: int, step: float) -> float:
    return abs(itl.step_seconds(batch, context) - step) / step


def check(
    source: str, device: str, m: ModelMeasurements, memory: int, peak: float
) -> list[FitCheck]:
    """The fit of every context the model was measured at."""
    checks = []
    for context in m.contexts:
        (plan,) = plan_models(m, [context], memory, peak, PlanOptions())
        itl = plan.itl_model
        if itl is None:
            continue
        own = [
            _relative(itl, p.batch, context, p.step_seconds)
            for p in plan.predictions
            if p.batch in itl.batches
        ]
        low = min(fit_contexts(context))
        dense_contexts = sorted(
            {low + (context - low) * k // DENSE_STEPS for k in range(DENSE_STEPS + 1)}
        )
        dense = [
            _relative(itl, b, c, step_seconds(m, b, c)) for b in itl.batches for c in dense_contexts
        ]
        checks.append(FitCheck(source, device, m.arch.name, context, itl, max(own), max(dense)))
    return checks


def load(path: Path) -> ProfileResult:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return ProfileResult.from_dict(json.load(handle))


def checks_of(path: Path, label: str) -> list[FitCheck]:
    result = load(path)
    found = []
    for device in result.devices:
        for m in device.model_measurements:
            found += check(
                label, device.name, m, device.memory_bytes or 0, device.peak_flops_per_second
            )
    return found


def profile_configs(folder: Path, quick: bool) -> list[tuple[Path, str]]:
    """The bench's architectures profiled on this CPU, as model_vs_transformers profiles them."""
    from model_vs_transformers import BATCHES, CONFIGS, CONTEXTS
    from profiler_prediction import predict

    results = []
    for name, config in CONFIGS.items():
        config_dir = folder / name
        config_dir.mkdir()
        path = config_dir / "config.json"
        path.write_text(json.dumps(config))
        _, wall, shown = predict(path, BATCHES, CONTEXTS, quick, None, "cpu", "float32")
        print(f"{name}: {shown} ({wall:.0f} s)", file=sys.stderr)
        results.append((config_dir / "result.json", f"{name} (this CPU)"))
    return results


def table(checks: Sequence[FitCheck]) -> list[str]:
    lines = [
        "| source | device | model | context | α (ms) | β (µs/seq) | γ (ns/seq/token) | stated "
        "error | worst, plan's own predictions | worst, dense grid | own within stated |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in checks:
        alpha, beta, gamma = c.itl.coefficients
        lines.append(
            f"| {c.source} | {c.device} | {c.model} | {c.context} | {alpha * 1e3:.3f} | "
            f"{beta * 1e6:.3f} | {gamma * 1e9:.3f} | {c.itl.max_relative_error:.1%} | "
            f"{c.worst_own:.1%} | {c.worst_dense:.1%} | {'yes' if c.own_within else 'NO'} |"
        )
    return lines


def record(
    checks: Sequence[FitCheck], argv: Sequence[str], load_before: str, load_after: str
) -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in _lscpu() if line.startswith("Model name")),
        platform.processor() or "unknown",
    )
    within = sum(c.own_within for c in checks)
    lines = [
        f"# ITL fit against the plans' own predictions ({dt.date.today().isoformat()})",
        "",
        f"Command: `python bench/itl_fit.py {' '.join(argv)}`; CPU: {cpu}; load before "
        f"`{load_before}`, after `{load_after}` (a shared 2-vCPU VM: the CPU rows' absolute "
        "times are noisy, the fit's error is what this measures).",
        "",
        f"The plan's own predictions lie within the stated error in {within} of {len(checks)} "
        "plans.",
        "",
        *table(checks),
        "",
    ]
    return "\n".join(lines)


def _lscpu() -> list[str]:
    try:
        return subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False
        ).stdout.splitlines()
    except FileNotFoundError:
        return []


def _uptime() -> str:
    try:
        text = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        return "unknown"
    return "load average" + text.split("load average", 1)[-1].strip() if text else "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--result", action="append", type=Path, default=[], help="a saved result")
    parser.add_argument("--profile-configs", action="store_true", help="profile the bench configs")
    parser.add_argument("--quick", action="store_true", help="profile with --quick")
    parser.add_argument("--out", type=Path, help="write the Markdown record here")
    args = parser.parse_args()
    load_before = _uptime()
    sources = [(H200_RESULT, "H200 record")] + [(p, p.name) for p in args.result]
    with tempfile.TemporaryDirectory() as folder:
        if args.profile_configs:
            sources += profile_configs(Path(folder), args.quick)
        checks = [c for path, label in sources for c in checks_of(path, label)]
    text = record(checks, sys.argv[1:], load_before, _uptime())
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if all(c.own_within for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
