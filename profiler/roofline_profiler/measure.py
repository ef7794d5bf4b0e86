"""The three measurements: memory bandwidth, peak matrix FLOP/s, and the decode-GEMM sweep.

Caches must not inflate any number:

* bandwidth buffers are several times the last-level cache (L2 on GPUs), allocated and filled
  before timing so every page is faulted in;
* the sweep rotates through enough copies of the weight that the bytes touched between two uses of
  one copy exceed the cache several times over (one copy suffices for the default 4096×14336);
* matmul inputs are random normal data (zeros let some hardware skip work and draw less power).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from roofline_profiler import roofline
from roofline_profiler.devices import DTYPES, DeviceInfo
from roofline_profiler.result import PeakCandidate
from roofline_profiler.stats import Measurement
from roofline_profiler.timing import TimingPolicy, measure

#: Bandwidth buffers span at least this many times the device's cache.
CACHE_MULTIPLE = 8
#: Between two uses of one weight copy the sweep touches at least this many caches' worth.
WEIGHT_CACHE_MULTIPLE = 4
MIN_BANDWIDTH_BUFFER_BYTES = 256 << 20
#: GPUs get larger buffers so launch overhead is negligible against the transfer.
GPU_BANDWIDTH_BUFFER_BYTES = 2 << 30
#: Never take more than this share of the device's memory for one buffer.
MAX_MEMORY_FRACTION = 0.10

#: The peak's three operands may take at most this share of the device's memory.
PEAK_MEMORY_FRACTION = 0.4

#: Square matmul sizes tried for the peak, per backend; the best median wins.
PEAK_SIZES = {
    "gpu": (4096, 8192, 16384),
    "gpu-quick": (4096, 8192),
    "cpu": (1024, 1536, 2048),
    "cpu-quick": (1024, 1536),
}

Progress = Callable[[str], None]


def _random(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # Unit-variance data scaled down so long fp16 reductions stay finite.
    return torch.randn(*shape, device=device, dtype=torch.float32).mul_(0.05).to(dtype)


def bandwidth_buffer_bytes(info: DeviceInfo) -> int:
    """Size of each bandwidth buffer: many times the cache, bounded by the device's memory."""
    wanted = max(MIN_BANDWIDTH_BUFFER_BYTES, CACHE_MULTIPLE * info.cache_bytes)
    if info.backend in ("cuda", "rocm"):
        wanted = max(wanted, GPU_BANDWIDTH_BUFFER_BYTES)
    if info.memory_bytes:
        wanted = min(wanted, int(info.memory_bytes * MAX_MEMORY_FRACTION))
    return max(1 << 20, wanted // 4096 * 4096)


def measure_bandwidth(info: DeviceInfo, policy: TimingPolicy) -> dict[str, Measurement]:
    """Read bandwidth (a full-buffer reduction: what decode does to weights) and copy bandwidth.

    The read kernel is a max-reduction: it must load every element, and unlike a floating-point
    sum (pairwise, to bound rounding error) its arithmetic is too cheap to limit it, so it runs at
    memory speed on CPUs too. Copy counts bytes read plus bytes written, as nvbandwidth and STREAM
    do.
    """
    device = info.device
    size = bandwidth_buffer_bytes(info)
    elements = size // 4
    src = torch.empty(elements, dtype=torch.float32, device=device).uniform_(-1.0, 1.0)
    dst = torch.empty_like(src).fill_(0.0)

    def read(_: int) -> object:
        return src.amax()

    def copy(_: int) -> object:
        return dst.copy_(src)

    results = {
        "read": measure(read, label="read", work=float(size), device=device, policy=policy),
        "copy": measure(copy, label="copy", work=2.0 * size, device=device, policy=policy),
    }
    return results


def measure_peak(
    info: DeviceInfo, dtype: str, policy: TimingPolicy, quick: bool
) -> tuple[PeakCandidate, ...]:
    """Best of a few large square matmuls on random data; every candidate is kept."""
    family = "cpu" if info.backend == "cpu" else "gpu"
    sizes = PEAK_SIZES[f"{family}-quick" if quick else family]
    torch_dtype = DTYPES[dtype]
    candidates: list[PeakCandidate] = []
    for size in sizes:
        operands = 3 * size * size * roofline.dtype_bytes(dtype)
        if candidates and info.memory_bytes and operands > PEAK_MEMORY_FRACTION * info.memory_bytes:
            continue  # a device too small for the largest size still gets the smaller ones
        a = _random((size, size), torch_dtype, info.device)
        b = _random((size, size), torch_dtype, info.device)
        out = torch.empty((size, size), dtype=torch_dtype, device=info.device)

        def matmul(
            _: int, a: torch.Tensor = a, b: torch.Tensor = b, out: torch.Tensor = out
        ) -> object:
            return torch.mm(a, b, out=out)

        m = measure(
            matmul,
            label=f"mm {size}x{size}x{size}",
            work=roofline.decode_gemm_flops(size, size, size),
            device=info.device,
            policy=policy,
        )
        candidates.append(PeakCandidate(m=size, n=size, k=size, measurement=m))
    return tuple(candidates)


def weight_copies(info: DeviceInfo, weight_bytes: int) -> int:
    """How many weight copies to rotate so no copy is still cached when it is used again."""
    return max(1, math.ceil(WEIGHT_CACHE_MULTIPLE * info.cache_bytes / weight_bytes))


def measure_sweep(
    info: DeviceInfo,
    dtype: str,
    k: int,
    n: int,
    batches: Sequence[int],
    policy: TimingPolicy,
    progress: Progress,
) -> list[tuple[int, Measurement]]:
    """Step time of ``x(B×K) · Wᵀ`` for each batch, W stored N×K as ``nn.Linear`` keeps it."""
    torch_dtype = DTYPES[dtype]
    element_bytes = roofline.dtype_bytes(dtype)
    copies = weight_copies(info, k * n * element_bytes)
    weights = [_random((n, k), torch_dtype, info.device) for _ in range(copies)]
    results = []
    for position, batch in enumerate(batches, start=1):
        progress(f"decode sweep B={batch} ({position}/{len(batches)})")
        inputs = [_random((batch, k), torch_dtype, info.device) for _ in range(copies)]
        out = torch.empty((batch, n), dtype=torch_dtype, device=info.device)

        def step(i: int, inputs: list[torch.Tensor] = inputs, out: torch.Tensor = out) -> object:
            j = i % copies
            return torch.matmul(inputs[j], weights[j].t(), out=out)

        m = measure(
            step,
            label=f"decode B={batch}",
            work=roofline.decode_gemm_flops(batch, k, n),
            device=info.device,
            policy=policy,
        )
        results.append((batch, m))
    return results
