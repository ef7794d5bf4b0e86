"""Independent GPU references for ``bench/gpu_check.sh``, compared with a profiler result.

    python bench/gpu_reference.py RESULT.json

For each GPU in the result: a plain device-to-device ``copy_`` of 1 GiB (bytes read + written) and
an 8192³ matmul in the result's dtype on random data, each the best of 50 CUDA-event-timed runs;
prints the profiler's copy bandwidth and peak over these references.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def best_ms(fn, runs: int = 50) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return min(times)


def reference_copy() -> float:
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / (best_ms(lambda: dst.copy_(src)) / 1e3)


def reference_matmul(dtype: torch.dtype) -> float:
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    return 2 * 8192**3 / (best_ms(lambda: torch.mm(a, b)) / 1e3)


def main(path: str) -> int:
    result = json.loads(Path(path).read_text())
    for device in result["devices"]:
        index = device["index"]
        with torch.cuda.device(index):
            copy_bps = reference_copy()
            mm_flops = reference_matmul(DTYPES[device["dtype"]])
            torch.cuda.empty_cache()
        ours_copy = device["bandwidth"]["copy"]["bestRatePerSecond"]
        ours_read = device["bandwidth"]["read"]["bestRatePerSecond"]
        print(
            f"cuda:{index} {device['name']} {device['dtype']}: "
            f"reference copy {copy_bps / 1e12:.3f} TB/s, profiler copy {ours_copy / 1e12:.3f} TB/s "
            f"(ratio {ours_copy / copy_bps:.3f}), profiler read {ours_read / 1e12:.3f} TB/s; "
            f"reference mm 8192^3 {mm_flops / 1e12:.1f} TFLOP/s, profiler peak "
            f"{device['peakFlopsPerSecond'] / 1e12:.1f} TFLOP/s "
            f"(ratio {device['peakFlopsPerSecond'] / mm_flops:.3f}); "
            f"ridge {device['ridgePoint']:.1f}, "
            f"min batch {device['recommendedMinBatch']} ({device['recommendedMinBatchSource']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
