"""Profile devices: run the three measurements, derive the roofline numbers, attach warnings."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from roofline_profiler import recommend, roofline
from roofline_profiler.decode_model import ModelMeasurements
from roofline_profiler.devices import DeviceInfo, check_dtype_supported
from roofline_profiler.errors import first_line
from roofline_profiler.measure import measure_bandwidth, measure_peak, measure_sweep
from roofline_profiler.metadata import environment, telemetry
from roofline_profiler.model_runner import ModelRequest, profile_models
from roofline_profiler.planning import ModelPlan
from roofline_profiler.result import DeviceResult, ProfileResult, SweepEntry
from roofline_profiler.sanity import plausibility_warnings
from roofline_profiler.timing import DEFAULT, QUICK


@dataclass(frozen=True)
class ProfileRequest:
    devices: tuple[DeviceInfo, ...]
    k: int
    n: int
    batches: tuple[int, ...]
    min_batch_efficiency_percent: int
    bandwidth_kind: str  # "read" or "copy"
    quick: bool
    models: ModelRequest | None = None
    #: More model requests, one per context and tensor parallel degree (``--models-json``).
    model_groups: tuple[ModelRequest, ...] = ()


class DeviceFailure(RuntimeError):
    """A device failed while being measured (out of memory, driver error)."""


def profile_device(
    info: DeviceInfo, dtype: str, request: ProfileRequest, progress: Callable[[str], None]
) -> DeviceResult:
    policy = QUICK if request.quick else DEFAULT
    check_dtype_supported(info, dtype)
    tag = f"[{info.device}]"
    progress(f"{tag} memory bandwidth")
    bandwidth = measure_bandwidth(info, policy)
    progress(f"{tag} peak matrix FLOP/s ({dtype})")
    peak_candidates = measure_peak(info, dtype, policy, request.quick)
    sweep = measure_sweep(
        info,
        dtype,
        request.k,
        request.n,
        request.batches,
        policy,
        lambda message: progress(f"{tag} {message}"),
    )

    bandwidth_bps = bandwidth[request.bandwidth_kind].best_rate
    peak = max(c.flops_per_second for c in peak_candidates)
    ridge = roofline.ridge_point(peak, bandwidth_bps)
    element_bytes = roofline.dtype_bytes(dtype)
    points = recommend.analyse_sweep(
        [(batch, m.median) for batch, m in sweep],
        request.k,
        request.n,
        element_bytes,
        peak,
        bandwidth_bps,
    )
    recommendation = recommend.recommended_min_batch(
        points,
        request.k,
        request.n,
        element_bytes,
        ridge,
        request.min_batch_efficiency_percent / 100.0,
    )
    measurements = dict(sweep)
    entries = tuple(SweepEntry(point=p, measurement=measurements[p.batch]) for p in points)
    warnings = plausibility_warnings(
        bandwidth,
        peak_candidates,
        entries,
        ridge,
        recommendation,
        policy.precision_target,
        request.bandwidth_kind,
    )
    plans: tuple[ModelPlan, ...] = ()
    model_measurements: tuple[ModelMeasurements, ...] = ()
    model_requests = (
        (request.models, *request.model_groups) if request.models else request.model_groups
    )
    for model_request in model_requests:
        if not model_request.models:
            continue
        more_plans, more_measurements = profile_models(
            info,
            dtype,
            request.batches,
            model_request,
            request.quick,
            peak,
            bandwidth_bps,
            lambda message: progress(f"{tag} {message}"),
        )
        plans += more_plans
        model_measurements += more_measurements
    return DeviceResult(
        index=info.index,
        name=info.name,
        backend=info.backend,
        device=str(info.device),
        dtype=dtype,
        memory_bytes=info.memory_bytes,
        bandwidth_kind=request.bandwidth_kind,
        bandwidth=bandwidth,
        peak_candidates=peak_candidates,
        ridge_point=ridge,
        knee_batch=recommend.knee_batch(points),
        recommended_min_batch=recommendation.batch,
        recommended_min_batch_source=recommendation.source,
        sweep=entries,
        warnings=warnings,
        telemetry=telemetry(info),
        models=plans,
        model_measurements=model_measurements,
    )


def _free(info: DeviceInfo) -> None:
    if info.backend in ("cuda", "rocm"):
        torch.cuda.empty_cache()
    elif info.backend == "mps":
        torch.mps.empty_cache()


def run_profile(
    request: ProfileRequest,
    dtypes: Sequence[str],
    progress: Callable[[str], None],
) -> ProfileResult:
    """Profile every requested device in turn; ``dtypes[i]`` is the dtype of device ``i``."""
    started = time.time()
    results = []
    for info, dtype in zip(request.devices, dtypes, strict=True):
        try:
            results.append(profile_device(info, dtype, request, progress))
        except torch.OutOfMemoryError as exc:
            raise DeviceFailure(f"{info.device} ({info.name}) ran out of memory: {exc}") from exc
        except RuntimeError as exc:
            why = first_line(exc, type(exc).__name__)
            raise DeviceFailure(f"{info.device} ({info.name}) failed: {why}") from exc
        finally:
            _free(info)
    finished = time.time()
    # Homogeneous dtype is the common case; a mixed node reports the first and each device's own.
    return ProfileResult(
        created_at=dt.datetime.fromtimestamp(started, dt.timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z"),
        created_at_unix=started,
        duration_seconds=finished - started,
        mode="quick" if request.quick else "default",
        dtype=dtypes[0],
        shape_k=request.k,
        shape_n=request.n,
        batches=request.batches,
        min_batch_efficiency_percent=request.min_batch_efficiency_percent,
        environment=environment(),
        devices=tuple(results),
    )
