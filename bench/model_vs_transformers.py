"""The profiler's predicted decode step against the real decode step of ``transformers`` models.

For each architecture (dense GQA Llama, Qwen3 with tied embeddings and q/k norm, Mixtral MoE) a
model is built from its config with random weights (nothing is downloaded) in fp32 on the CPU.
Its real decode step is timed with a static KV cache filled to the context (``model(next_tokens,
cache=...)`` with the cache position reset before each run, so every run attends over the same
context), at every batch and context. The same config is saved as ``config.json`` and handed to
``roofline profile --model PATH``, whose predictions are compared with the real steps.

Order per architecture: reference run 1, the profiler, reference run 2, retakes, reference run 3.
The reference is the geometric mean of runs 1 and 2 (taken just before and after the prediction);
a point where they differ by more than 10% (a burst of outside load during one of them) is timed
again until two runs agree, at most twice, and the two that agree best form its reference. The
error of the prediction is measured against it, and so is run 3's, which is the noise floor: what
a perfect predictor (the real model, run once more) scores on this machine.

    python bench/model_vs_transformers.py [--quick] [--threads N] [--only NAME] [--out PATH]

Needs the ``bench`` extra (``pip install -e '.[profiler,bench]'``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

BATCHES = (1, 2, 4, 8, 16, 32, 64)
#: Reference runs of a point further apart than this are retaken (see ``retake_disagreeing``).
RETAKE_RATIO = 1.10
RETAKES = 2
CONTEXTS = (256, 2048)

#: Small but real configs: 300–350 M parameters, so the weights (1.2–1.4 GB in fp32) are several
#: times any CPU cache and a step at batch 64 takes a fraction of a second.
CONFIGS: dict[str, dict[str, Any]] = {
    "dense-gqa": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 1536,
        "intermediate_size": 4096,
        "num_hidden_layers": 8,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    },
    "tied-qk-norm": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "moe": {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": 1024,
        "intermediate_size": 1792,
        "num_hidden_layers": 6,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    },
}

#: Per point: at least this many timed steps, more while under the time budget.
MIN_STEPS = 3
MAX_STEPS = 15
STEP_BUDGET_SECONDS = 1.0


def build_model(config: dict[str, Any], device: str = "cpu", dtype: str = "float32") -> Any:
    import transformers

    cls = getattr(transformers, config["architectures"][0])
    fields = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}
    hf_config = transformers.AutoConfig.for_model(**fields)
    torch.manual_seed(0)
    with torch.device(device):
        model = cls(hf_config).to(getattr(torch, dtype)).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: Why a GPU reference step could not be captured as a CUDA graph (then it ran eagerly).
EAGER_REASONS: list[str] = []


def _graphed(step: Any, device: torch.device) -> Any:
    """``step`` captured as a CUDA graph (the engines replay their decode steps so); its replay,
    or ``step`` itself when the capture fails (the reason goes to :data:`EAGER_REASONS`)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            step()
    except RuntimeError as error:
        torch.cuda.synchronize(device)
        EAGER_REASONS.append((str(error).strip().splitlines() or ["RuntimeError"])[0][:160])
        return step
    return graph.replay


def decode_step_seconds(model: Any, batch: int, context: int, quick: bool) -> float:
    """Median time of one decode step at ``batch`` sequences of ``context`` cached tokens; on a
    GPU the step (the cache reset and the forward) is replayed as a CUDA graph."""
    from transformers import StaticCache

    device = model.device
    cache = StaticCache(config=model.config, max_cache_len=context + 1)
    ids = torch.randint(0, model.config.vocab_size, (batch, 1), device=device)
    position = torch.tensor([context], device=device)

    def step() -> None:
        for layer in cache.layers:
            layer.cumulative_length.fill_(context)
        model(ids, cache=cache, cache_position=position)

    with torch.no_grad():
        model(ids, cache=cache, cache_position=position)  # allocates the cache
        for layer in cache.layers:
            layer.keys.normal_()
            layer.values.normal_()
        run = _graphed(step, device) if device.type == "cuda" else step
        times: list[float] = []
        spent = time.perf_counter()
        while len(times) < (2 if quick else MAX_STEPS):
            _sync(device)
            start = time.perf_counter()
            run()
            _sync(device)
            times.append(time.perf_counter() - start)
            enough = len(times) >= (2 if quick else MIN_STEPS)
            if enough and time.perf_counter() - spent > STEP_BUDGET_SECONDS:
                break
    return statistics.median(times[1:] if len(times) > 2 else times)


def reference_run(model: Any, quick: bool) -> dict[tuple[int, int], float]:
    return {(b, c): decode_step_seconds(model, b, c, quick) for c in CONTEXTS for b in BATCHES}


def _closest_pair(runs: list[float]) -> tuple[float, float]:
    """The two runs that agree best: the smallest ratio of the slower to the faster."""
    pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :]]
    return min(pairs, key=lambda p: max(p) / min(p))


def reference_of(runs: list[float]) -> float:
    """The geometric mean of the two runs that agree best (before and after, when no point
    needed a retake)."""
    a, b = _closest_pair(runs)
    return math.sqrt(a * b)


def retake_disagreeing(
    model: Any,
    first: dict[tuple[int, int], float],
    second: dict[tuple[int, int], float],
    quick: bool,
) -> dict[tuple[int, int], list[float]]:
    """Points whose two reference runs disagree by more than :data:`RETAKE_RATIO`, timed again
    (at most :data:`RETAKES` times, until two runs agree): a burst of outside load during one run
    of one point is then not taken for the model's speed."""
    retakes: dict[tuple[int, int], list[float]] = {}
    for (b, c), before in first.items():
        runs = [before, second[(b, c)]]
        while len(runs) < 2 + RETAKES and not _agree(runs):
            runs.append(decode_step_seconds(model, b, c, quick))
        if len(runs) > 2:
            retakes[(b, c)] = runs[2:]
    return retakes


def _agree(runs: list[float]) -> bool:
    a, b = _closest_pair(runs)
    return max(a, b) / min(a, b) <= RETAKE_RATIO


def predict(
    config_path: Path, quick: bool, threads: int | None, device: str, dtype: str
) -> tuple[dict[tuple[int, int], float], float, str]:
    """Run the profiler CLI on the config; returns its predictions, wall time and command."""
    out = config_path.parent / "result.json"
    command = [
        sys.executable, "-m", "roofline_profiler.cli.commands", "profile", "--device", device,
        "--dtype", dtype,
        "--model", str(config_path),
        "--context", ",".join(str(c) for c in CONTEXTS),
        "--batches", ",".join(str(b) for b in BATCHES),
        "--json", str(out),
    ]  # fmt: skip
    if quick:
        command.append("--quick")
    env = dict(os.environ)
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
        + ",".join(str(c) for c in CONTEXTS)
        + " --batches "
        + ",".join(str(b) for b in BATCHES)
        + (" --quick" if quick else "")
    )
    return predictions, wall, shown


def errors(
    candidate: dict[tuple[int, int], float], reference: dict[tuple[int, int], float]
) -> tuple[float, float]:
    """Geometric-mean error ``exp(mean |ln(c/r)|) − 1`` and the worst ``|c/r − 1|``."""
    logs = [abs(math.log(candidate[k] / reference[k])) for k in reference]
    worst = max(abs(candidate[k] / reference[k] - 1) for k in reference)
    return math.exp(statistics.fmean(logs)) - 1, worst


def shown_arguments() -> list[str]:
    """This run's arguments, without where the results went."""
    shown, skip = [], False
    for argument in sys.argv[1:]:
        if skip or argument.startswith("--out"):
            skip = argument == "--out"
            continue
        shown.append(argument)
    return shown


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_name()


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--only", choices=sorted(CONFIGS), action="append")
    parser.add_argument(
        "--preset", action="append", help="also a full-size preset (e.g. llama-3.1-8b; GPUs)"
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda:N")
    parser.add_argument("--dtype", default="float32", help="float32 (default) or bfloat16")
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "model_vs_transformers.md")
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    configs = dict(CONFIGS)
    if args.preset:
        from roofline_profiler.core.model_config import PRESETS

        configs = {name: dict(PRESETS[name]) for name in args.preset}
        configs.update({name: CONFIGS[name] for name in args.only or ()})
    names = list(configs) if args.preset else args.only or list(CONFIGS)
    sections = []
    summary = []
    all_pred: list[float] = []
    all_noise: list[float] = []
    all_fast: list[float] = []
    worst_fast = 0.0
    worst_pred = worst_noise = 0.0
    retaken = 0
    load_before = os.getloadavg()
    for name in names:
        config = configs[name]
        print(f"== {name}", flush=True)
        model = build_model(config, args.device, args.dtype)
        params = sum(p.numel() for p in model.parameters())
        first = reference_run(model, args.quick)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(config, indent=2))
            predicted, wall, command = predict(
                path, args.quick, args.threads, args.device, args.dtype
            )
        second = reference_run(model, args.quick)
        retakes = retake_disagreeing(model, first, second, args.quick)
        third = reference_run(model, args.quick)
        del model
        reference = {k: reference_of([first[k], second[k], *retakes.get(k, ())]) for k in first}
        retaken += sum(1 for k in retakes)
        geo, worst = errors(predicted, reference)
        noise_geo, noise_worst = errors(third, reference)
        # The less disturbed of the two reference runs at each point: interference from other
        # processes only ever slows a run, so on a shared machine it is the closer to the truth.
        faster = {k: min(first[k], second[k]) for k in first}
        fast_geo, fast_worst = errors(predicted, faster)
        fast_noise_geo, fast_noise_worst = errors(third, faster)
        all_pred += [abs(math.log(predicted[k] / reference[k])) for k in reference]
        all_noise += [abs(math.log(third[k] / reference[k])) for k in reference]
        all_fast += [abs(math.log(predicted[k] / faster[k])) for k in faster]
        worst_fast = max(worst_fast, fast_worst)
        worst_pred, worst_noise = max(worst_pred, worst), max(worst_noise, noise_worst)
        summary.append(
            f"| {name} | {params / 1e6:.0f} M | {geo:.1%} | {worst:.1%} | {noise_geo:.1%} | "
            f"{noise_worst:.1%} | {fast_geo:.1%} / {fast_worst:.1%} | "
            f"{fast_noise_geo:.1%} / {fast_noise_worst:.1%} | {wall:.0f} s |"
        )
        rows = [
            "| context | batch | real (before) | real (after) | retakes | predicted | error "
            "| run 3 (noise) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in CONTEXTS:
            for b in BATCHES:
                k = (b, c)
                rows.append(
                    f"| {c} | {b} | {first[k] * 1e3:.1f} ms | {second[k] * 1e3:.1f} ms | "
                    f"{', '.join(f'{r * 1e3:.1f} ms' for r in retakes.get(k, ())) or '-'} | "
                    f"{predicted[k] * 1e3:.1f} ms | {predicted[k] / reference[k] - 1:+.1%} | "
                    f"{third[k] / reference[k] - 1:+.1%} |"
                )
        sections += [
            f"### {name}",
            "",
            "```json",
            json.dumps(config, indent=2),
            "```",
            "",
            *rows,
            "",
        ]
        print("\n".join(rows), flush=True)
        print(
            f"{name}: geometric-mean error {geo:.1%}, worst {worst:.1%}; noise floor "
            f"{noise_geo:.1%} / {noise_worst:.1%}",
            flush=True,
        )
    load_after = os.getloadavg()
    overall = math.exp(statistics.fmean(all_pred)) - 1
    overall_noise = math.exp(statistics.fmean(all_noise)) - 1
    header = [
        f"# Predicted decode step vs transformers ({args.device}, {args.dtype})",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} on "
        f"{device_name(args.device)} ({os.cpu_count()} logical CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, transformers {transformers.__version__}); load "
        f"average {load_before[0]:.1f} before, {load_after[0]:.1f} after.",
        "",
        f"Command: `{' '.join(['python bench/model_vs_transformers.py', *shown_arguments()])}`; "
        f"the prediction per "
        f"architecture: `{summary and command}`.",
        "",
        *(
            [
                "On the GPU the real step is replayed as a CUDA graph, as the engines run it"
                + (
                    f"; {len(EAGER_REASONS)} point runs could not be captured and ran eagerly "
                    f"({EAGER_REASONS[0]})."
                    if EAGER_REASONS
                    else "."
                ),
                "",
            ]
            if args.device.startswith("cuda")
            else []
        ),
        "Reference: the real `transformers` decode step (static KV cache at the context), the "
        "geometric mean of one run just before and one just after the profiler; where those two "
        f"differ by more than {RETAKE_RATIO - 1:.0%} the point is timed again (at most "
        f"{RETAKES} times, until two runs agree) and the two runs that agree best form the "
        f"reference ({retaken} of {len(names) * len(BATCHES) * len(CONTEXTS)} points retaken). "
        "Noise floor: a third reference run, taken after any retakes, scored the same way. The "
        "'vs faster run' columns score against the faster of the two first reference runs at "
        "each point instead (interference only slows a run). Errors: geometric mean of "
        "|ln(pred/real)|, "
        "as a percentage, and the worst |pred/real − 1| over batches "
        f"{', '.join(str(b) for b in BATCHES)} and contexts {', '.join(str(c) for c in CONTEXTS)}.",
        "",
        "| architecture | parameters | geo-mean error | worst point | noise geo-mean | noise worst "
        "| vs faster run: error (geo / worst) | vs faster run: noise | profiler wall time |",
        "|---|---|---|---|---|---|---|---|---|",
        *summary,
        f"| **all** | | **{overall:.1%}** | **{worst_pred:.1%}** | {overall_noise:.1%} | "
        f"{worst_noise:.1%} | {math.exp(statistics.fmean(all_fast)) - 1:.1%} / "
        f"{worst_fast:.1%} | | |",
        "",
    ]
    text = "\n".join(header + sections)
    Path(args.out).write_text(text)
    print(
        f"all: geometric-mean error {overall:.1%}, worst {worst_pred:.1%}; noise floor "
        f"{overall_noise:.1%} / {worst_noise:.1%}; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
