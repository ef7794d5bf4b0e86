"""The workloads of a profile: bandwidth kernels, peak matmuls and the decode-GEMM sweep.

Ceilings are empirical maxima over a family of kernels, as the Empirical Roofline Toolkit
(Y. J. Lo et al., *Roofline Model Toolkit*, PMBS 2014) defines them: several read kernels (a
max-reduction, a matrix-vector product over the same buffer, and the sweep's own decode GEMM at its
smallest batch) compete for the bandwidth slope, and the peak is the best matmul an adaptive
search over shapes finds (see :func:`search_peak_shapes`). Every workload is then timed in the same
interleaved rounds (``timing.measure_rounds``).

Caches must not inflate any number:

* bandwidth buffers are several times the last-level cache (L2 on GPUs), allocated and filled
  before timing so every page is faulted in;
* the sweep rotates through enough copies of the weight that the bytes touched between two uses of
  one copy exceed the cache several times over (one copy suffices for the default 4096×14336 on a
  GPU). The batches share one rotation: a round times them one after another, and a batch that
  rotated on its own would read the copy the batch before it had just read, still in the cache
  (on a CPU with a 480 MiB L3, a run 13% shorter than after another copy);
* matmul inputs are random normal data (zeros let some hardware skip work and draw less power).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import torch

from roofline_profiler.core import roofline
from roofline_profiler.core.ceilings import sweep_kernel
from roofline_profiler.measure.devices import DTYPES, DeviceInfo
from roofline_profiler.measure.timing import TimingPolicy, Workload, measure

#: Bandwidth buffers span at least this many times the device's cache (``--quick``: the smaller).
CACHE_MULTIPLE = 8
QUICK_CACHE_MULTIPLE = 2
#: Between two uses of one weight copy the sweep touches at least this many caches' worth, so
#: even a cache that kept half of what streams through it would miss.
WEIGHT_CACHE_MULTIPLE = 2
MIN_BANDWIDTH_BUFFER_BYTES = 256 << 20
#: GPUs get larger buffers so launch overhead is negligible against the transfer.
GPU_BANDWIDTH_BUFFER_BYTES = 2 << 30
#: Never take more than this share of the device's memory for one buffer.
MAX_MEMORY_FRACTION = 0.10

#: The peak's three operands may take at most this share of the device's memory.
PEAK_MEMORY_FRACTION = 0.4

#: Where the peak search starts: a square matmul that keeps every device of the family busy.
PEAK_START = {"cpu": 1024, "gpu": 4096}
#: The search grows the shape while a step gains at least this much.
PEAK_MIN_GAIN = 0.02
#: Shapes carried from the search into the timed rounds: the best and its runner-up, so a search
#: step that interference slowed cannot decide alone.
PEAK_FINALISTS = 2

Progress = Callable[[str], None]


def _random(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # Unit-variance data scaled down so long fp16 reductions stay finite.
    return torch.randn(*shape, device=device, dtype=torch.float32).mul_(0.05).to(dtype)


def bandwidth_buffer_bytes(info: DeviceInfo, quick: bool = False) -> int:
    """Size of each bandwidth buffer: many times the cache, bounded by the device's memory."""
    multiple = QUICK_CACHE_MULTIPLE if quick else CACHE_MULTIPLE
    wanted = max(MIN_BANDWIDTH_BUFFER_BYTES, multiple * info.cache_bytes)
    if info.backend in ("cuda", "rocm"):
        wanted = max(wanted, GPU_BANDWIDTH_BUFFER_BYTES)
    if info.memory_bytes:
        wanted = min(wanted, int(info.memory_bytes * MAX_MEMORY_FRACTION))
    return max(1 << 20, wanted // 4096 * 4096)


def bandwidth_workloads(info: DeviceInfo, quick: bool = False) -> list[Workload]:
    """The read kernels and the copy over buffers many times the cache.

    ``read`` is a max-reduction: it loads every element and, unlike a floating-point sum (pairwise,
    to bound rounding error), its arithmetic is too cheap to limit it. ``readMatvec`` reads the same
    buffer as a matrix times a vector, the BLAS path a decode step at batch 1 takes; on some CPUs it
    streams faster than any reduction. Copy counts bytes read plus bytes written, as nvbandwidth
    and STREAM do.
    """
    device = info.device
    size = bandwidth_buffer_bytes(info, quick)
    elements = size // 4
    # Filled (every page faulted in) at memset speed; a max or a dot product cannot shortcut a
    # constant the way a zero-skipping multiplier could.
    src = torch.empty(elements, dtype=torch.float32, device=device).fill_(0.5)
    dst = torch.empty_like(src).fill_(0.0)
    # Rows as long as the default decode weight's (K = 4096), the shape BLAS streams best.
    columns = 4096
    matrix = src[: elements // columns * columns].view(-1, columns)
    vector = torch.full((columns,), 1.0 / columns, dtype=torch.float32, device=device)
    rows_out = torch.empty(matrix.shape[0], dtype=torch.float32, device=device)

    def read(_: int) -> object:
        return src.amax()

    def read_matvec(_: int) -> object:
        return torch.mv(matrix, vector, out=rows_out)

    def copy(_: int) -> object:
        return dst.copy_(src)

    return [
        Workload("read", float(size), read),
        Workload("readMatvec", float(matrix.numel() * 4), read_matvec),
        Workload("copy", 2.0 * size, copy),
    ]


Shape = tuple[int, int, int]


def peak_label(shape: Shape) -> str:
    m, n, k = shape
    return f"mm {m}x{n}x{k}"


def _matmul_workload(shape: Shape, dtype: str, device: torch.device) -> Workload:
    m, n, k = shape
    torch_dtype = DTYPES[dtype]
    a = _random((m, k), torch_dtype, device)
    b = _random((k, n), torch_dtype, device)
    out = torch.empty((m, n), dtype=torch_dtype, device=device)

    def matmul(_: int) -> object:
        return torch.mm(a, b, out=out)

    return Workload(peak_label(shape), roofline.decode_gemm_flops(m, k, n), matmul, rewarm=True)


def _square_ladder(start: int) -> Iterator[int]:
    """1024, 1536, 2048, 3072, 4096, ...: steps of 3/2 and 4/3, so every other size doubles."""
    size = start
    while True:
        yield size
        size = size * 3 // 2 if (size & (size - 1)) == 0 else size * 4 // 3


def _fits(shape: Shape, dtype: str, info: DeviceInfo) -> bool:
    m, n, k = shape
    operands = (m * k + k * n + m * n) * roofline.dtype_bytes(dtype)
    return not info.memory_bytes or operands <= PEAK_MEMORY_FRACTION * info.memory_bytes


def search_peak_shapes(
    info: DeviceInfo, dtype: str, policy: TimingPolicy, progress: Progress
) -> list[Shape]:
    """Adaptive search for the matmul shape that reaches the highest FLOP/s.

    Square sizes grow along :func:`_square_ladder` from :data:`PEAK_START` while a step gains at
    least :data:`PEAK_MIN_GAIN`; then the best square is varied (the reduction dimension doubled,
    the rows doubled) and the variants compete with the squares. Growth stops early when the
    operands would take more than :data:`PEAK_MEMORY_FRACTION` of the device's memory or one run
    would exceed the policy's ``max_run_seconds`` (predicted from the last run by FLOP count); the
    smallest size is always measured. Returns the best shapes, best first, for the timed rounds.
    """
    family = "cpu" if info.backend == "cpu" else "gpu"
    rates: dict[Shape, float] = {}
    seconds: dict[Shape, float] = {}

    def try_shape(shape: Shape) -> float | None:
        if rates and not _fits(shape, dtype, info):
            return None
        if seconds:
            last = max(seconds, key=lambda s: s[0] * s[1] * s[2])
            predicted = (
                seconds[last] * (shape[0] * shape[1] * shape[2]) / (last[0] * last[1] * last[2])
            )
            if predicted > policy.max_run_seconds:
                return None
        progress(f"peak search {peak_label(shape)}")
        w = _matmul_workload(shape, dtype, info.device)
        m = measure(
            w.fn, label=w.label, work=w.work, device=info.device, seconds=policy.search_seconds
        )
        rates[shape] = m.best_rate
        seconds[shape] = m.minimum
        return m.best_rate

    best_rate = 0.0
    best: Shape | None = None
    for size in _square_ladder(PEAK_START[family]):
        rate = try_shape((size, size, size))
        if rate is None:
            break
        gained = best is None or rate >= best_rate * (1 + PEAK_MIN_GAIN)
        if rate > best_rate:
            best_rate, best = rate, (size, size, size)
        if not gained:
            break
    assert best is not None
    s = best[0]
    for variant in ((s, s, 2 * s), (2 * s, s, s)):
        try_shape(variant)
    ranked = sorted(rates, key=lambda shape: rates[shape], reverse=True)
    return ranked[:PEAK_FINALISTS]


def peak_workloads(shapes: Sequence[Shape], dtype: str, info: DeviceInfo) -> list[Workload]:
    """Matmuls on random normal data (zeros let some hardware skip work and draw less power)."""
    return [_matmul_workload(shape, dtype, info.device) for shape in shapes]


def weight_copies(info: DeviceInfo, weight_bytes: int) -> int:
    """How many weight copies to rotate so no copy is still cached when it is used again."""
    return max(1, math.ceil(WEIGHT_CACHE_MULTIPLE * info.cache_bytes / weight_bytes))


def sweep_workloads(
    info: DeviceInfo, dtype: str, k: int, n: int, batches: Sequence[int]
) -> list[Workload]:
    """``x(B×K) · Wᵀ`` for each batch, W stored N×K as ``nn.Linear`` keeps it.

    Every run, of whichever batch, takes the next weight copy of one shared rotation (the run
    index a workload is given is its own, so it cannot keep the batches apart)."""
    torch_dtype = DTYPES[dtype]
    element_bytes = roofline.dtype_bytes(dtype)
    copies = weight_copies(info, k * n * element_bytes)
    first = _random((n, k), torch_dtype, info.device)
    # Copies of one random weight: caches key on addresses, not contents, and a copy is much
    # cheaper to make than fresh random numbers.
    weights = [first] + [first.clone() for _ in range(copies - 1)]
    turn = itertools.count()
    workloads = []
    for batch in batches:
        inputs = [_random((batch, k), torch_dtype, info.device) for _ in range(copies)]
        out = torch.empty((batch, n), dtype=torch_dtype, device=info.device)

        def step(_: int, inputs: list[torch.Tensor] = inputs, out: torch.Tensor = out) -> object:
            j = next(turn) % copies
            return torch.matmul(inputs[j], weights[j].t(), out=out)

        workloads.append(
            Workload(sweep_kernel(batch), roofline.decode_gemm_flops(batch, k, n), step)
        )
    return workloads
