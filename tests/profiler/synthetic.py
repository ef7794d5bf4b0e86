"""Synthetic results built through the real analysis code from made-up timings (no torch)."""

from __future__ import annotations

from roofline_profiler import limits, recommend, roofline
from roofline_profiler.result import DeviceResult, PeakCandidate, ProfileResult, SweepEntry
from roofline_profiler.stats import Measurement

DEFAULT_BATCHES = limits.DEFAULT_BATCHES
H200_LIKE = {"bandwidth": 4.3e12, "peak": 7.9e14}


def roofline_step_seconds(
    batch: int, k: int, n: int, element_bytes: int, peak: float, bw: float
) -> float:
    """The step time an ideal device on the roofline would take."""
    flops = roofline.decode_gemm_flops(batch, k, n)
    traffic = roofline.decode_gemm_bytes(batch, k, n, element_bytes)
    return max(flops / peak, traffic / bw)


def synthetic_device(
    index: int = 0,
    *,
    name: str = "NVIDIA H200",
    bandwidth: float = H200_LIKE["bandwidth"],
    peak: float = H200_LIKE["peak"],
    k: int = 4096,
    n: int = 14336,
    dtype: str = "bfloat16",
    batches: tuple[int, ...] = DEFAULT_BATCHES,
    efficiency: float = 0.8,
) -> DeviceResult:
    """A device whose sweep runs at ``efficiency`` of its roofline at every batch."""
    element_bytes = roofline.dtype_bytes(dtype)
    size = 1 << 30
    bw_m = {
        "read": Measurement("read", (size / bandwidth,) * 3, work=size),
        "copy": Measurement("copy", (2 * size / (0.95 * bandwidth),) * 3, work=2 * size),
    }
    mm_flops = roofline.decode_gemm_flops(8192, 8192, 8192)
    peak_m = Measurement("mm 8192", (mm_flops / peak, mm_flops / peak * 1.01), work=mm_flops)
    steps = [
        (b, roofline_step_seconds(b, k, n, element_bytes, peak, bandwidth) / efficiency)
        for b in batches
    ]
    points = recommend.analyse_sweep(steps, k, n, element_bytes, peak, bandwidth)
    ridge = roofline.ridge_point(peak, bandwidth)
    rec = recommend.recommended_min_batch(points, k, n, element_bytes, ridge, 0.5)
    entries = tuple(
        SweepEntry(
            p,
            Measurement(
                f"decode B={p.batch}",
                (p.step_seconds,) * 3,
                work=roofline.decode_gemm_flops(p.batch, k, n),
            ),
        )
        for p in points
    )
    return DeviceResult(
        index=index,
        name=name,
        backend="cuda",
        device=f"cuda:{index}",
        dtype=dtype,
        memory_bytes=150_754_820_096,
        bandwidth_kind="read",
        bandwidth=bw_m,
        peak_candidates=(PeakCandidate(8192, 8192, 8192, peak_m),),
        ridge_point=ridge,
        knee_batch=recommend.knee_batch(points),
        recommended_min_batch=rec.batch,
        recommended_min_batch_source=rec.source,
        sweep=entries,
        telemetry={"smClockMHz": 1980, "powerWatts": 512.5},
    )


def synthetic_result(devices: int = 1, **kwargs: object) -> ProfileResult:
    devs = tuple(synthetic_device(i, **kwargs) for i in range(devices))  # type: ignore[arg-type]
    return ProfileResult(
        created_at="2026-12-03T04:30:00Z",
        created_at_unix=1796272200.0,
        duration_seconds=21.5,
        mode="default",
        dtype=devs[0].dtype,
        shape_k=4096,
        shape_n=14336,
        batches=tuple(e.point.batch for e in devs[0].sweep),
        min_batch_efficiency_percent=50,
        environment={
            "hostname": "gpu-node-17",
            "python": "3.11.7",
            "torch": "2.13.0",
            "driver": "580.65",
        },
        devices=devs,
    )
