"""Per-node behaviour of the fake kubelet and scheduler: real runs, synthetic results, faults.

Every failure the operator must survive is one mode here, set per node through the harness API,
so a test reads as "node gpu-2 gets OOM-killed" rather than as a patched subprocess. The synthetic
result is a real compact message (``encode_compact``) with plausible H200-like numbers, so the
operator's parser sees exactly what a profiler pod would hand back, without running torch.
"""

from __future__ import annotations

import enum
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.profiler.headline_builders import headline_numbers, with_number_intervals

from roofline_profiler.core.limits import DEFAULT_SHAPE
from roofline_profiler.wire.compact import (
    CompactDevice,
    CompactProfile,
    encode_compact,
)
from roofline_profiler.wire.compact_models import CompactModelPlan


class FaultMode(enum.Enum):
    RUN_COMMAND = "run-command"  # run the container's real command as a local process
    SUCCEED_INSTANTLY = "succeed-instantly"  # synthetic compact result, exit 0, no process
    SUCCEED_SLOWLY = "succeed-slowly"  # the same after ``FaultBook.slow_seconds`` of "measuring"
    EXIT_NONZERO = "exit-nonzero"  # exit 1 with a one-line device error as the message
    OOM_KILLED = "oom-killed"  # killed by the kernel: exit 137, reason OOMKilled, no message
    HANG = "hang"  # runs until deleted or past activeDeadlineSeconds
    TRUNCATED_MESSAGE = "truncated-message"  # a valid result cut in the middle
    GARBAGE_MESSAGE = "garbage-message"  # exit 0 but the message is not a result
    NEVER_SCHEDULE = "never-schedule"  # the node's GPUs are all held by someone else
    OVERFLOWING_RESULT = "overflowing-result"  # a result whose bandwidth is 1e300 GB/s
    DEEP_NESTING = "deep-nesting"  # 4096 bytes of "[", which exhaust a recursive JSON parser
    FORGED_RESULT = "forged-result"  # a sound-looking result claiming a ridge point of 1
    #: The real command with its device made ``cpu``: a profiler in a GPU pod that saw no GPU
    #: and measured the CPU instead (no runtime class, device plugin or driver), exit 0.
    CPU_FALLBACK = "cpu-fallback"
    #: A sound synthetic result of another measurement than the pod asked for: float32, a 1x1
    #: weight, whatever the command says (an image that ignores ``--dtype`` and ``--shape``).
    MISMATCHED_RESULT = "mismatched-result"


@dataclass(frozen=True)
class SyntheticGpu:
    """What a synthetic profile reports for one GPU."""

    name: str = "NVIDIA H200"
    bandwidth_bytes_per_second: float = 4.3e12
    peak_flops_per_second: float = 7.8e14
    #: Relative half-width of the 95% intervals reported with every headline number.
    uncertainty: float = 0.01
    memory_bytes: float = 141e9
    #: Warning codes the profile reports for this GPU (``CpuContention``, ...).
    warnings: tuple[str, ...] = ()


@dataclass
class FaultBook:
    """Modes and synthetic GPUs per node; nodes not listed use ``default``."""

    default: FaultMode = FaultMode.RUN_COMMAND
    modes: dict[str, FaultMode] = field(default_factory=dict)
    gpus: dict[str, tuple[SyntheticGpu, ...]] = field(default_factory=dict)
    #: How old a node's synthetic results claim to be, as if measured that long ago.
    result_age_seconds: dict[str, float] = field(default_factory=dict)
    slow_seconds: float = 2.0

    def mode(self, node: str) -> FaultMode:
        return self.modes.get(node, self.default)


DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: The backend a synthetic result names, by the pod's ``--device``: what a profiler that honours
#: the flag reports (``CPU_FALLBACK`` is the one that does not).
SYNTHETIC_BACKENDS = {"cuda": "cuda", "all": "cuda", "cpu": "cpu"}


def _option(command: Sequence[str], flag: str) -> str | None:
    for index, arg in enumerate(command):
        if arg == flag and index + 1 < len(command):
            return command[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def synthetic_profile(
    node: str, command: Sequence[str], gpus: Sequence[SyntheticGpu], age_seconds: float = 0.0
) -> CompactProfile:
    """A roofline-model result for ``gpus`` with the sweep the command asks for.

    Step time of a decode GEMM at batch B is the larger of the weight traffic over bandwidth and
    the FLOPs over peak (Williams, Waterman, Patterson 2009); a small per-node jitter derived from
    the node name makes nodes distinguishable but every run reproducible.
    """
    dtype = _option(command, "--dtype") or "bfloat16"
    default_shape = "x".join(map(str, DEFAULT_SHAPE))
    k, n = (int(x) for x in (_option(command, "--shape") or default_shape).lower().split("x"))
    batches_text = _option(command, "--batches")
    batches = tuple(int(b) for b in batches_text.split(",")) if batches_text else DEFAULT_BATCHES
    efficiency = float(_option(command, "--min-batch-efficiency") or 80) / 100
    element_bytes = 4 if dtype == "float32" else 2
    jitter = 1 - int(hashlib.sha256(node.encode()).hexdigest()[:4], 16) / 0xFFFF * 0.05
    devices = []
    for index, gpu in enumerate(gpus):
        bandwidth = gpu.bandwidth_bytes_per_second * jitter
        peak = gpu.peak_flops_per_second
        weight_bytes = k * n * element_bytes
        steps = tuple(max(weight_bytes / bandwidth, 2 * b * k * n / peak) for b in batches)
        # The ridge point is peak over bandwidth; a decode GEMM of batch B reaches an intensity
        # of 2B / element_bytes FLOP per byte, so it meets the ridge at the knee batch.
        ridge = peak / bandwidth
        knee = ridge * element_bytes / 2
        min_batch = next((b for b in batches if b >= knee * efficiency), batches[-1])
        models = synthetic_plans(command, gpu, bandwidth, batches, min_batch)
        devices.append(
            CompactDevice(
                index,
                gpu.name,
                headline_numbers(bandwidth, peak, ridge, min_batch),
                steps,
                models=models,
                warnings=gpu.warnings,
            )
        )
    created = time.time() - age_seconds
    devices_with_intervals = _with_intervals(devices, gpus)
    backend = SYNTHETIC_BACKENDS.get(_option(command, "--device") or "all", "cuda")
    return CompactProfile(dtype, k, n, created, 0.05, batches, devices_with_intervals, backend)


def _with_intervals(
    devices: Sequence[CompactDevice], gpus: Sequence[SyntheticGpu]
) -> tuple[CompactDevice, ...]:
    """The devices with intervals of each GPU's ``uncertainty`` around its numbers."""

    def around(value: float, relative: float) -> tuple[float, float]:
        return (value * (1 - relative), value * (1 + relative))

    return tuple(
        with_number_intervals(
            d,
            bandwidth_bytes_per_second=around(d.bandwidth_bytes_per_second, gpu.uncertainty),
            peak_flops_per_second=around(d.peak_flops_per_second, gpu.uncertainty),
            ridge_point=around(d.ridge_point, 2 * gpu.uncertainty),
            recommended_min_batch=(d.recommended_min_batch, d.recommended_min_batch),
        )
        for d, gpu in zip(devices, gpus, strict=True)
    )


def synthetic_plans(
    command: Sequence[str],
    gpu: SyntheticGpu,
    bandwidth: float,
    batches: Sequence[int],
    min_batch: int,
) -> tuple[CompactModelPlan, ...]:
    """A plan per model of ``--models-json`` (the kubelet turns a mounted ``--models-file`` into
    it), from a roofline-shaped step: reading the weights (a size taken from the model's name, so
    models differ) plus the KV cache of every sequence.
    """
    text = _option(command, "--models-json")
    if text is None:
        return ()
    slo_text = _option(command, "--itl-slo")
    slo = float(slo_text.rstrip("s")) if slo_text else None
    plans = []
    for entry in json.loads(text):
        plans.append(_synthetic_plan(entry, gpu, bandwidth, batches, min_batch, slo))
    return tuple(plans)


def _synthetic_plan(
    entry: Mapping[str, Any],
    gpu: SyntheticGpu,
    bandwidth: float,
    batches: Sequence[int],
    min_batch: int,
    slo: float | None,
) -> CompactModelPlan:
    context, tp = int(entry["contextTokens"]), int(entry["tensorParallel"])
    size = int(hashlib.sha256(entry["name"].encode()).hexdigest()[:4], 16) / 0xFFFF
    weights = (2 + 14 * size) * 2e9 / tp
    kv_per_token = 32768 / tp

    def step(batch: int) -> float:
        return (weights + batch * context * kv_per_token) / bandwidth

    by_memory = max(int((gpu.memory_bytes * 0.9 - weights) // (context * kv_per_token)), 0)
    by_latency = None
    if slo is not None:
        by_latency = min(
            max(int((slo * bandwidth - weights) // (context * kv_per_token)), 0), 65536
        )
    high = by_memory if by_latency is None else min(by_memory, by_latency)
    low = min_batch
    return CompactModelPlan(
        name=entry["name"],
        context_tokens=context,
        tensor_parallel=tp,
        min_batch=low,
        max_batch_by_memory=by_memory,
        max_batch_by_latency=by_latency,
        step_seconds_at_min_batch=step(low) if 1 <= low <= high else None,
        step_seconds_at_max_batch=step(high) if 1 <= low <= high else None,
        step_seconds=tuple(step(b) for b in batches if b <= by_memory),
    )


def synthetic_message(
    node: str, command: Sequence[str], gpus: Sequence[SyntheticGpu], age_seconds: float = 0.0
) -> str:
    return encode_compact(synthetic_profile(node, command, gpus, age_seconds))


def mismatched_message(node: str, command: Sequence[str], gpus: Sequence[SyntheticGpu]) -> str:
    """A sound result measured in float32 on a 1x1 weight, whatever ``command`` asked for."""
    other = [
        a
        for i, a in enumerate(command)
        if a not in ("--dtype", "--shape") and command[i - 1 : i] not in (["--dtype"], ["--shape"])
    ]
    return synthetic_message(node, [*other, "--dtype", "float32", "--shape", "1x1"], gpus)


def overflowing_message(node: str, command: Sequence[str], gpus: Sequence[SyntheticGpu]) -> str:
    """A synthetic result whose first GPU's bandwidth (GB/s on the wire) is 1e300: positive and
    finite as written, infinite once scaled to bytes per second."""
    wire = json.loads(synthetic_message(node, command, gpus))
    wire["g"][0][2] = 1e300
    return json.dumps(wire, separators=(",", ":"))


def forged_message(node: str, command: Sequence[str], gpus: Sequence[SyntheticGpu]) -> str:
    """A well-formed, plausible result with a ridge point of 1 and 9999 GB/s: what a tenant's
    look-alike pod would report to move a node's labels."""
    fake = SyntheticGpu(bandwidth_bytes_per_second=9.999e12, peak_flops_per_second=9.999e12)
    return synthetic_message(node, command, [fake for _ in gpus])
