"""Profile devices: search the peak shape, time every workload in interleaved rounds, derive the
roofline numbers once (``ceilings.py``) and attach warnings (``sanity.py``)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from roofline_profiler.core import ceilings, roofline
from roofline_profiler.core.decode_model import ModelMeasurements
from roofline_profiler.core.errors import first_line
from roofline_profiler.core.format_roofline import FormatRoofline
from roofline_profiler.core.load_plan import LoadPlan
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.core.stats import Measurement
from roofline_profiler.core.weight_formats import WeightFormat
from roofline_profiler.measure.devices import DeviceInfo, check_dtype_supported
from roofline_profiler.measure.format_workloads import FormatSweep, profile_format
from roofline_profiler.measure.metadata import environment, telemetry
from roofline_profiler.measure.model_runner import ModelRequest, plan_model_loads, profile_models
from roofline_profiler.measure.timing import DEFAULT, QUICK, measure_rounds
from roofline_profiler.measure.workloads import (
    Shape,
    bandwidth_workloads,
    peak_label,
    peak_workloads,
    search_peak_shapes,
    sweep_workloads,
)
from roofline_profiler.wire import fields, host_state, host_state_detection
from roofline_profiler.wire.measurement_records import PeakCandidate, SweepEntry
from roofline_profiler.wire.result import DeviceResult, ProfileResult, ResultWarning
from roofline_profiler.wire.sanity import host_state_warning, plausibility_warnings
from roofline_profiler.wire.warning_codes import FORMAT_FAILED, MODEL_FAILED


@dataclass(frozen=True)
class ProfileRequest:
    devices: tuple[DeviceInfo, ...]
    k: int
    n: int
    batches: tuple[int, ...]
    min_batch_efficiency_percent: int
    bandwidth_kind: str  # "read" or "copy"
    quick: bool
    #: The models to measure and plan: one request per tensor parallel degree and set of
    #: contexts (``--model`` gives one, ``--models-json`` one per degree and context).
    models: tuple[ModelRequest, ...] = ()
    #: The weight formats whose roofline to measure beside the dtype's (``--weight-format``
    #: and the formats of the quantized models), each once.
    weight_formats: tuple[WeightFormat, ...] = ()


class DeviceFailure(RuntimeError):
    """A device failed while being measured (out of memory, driver error)."""


def profile_device(
    info: DeviceInfo, dtype: str, request: ProfileRequest, progress: Callable[[str], None]
) -> DeviceResult:
    """Search the peak shape, time every workload in interleaved rounds, derive the numbers."""
    policy = QUICK if request.quick else DEFAULT
    started = time.perf_counter()  # the timing budget covers the search and allocation too
    check_dtype_supported(info, dtype)
    tag = f"[{info.device}]"

    def tagged(message: str) -> None:
        progress(f"{tag} {message}")

    shapes = search_peak_shapes(info, dtype, policy, tagged)
    tagged("allocating buffers")
    bandwidth_w = bandwidth_workloads(info, request.quick)
    peak_w = peak_workloads(shapes, dtype, info)
    sweep_w = sweep_workloads(info, dtype, request.k, request.n, request.batches)
    roles = host_roles(request, dtype, [w.label for w in bandwidth_w], [w.label for w in peak_w])
    measured = measure_rounds(
        [*bandwidth_w, *peak_w, *sweep_w], info.device, policy, tagged, started, roles
    )

    result = assemble_device_result(
        info_fields(info, dtype),
        request,
        {w.label: measured[w.label] for w in bandwidth_w},
        [(shape, measured[peak_label(shape)]) for shape in shapes],
        [(b, measured[ceilings.sweep_kernel(b)]) for b in request.batches],
        telemetry(info),
    )
    del bandwidth_w, peak_w, sweep_w, measured  # free the roofline's buffers for the models
    formats, format_failures = _profile_formats(info, dtype, request, tuple(shapes), tagged)
    plans: tuple[ModelPlan, ...] = ()
    model_measurements: tuple[ModelMeasurements, ...] = ()
    loads: tuple[LoadPlan, ...] = ()
    failed: list[ResultWarning] = []
    for model_request in request.models:
        if not model_request.models:
            continue
        more_plans, more_measurements, failures = profile_models(
            info,
            dtype,
            request.batches,
            model_request,
            request.quick,
            result.peak_flops_per_second,
            result.read_bandwidth_bytes_per_second,
            tagged,
            formats,
        )
        plans += more_plans
        model_measurements += more_measurements
        loads += plan_model_loads(more_measurements, model_request, info)
        failed += [ResultWarning(MODEL_FAILED, f"model {f.name}: {f.reason}") for f in failures]
    return replace(
        result,
        weight_formats=formats,
        models=plans,
        model_measurements=model_measurements,
        loads=loads,
        warnings=(*result.warnings, *format_failures, *failed),
    )


def _profile_formats(
    info: DeviceInfo,
    dtype: str,
    request: ProfileRequest,
    shapes: tuple[Shape, ...],
    progress: Callable[[str], None],
) -> tuple[tuple[FormatRoofline, ...], tuple[ResultWarning, ...]]:
    """Each requested weight format's roofline (``format_workloads.py``), after the dtype's and
    its buffers freed, one format's buffers at a time; a format that cannot be measured (out of
    memory, a kernel's error) fails alone, with a warning."""
    sweep_at = FormatSweep(
        shapes,
        request.k,
        request.n,
        request.batches,
        request.bandwidth_kind,
        request.min_batch_efficiency_percent / 100.0,
        request.quick,
    )
    formats, failed = [], []
    for fmt in request.weight_formats:
        try:
            formats.append(profile_format(fmt, info, dtype, sweep_at, progress))
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            why = first_line(exc, type(exc).__name__)
            failed.append(ResultWarning(FORMAT_FAILED, f"weight format {fmt.name}: {why}"))
        finally:
            _free(info)
    return tuple(formats), tuple(failed)


def host_roles(
    request: ProfileRequest, dtype: str, bandwidth: Sequence[str], peak: Sequence[str]
) -> host_state_detection.Roles:
    """Which workload measures what, for the detection of host states
    (``host_state_detection.py``)."""
    element_bytes = roofline.dtype_bytes(dtype)
    return host_state_detection.Roles(
        bandwidth=tuple(bandwidth),
        peak=tuple(peak),
        sweep={
            ceilings.sweep_kernel(b): roofline.arithmetic_intensity(
                b, request.k, request.n, element_bytes
            )
            for b in request.batches
        },
    )


def info_fields(info: DeviceInfo, dtype: str) -> dict[str, Any]:
    """The identity fields of a device's result."""
    return {
        "index": info.index,
        "name": info.name,
        "backend": info.backend,
        "device": str(info.device),
        "dtype": dtype,
        "memory_bytes": info.memory_bytes,
    }


def assemble_device_result(
    identity: dict[str, Any],
    request: ProfileRequest,
    bandwidth: dict[str, Measurement],
    peak: Sequence[tuple[Shape, Measurement]],
    sweep: Sequence[tuple[int, Measurement]],
    device_telemetry: dict[str, Any],
) -> DeviceResult:
    """A device's result from its measurements: every number derived once (``ceilings.py``),
    from the rounds of one state when the host changed state during the profile
    (``host_state_detection.py``), so ceilings, sweep and recommendation always come from the
    same rounds."""
    peak_by_label = {peak_label(shape): m for shape, m in peak}
    every = {**bandwidth, **peak_by_label, **{ceilings.sweep_kernel(b): m for b, m in sweep}}
    parts = _Parts(
        request,
        identity["dtype"],
        tuple(bandwidth),
        tuple(peak_by_label),
        tuple(b for b, _ in sweep),
    )
    states = host_state_detection.detect(
        every, host_roles(request, identity["dtype"], tuple(bandwidth), tuple(peak_by_label))
    )
    report: host_state.HostStateReport | None = None
    used = every
    if states is not None:
        used, report = _in_one_state(every, states, parts)
    derived = parts.derive(used)
    by_batch = dict(sweep)
    return DeviceResult(
        **identity,
        bandwidth_kind=request.bandwidth_kind,
        bandwidth=bandwidth,
        peak_candidates=tuple(
            PeakCandidate(m=m, n=n, k=k, measurement=measurement) for (m, n, k), measurement in peak
        ),
        numbers=fields.measured_numbers(derived),
        read_bandwidth_bytes_per_second=derived.read.value,
        read_bandwidth_interval=derived.read.interval,
        read_bandwidth_kernel=derived.read.kernel,
        copy_bandwidth_bytes_per_second=derived.copy.value,
        copy_bandwidth_interval=derived.copy.interval,
        knee_batch=derived.knee_batch,
        min_batch_crossing=derived.recommendation.crossing,
        min_batch_crossing_interval=derived.crossing_interval,
        rounds=derived.rounds,
        sweep=tuple(SweepEntry(point=p, measurement=by_batch[p.batch]) for p in derived.points),
        warnings=parts.warnings(used, derived, report),
        telemetry=device_telemetry,
        host_states=report,
    )


def _in_one_state(
    every: dict[str, Measurement], states: host_state_detection.HostStates, parts: _Parts
) -> tuple[dict[str, Measurement], host_state.HostStateReport]:
    """The measurements restricted to the rounds of the state the profile keeps, and the report of
    both states, with the headline numbers the other state's rounds give."""
    choice = host_state_detection.choose(states, every)
    other = parts.derive(host_state_detection.in_state(every, states, choice.other))
    report = host_state.HostStateReport(
        state=choice.state,
        fast_rounds=states.rounds(host_state.FAST),
        slow_rounds=states.rounds(host_state.SLOW),
        levels=states.levels,
        missing=choice.missing,
        other=host_state.Headline(fields.without_intervals(fields.measured_numbers(other))),
    )
    return host_state_detection.in_state(every, states, choice.state), report


@dataclass(frozen=True)
class _Parts:
    """Which measurement is which, to derive a roofline from any selection of rounds."""

    request: ProfileRequest
    dtype: str
    bandwidth: tuple[str, ...]
    peak: tuple[str, ...]
    batches: tuple[int, ...]

    def split(
        self, every: dict[str, Measurement]
    ) -> tuple[dict[str, Measurement], dict[str, Measurement], list[tuple[int, Measurement]]]:
        return (
            {label: every[label] for label in self.bandwidth},
            {label: every[label] for label in self.peak},
            [(b, every[ceilings.sweep_kernel(b)]) for b in self.batches],
        )

    def derive(self, every: dict[str, Measurement]) -> ceilings.DeviceRoofline:
        bandwidth, peak, sweep = self.split(every)
        return ceilings.derive(
            bandwidth,
            peak,
            sweep,
            self.request.k,
            self.request.n,
            roofline.dtype_bytes(self.dtype),
            self.request.bandwidth_kind,
            self.request.min_batch_efficiency_percent / 100.0,
        )

    def warnings(
        self,
        every: dict[str, Measurement],
        derived: ceilings.DeviceRoofline,
        report: host_state.HostStateReport | None,
    ) -> tuple[ResultWarning, ...]:
        """The device's warnings on the rounds ``derived`` came from: a change of host state
        first, then the plausibility checks (``sanity.py``)."""
        bandwidth, peak, sweep = self.split(every)
        warnings = plausibility_warnings(
            derived, bandwidth, peak, sweep, self.request.bandwidth_kind
        )
        if report is None:
            return warnings
        return (host_state_warning(report, derived, frozenset(self.bandwidth)), *warnings)


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
