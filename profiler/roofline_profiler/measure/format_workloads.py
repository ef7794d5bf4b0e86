"""A weight format's roofline measured: its GEMM at the device's peak shapes and its decode GEMM
at the profile's ``K×N`` and batches, timed in interleaved rounds with the device's read kernels,
and derived as the device's own numbers are (``core/format_roofline.py``).

The GEMMs are what a decoder layer of a model in the format holds
(``quantized_linear.engine_linear``): the engine's kernel where it runs, else a 16-bit GEMM over the
format's bytes, whose compute ceiling is then the dtype's matmul (timed in the same rounds). The
decode GEMM rotates through weight copies as the device's sweep does, so no copy is still cached
when it is used again; the bandwidth kernels are the device's own, so the format's slope and its
ridge point come from the same rounds as its peak.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from roofline_profiler.core import ceilings, roofline
from roofline_profiler.core.format_roofline import FormatRoofline, format_roofline
from roofline_profiler.core.weight_formats import WeightFormat
from roofline_profiler.measure.devices import DTYPES, DeviceInfo
from roofline_profiler.measure.engine_linear import EngineLinear
from roofline_profiler.measure.quantized_linear import FORMAT_BYTES, engine_linear
from roofline_profiler.measure.timing import DEFAULT, QUICK, Workload, measure_rounds
from roofline_profiler.measure.workloads import (
    Shape,
    bandwidth_workloads,
    peak_label,
    peak_workloads,
    weight_copies,
)


def _input(rows: int, columns: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    generator = torch.Generator().manual_seed(rows * 7919 + columns)
    return (torch.randn((rows, columns), generator=generator) * 0.05).to(dtype).to(device)


def format_label(fmt: WeightFormat, label: str) -> str:
    """A workload of the format's rounds: its name before the device workload's label."""
    return f"{fmt.name} {label}"


def _peak(
    fmt: WeightFormat, shapes: Sequence[Shape], dtype: str, info: DeviceInfo
) -> tuple[list[Workload], str]:
    """The format's GEMM at each of the device's peak shapes, and the kernel that runs it; where
    none does, the dtype's matmuls (the stand-in's compute is the dtype's)."""
    workloads, kernel = [], FORMAT_BYTES
    for m, n, k in shapes:
        linear, kernel = engine_linear(fmt, (n, k), DTYPES[dtype], info.device)
        if kernel == FORMAT_BYTES:
            return peak_workloads(shapes, dtype, info), kernel
        x = _input(m, k, DTYPES[dtype], info.device)

        def run(_: int, linear: EngineLinear = linear, x: torch.Tensor = x) -> object:
            return linear(x)

        workloads.append(
            Workload(
                format_label(fmt, peak_label((m, n, k))),
                roofline.decode_gemm_flops(m, k, n),
                run,
                rewarm=True,
            )
        )
    return workloads, kernel


def _sweep(
    fmt: WeightFormat, dtype: str, info: DeviceInfo, k: int, n: int, batches: Sequence[int]
) -> tuple[list[Workload], str, int]:
    """The format's decode GEMM ``x(B×K)·Wᵀ`` at each batch over one shared rotation of weight
    copies (``workloads.sweep_workloads``), the kernel that runs it and the bytes of one copy."""
    first, kernel = engine_linear(fmt, (n, k), DTYPES[dtype], info.device)
    copies = weight_copies(info, first.nbytes())
    weights = [first] + [
        engine_linear(fmt, (n, k), DTYPES[dtype], info.device)[0] for _ in range(copies - 1)
    ]
    turn = itertools.count()
    workloads = []
    for batch in batches:
        inputs = [_input(batch, k, DTYPES[dtype], info.device) for _ in range(copies)]

        def step(_: int, inputs: list[torch.Tensor] = inputs) -> object:
            j = next(turn) % copies
            return weights[j](inputs[j])

        workloads.append(
            Workload(
                format_label(fmt, ceilings.sweep_kernel(batch)),
                roofline.decode_gemm_flops(batch, k, n),
                step,
            )
        )
    return workloads, kernel, first.nbytes()


@dataclass(frozen=True)
class FormatSweep:
    """What a format's roofline is measured at: the device's peak shapes, the sweep's weight
    ``K×N`` and batches, and the profile's bandwidth kind, minimum efficiency and ``--quick``."""

    shapes: tuple[Shape, ...]
    k: int
    n: int
    batches: tuple[int, ...]
    bandwidth_kind: str
    min_efficiency: float
    quick: bool


def profile_format(
    fmt: WeightFormat,
    info: DeviceInfo,
    dtype: str,
    sweep_at: FormatSweep,
    progress: Callable[[str], None],
) -> FormatRoofline:
    """Measure ``fmt``'s roofline on ``info`` (see the module docstring)."""
    shapes, k, n, batches = sweep_at.shapes, sweep_at.k, sweep_at.n, sweep_at.batches
    started = time.perf_counter()
    bandwidth = bandwidth_workloads(info, sweep_at.quick)
    peak, peak_kernel = _peak(fmt, shapes, dtype, info)
    sweep, kernel, nbytes = _sweep(fmt, dtype, info, k, n, batches)
    if peak_kernel != kernel:
        # A kernel that takes the sweep's shape but not a peak shape (or the reverse): the
        # format's ceiling is the dtype's matmul then, as for a format no kernel runs.
        peak = peak_workloads(shapes, dtype, info)
    measured = measure_rounds(
        [*bandwidth, *peak, *sweep],
        info.device,
        QUICK if sweep_at.quick else DEFAULT,
        lambda message: progress(f"{fmt.name}: {message}"),
        started,
    )
    activation_bytes = roofline.dtype_bytes(dtype)
    derived = ceilings.derive(
        {w.label: measured[w.label] for w in bandwidth},
        {w.label: measured[w.label] for w in peak},
        [(b, measured[w.label]) for b, w in zip(batches, sweep, strict=True)],
        k,
        n,
        nbytes / (k * n),
        sweep_at.bandwidth_kind,
        sweep_at.min_efficiency,
        activation_bytes=activation_bytes,
    )
    return format_roofline(fmt.name, kernel, nbytes / (k * n), activation_bytes, derived)
