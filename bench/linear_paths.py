"""One decode GEMM two ways on a CPU: eager ``F.linear`` on a plain weight, and torch's oneDNN
linear on a weight packed once (the path the profiler times, as vLLM's CPU build runs its GEMMs);
run from vLLM's CPU environment, a third way: vLLM's own GEMM (``dispatch_cpu_unquantized_gemm``).

An eager ``transformers`` step calls ``F.linear`` on plain row-major weights; a serving engine
packs each weight once for oneDNN (vLLM's ``dispatch_cpu_unquantized_gemm`` does for every dtype).
The model plan predicts the engine's path, so where the two paths differ the plan and an eager
``transformers`` step differ too (``model_vs_transformers.py``). This script times both paths side
by side, interleaved in rounds, at each batch (the GEMM's M) and dtype, on enough copies of the
weight that every call streams it from memory, and prints each path's median over rounds with
the weight bytes per second and the ratio.

    python bench/linear_paths.py [--in-features 1536] [--out-features 8192] [--rounds 7]
        [--dtype bfloat16]

Needs the ``profiler`` extra (torch).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from flag_types import positive_int
from profiler_vs_references import cpu_model
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.measure.engine_linear import VLLM_LINEAR, EngineLinear, vllm_linear_kernel

BATCHES = (1, 2, 4, 8, 16, 32, 64)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: Bytes of weight copies the calls rotate through: several times any CPU's last-level cache.
STREAM_BYTES = 512 << 20
CALLS_PER_ROUND = 16


def time_calls(call: Callable[[int], object], copies: int) -> float:
    """Seconds per call over :data:`CALLS_PER_ROUND` calls rotating through the copies."""
    start = time.perf_counter()
    for i in range(CALLS_PER_ROUND):
        call(i % copies)
    return (time.perf_counter() - start) / CALLS_PER_ROUND


def measure(k: int, n: int, name: str, rounds: int) -> list[tuple[int, dict[str, float]]]:
    """Per batch: the median seconds of a plain, a packed and (where vLLM can be imported) vLLM's
    call in dtype ``name``."""
    dtype = DTYPES[name]
    weight_bytes = k * n * dtype_bytes(name)
    copies = max(2, STREAM_BYTES // weight_bytes)
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(n, k, generator=generator).to(dtype) for _ in range(copies)]
    paths = {
        "plain": [EngineLinear(w, packed=False) for w in weights],
        "packed": [EngineLinear.prepare(w) for w in weights],
    }
    if vllm_linear_kernel() is not None:
        paths["vllm"] = [EngineLinear.prepare(w, VLLM_LINEAR) for w in weights]
    if not all(linear.packed for linear in paths["packed"]):
        raise SystemExit(f"this torch cannot run a packed oneDNN linear in {dtype}")
    inputs = {b: torch.randn(b, k, generator=generator).to(dtype) for b in BATCHES}
    samples: dict[tuple[int, str], list[float]] = {}
    for repeat in range(rounds + 1):  # the first round is a warm-up: one rotation of each path
        for b in BATCHES:
            for path, linears in paths.items():
                seconds = time_calls(lambda i, x=inputs[b], ls=linears: ls[i](x), copies)
                if repeat:
                    samples.setdefault((b, path), []).append(seconds)
    return [(b, {path: statistics.median(samples[(b, path)]) for path in paths}) for b in BATCHES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-features", type=positive_int, default=1536)
    parser.add_argument("--out-features", type=positive_int, default=8192)
    parser.add_argument("--rounds", type=positive_int, default=7)
    parser.add_argument("--dtype", choices=sorted(DTYPES), action="append", dest="dtypes")
    args = parser.parse_args()
    if not torch.backends.mkldnn.is_available():
        raise SystemExit("this torch has no oneDNN: there is no packed path to compare")
    k, n = args.in_features, args.out_features
    print(
        f"{cpu_model()}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"weight [{n}, {k}], medians of {args.rounds} interleaved rounds of "
        f"{CALLS_PER_ROUND} calls"
    )
    vllm = vllm_linear_kernel()
    extra = f" | {vllm} |" if vllm else " |"
    print(f"| dtype | batch | F.linear (plain) | oneDNN packed | plain ÷ packed{extra}")
    print("|---|---:|---:|---:|---:|" + ("---:|" if vllm else ""))
    for name in args.dtypes or DTYPES:
        weight_bytes = k * n * dtype_bytes(name)
        for b, times in measure(k, n, name, args.rounds):
            cells = [
                f"{times[path] * 1e3:.2f} ms ({weight_bytes / times[path] / 1e9:.1f} GB/s)"
                for path in times
            ]
            cells.insert(2, f"{times['plain'] / times['packed']:.2f}")
            print(f"| {name} | {b} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
