"""The profiler's predicted decode step against the real decode step of ``transformers`` models.

For each architecture (dense GQA Llama, Qwen3 with tied embeddings and q/k norm, Mixtral MoE) a
model is built from its config with random weights in fp32 on the CPU and its real decode step is
timed at every batch and context (``transformers_reference``). The same config is saved as
``config.json`` and handed to ``roofline profile --model PATH`` (``profiler_prediction``), whose
predictions are compared with the real steps.

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
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from flag_types import positive_int
from profiler_prediction import predict
from roofline_profiler.core.model_config import PRESETS
from transformers_reference import (
    EAGER_REASONS,
    RETAKE_RATIO,
    RETAKES,
    build_model,
    errors,
    log_errors,
    reference_of,
    reference_run,
    retake_disagreeing,
)

BATCHES = (1, 2, 4, 8, 16, 32, 64)
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


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    parser.add_argument(
        "--threads", type=positive_int, help="torch threads (default: torch's choice)"
    )
    parser.add_argument("--only", choices=sorted(CONFIGS), action="append")
    parser.add_argument(
        "--preset",
        action="append",
        choices=sorted(PRESETS),
        help="also a full-size preset (e.g. llama-3.1-8b; GPUs)",
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda:N")
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "bfloat16"),
        help="float32 (default) or bfloat16",
    )
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "model_vs_transformers.md")
    )
    return parser.parse_args()


def chosen_configs(args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The configs by name and the names to measure, in order: ``--only``'s (default: all the
    small configs), or the ``--preset`` models followed by ``--only``'s."""
    configs = dict(CONFIGS)
    if args.preset:
        configs = {name: dict(PRESETS[name]) for name in args.preset}
        configs.update({name: CONFIGS[name] for name in args.only or ()})
    names = list(configs) if args.preset else args.only or list(CONFIGS)
    return configs, names


@dataclasses.dataclass(frozen=True)
class ArchitectureSteps:
    """One architecture's real steps around the profiler's prediction, and the prediction."""

    name: str
    config: dict[str, Any]
    parameters: int
    #: Reference runs 1 (before the profiler) and 2 (after it).
    first: dict[tuple[int, int], float]
    second: dict[tuple[int, int], float]
    #: The points whose runs 1 and 2 disagreed, timed again.
    retakes: dict[tuple[int, int], list[float]]
    #: Reference run 3, the noise floor.
    third: dict[tuple[int, int], float]
    predicted: dict[tuple[int, int], float]
    #: The profiler's wall time and its command as the record shows it.
    wall: float
    command: str

    @property
    def reference(self) -> dict[tuple[int, int], float]:
        return {
            k: reference_of([self.first[k], self.second[k], *self.retakes.get(k, ())])
            for k in self.first
        }

    @property
    def faster(self) -> dict[tuple[int, int], float]:
        """The less disturbed of the two reference runs at each point: interference from other
        processes only ever slows a run, so on a shared machine it is the closer to the truth."""
        return {k: min(self.first[k], self.second[k]) for k in self.first}


def measure_architecture(
    name: str, config: dict[str, Any], args: argparse.Namespace
) -> ArchitectureSteps:
    """Reference run 1, the profiler, reference run 2, retakes, reference run 3."""
    print(f"== {name}", flush=True)
    model = build_model(config, args.device, args.dtype)
    params = sum(p.numel() for p in model.parameters())
    first = reference_run(model, BATCHES, CONTEXTS, args.quick)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.json"
        path.write_text(json.dumps(config, indent=2))
        # The parts alone: no serving engine's own per-step work, which transformers does not do.
        predicted, wall, command = predict(
            path, BATCHES, CONTEXTS, args.quick, args.threads, args.device, args.dtype,
            ("--engine", "none"),
        )  # fmt: skip
    second = reference_run(model, BATCHES, CONTEXTS, args.quick)
    retakes = retake_disagreeing(model, first, second, args.quick)
    third = reference_run(model, BATCHES, CONTEXTS, args.quick)
    return ArchitectureSteps(
        name, config, params, first, second, retakes, third, predicted, wall, command
    )


def summary_row(steps: ArchitectureSteps) -> str:
    """The architecture's row of the record's summary: errors against the reference and against
    the faster run, the prediction's and the noise floor's."""
    reference, faster = steps.reference, steps.faster
    geo, worst = errors(steps.predicted, reference)
    noise_geo, noise_worst = errors(steps.third, reference)
    fast_geo, fast_worst = errors(steps.predicted, faster)
    fast_noise_geo, fast_noise_worst = errors(steps.third, faster)
    return (
        f"| {steps.name} | {steps.parameters / 1e6:.0f} M | {geo:.1%} | {worst:.1%} | "
        f"{noise_geo:.1%} | {noise_worst:.1%} | {fast_geo:.1%} / {fast_worst:.1%} | "
        f"{fast_noise_geo:.1%} / {fast_noise_worst:.1%} | {steps.wall:.0f} s |"
    )


def points_table(steps: ArchitectureSteps) -> list[str]:
    """Every point's real runs, retakes, prediction and errors."""
    reference = steps.reference
    rows = [
        "| context | batch | real (before) | real (after) | retakes | predicted | error "
        "| run 3 (noise) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in CONTEXTS:
        for b in BATCHES:
            k = (b, c)
            rows.append(
                f"| {c} | {b} | {steps.first[k] * 1e3:.1f} ms | {steps.second[k] * 1e3:.1f} ms | "
                f"{', '.join(f'{r * 1e3:.1f} ms' for r in steps.retakes.get(k, ())) or '-'} | "
                f"{steps.predicted[k] * 1e3:.1f} ms | "
                f"{steps.predicted[k] / reference[k] - 1:+.1%} | "
                f"{steps.third[k] / reference[k] - 1:+.1%} |"
            )
    return rows


def print_architecture(steps: ArchitectureSteps) -> None:
    """The points table and the architecture's errors, as soon as it is measured."""
    geo, worst = errors(steps.predicted, steps.reference)
    noise_geo, noise_worst = errors(steps.third, steps.reference)
    print("\n".join(points_table(steps)), flush=True)
    print(
        f"{steps.name}: geometric-mean error {geo:.1%}, worst {worst:.1%}; noise floor "
        f"{noise_geo:.1%} / {noise_worst:.1%}",
        flush=True,
    )


def architecture_section(steps: ArchitectureSteps) -> list[str]:
    """The record's section of one architecture: its config and its points."""
    return [
        f"### {steps.name}",
        "",
        "```json",
        json.dumps(steps.config, indent=2),
        "```",
        "",
        *points_table(steps),
        "",
    ]


@dataclasses.dataclass(frozen=True)
class Overall:
    """The errors over every point of every architecture."""

    error: float
    worst: float
    noise: float
    noise_worst: float
    #: Against the faster of the first two reference runs at each point.
    fast_error: float
    fast_worst: float


def overall_errors(measured: list[ArchitectureSteps]) -> Overall:
    def geometric_mean_error(logs: list[float]) -> float:
        return math.exp(statistics.fmean(logs)) - 1

    against = [(s.predicted, s.third, s.reference, s.faster) for s in measured]
    return Overall(
        geometric_mean_error([x for p, _, r, _ in against for x in log_errors(p, r)]),
        max([0.0, *(errors(p, r)[1] for p, _, r, _ in against)]),
        geometric_mean_error([x for _, t, r, _ in against for x in log_errors(t, r)]),
        max([0.0, *(errors(t, r)[1] for _, t, r, _ in against)]),
        geometric_mean_error([x for p, _, _, f in against for x in log_errors(p, f)]),
        max([0.0, *(errors(p, f)[1] for p, _, _, f in against)]),
    )


def method_lines(device: str, retaken: int, points: int) -> list[str]:
    """How the real step was run on a GPU, and what the reference and the errors are."""
    gpu = [
        "On the GPU the real step is replayed as a CUDA graph, as the engines run it"
        + (
            f"; {len(EAGER_REASONS)} point runs could not be captured and ran eagerly "
            f"({EAGER_REASONS[0]})."
            if EAGER_REASONS
            else "."
        ),
        "",
    ]
    return [
        *(gpu if device.startswith("cuda") else []),
        "Reference: the real `transformers` decode step (static KV cache at the context), the "
        "geometric mean of one run just before and one just after the profiler; where those two "
        f"differ by more than {RETAKE_RATIO - 1:.0%} the point is timed again (at most "
        f"{RETAKES} times, until two runs agree) and the two runs that agree best form the "
        f"reference ({retaken} of {points} points retaken). "
        "Noise floor: a third reference run, taken after any retakes, scored the same way. The "
        "'vs faster run' columns score against the faster of the two first reference runs at "
        "each point instead (interference only slows a run). Errors: geometric mean of "
        "|ln(pred/real)|, "
        "as a percentage, and the worst |pred/real − 1| over batches "
        f"{', '.join(str(b) for b in BATCHES)} and contexts {', '.join(str(c) for c in CONTEXTS)}.",
        "",
    ]


def record_header(
    args: argparse.Namespace,
    measured: list[ArchitectureSteps],
    loads: tuple[float, float],
    transformers_version: str,
) -> list[str]:
    """The record's title, machine, command, method and summary table."""
    overall = overall_errors(measured)
    retaken = sum(len(s.retakes) for s in measured)
    return [
        f"# Predicted decode step vs transformers ({args.device}, {args.dtype})",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} on "
        f"{device_name(args.device)} ({os.cpu_count()} logical CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, transformers {transformers_version}); load "
        f"average {loads[0]:.1f} before, {loads[1]:.1f} after.",
        "",
        f"Command: `{' '.join(['python bench/model_vs_transformers.py', *shown_arguments()])}`; "
        f"the prediction per "
        f"architecture: `{measured and measured[-1].command}`.",
        "",
        *method_lines(args.device, retaken, len(measured) * len(BATCHES) * len(CONTEXTS)),
        "| architecture | parameters | geo-mean error | worst point | noise geo-mean | noise worst "
        "| vs faster run: error (geo / worst) | vs faster run: noise | profiler wall time |",
        "|---|---|---|---|---|---|---|---|---|",
        *[summary_row(s) for s in measured],
        f"| **all** | | **{overall.error:.1%}** | **{overall.worst:.1%}** | {overall.noise:.1%} | "
        f"{overall.noise_worst:.1%} | {overall.fast_error:.1%} / {overall.fast_worst:.1%} | | |",
        "",
    ]


def main() -> int:
    args = parse_arguments()
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    configs, names = chosen_configs(args)
    load_before = os.getloadavg()
    measured = []
    for name in names:
        steps = measure_architecture(name, configs[name], args)
        print_architecture(steps)
        measured.append(steps)
    load_after = os.getloadavg()
    header = record_header(
        args, measured, (load_before[0], load_after[0]), transformers.__version__
    )
    text = "\n".join(header + [line for s in measured for line in architecture_section(s)])
    Path(args.out).write_text(text)
    overall = overall_errors(measured)
    print(
        f"all: geometric-mean error {overall.error:.1%}, worst {overall.worst:.1%}; noise floor "
        f"{overall.noise:.1%} / {overall.noise_worst:.1%}; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
