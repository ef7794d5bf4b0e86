"""From a model's predicted decode step times to a serving plan: batch bounds, tokens/s, cost.

Definitions (tested exactly in ``tests/profiler/core/test_planning.py``, explained in the README):

* **Max batch by memory**: the sequences whose KV blocks fit beside the weights and the
  activation reserve (``kv_budget``).
* **Min batch**: the smallest predicted batch B from which B and every larger predicted batch
  reach ``min_efficiency_percent`` of the peak in achieved FLOP/s, ``decode_step_flops(B, context)
  / step`` — attention included, so a long context can make it unreachable (``None`` and a
  reason). Requiring every larger batch too keeps one lucky sample from lowering it.
* **Max batch by latency**: the largest batch whose step time is within the ITL SLO. Between two
  predicted batches that straddle the SLO, the step time is interpolated linearly in log(batch) –
  log(time) (straight on the roofline's log-log axes) and the bound rounded down. No extrapolation
  past the largest predicted batch: when all meet the SLO, the bound is the largest, with a warning.
* **Recommended range**: from the min batch to ``min(max by memory, max by latency)``; tokens/s at
  its ends come from the same log-log interpolation (power-law extrapolation past the largest
  predicted batch, with a warning). Tokens/s count one model replica: a TP group produces
  ``batch / step`` tokens per second, and costs ``tp`` GPU-hours per hour.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core import kv_budget, models, serving_flags, units
from roofline_profiler.core.engines import StepEngine
from roofline_profiler.core.itl_model import ItlModel
from roofline_profiler.core.load_plan import LoadRequest
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.roofline import dtype_bytes


@dataclass(frozen=True)
class StepPrediction:
    batch: int
    context_tokens: int
    step_seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.batch / self.step_seconds


@dataclass(frozen=True)
class PlanOptions:
    itl_slo_seconds: float | None = None
    gpu_hour_cost: float | None = None
    gpu_memory_utilization: float = 0.9
    min_efficiency_percent: int = 50
    #: The engine whose step to predict (``engines.ENGINES``); None: the device's default.
    engine: str | None = None
    #: What the plan under load is asked (``load_plan``); None: no plan under load.
    load: LoadRequest | None = None


@dataclass(frozen=True)
class ModelPlan:
    name: str
    dtype: str
    weight_bytes: int
    kv_cache_bytes_per_token: int
    context_tokens: int
    tensor_parallel: int
    tensor_parallel_measured: bool
    min_batch: int | None
    min_batch_reason: str | None
    max_batch_by_memory: int
    max_batch_by_latency: int | None
    recommended_range: tuple[int, int] | None
    tokens_per_second_at_range: tuple[float, float] | None
    predictions: tuple[StepPrediction, ...]
    cost_per_million_tokens: tuple[tuple[int, float], ...]
    engine_settings: Mapping[str, tuple[str, ...]]
    warnings: tuple[str, ...]
    #: The engine whose step the predictions are (None in plans made before it was recorded).
    engine: StepEngine | None = None
    #: The predicted steps as ``α + β·B + γ·B·C`` (``itl_model.py``); ``None`` where they cannot
    #: determine it (fewer than two batches or contexts).
    itl_model: ItlModel | None = None
    #: The decoder layers' weight format (``weight_formats``; empty: the dtype's) and the KV
    #: cache's dtype, as planned.
    weight_format: str = ""
    kv_cache_dtype: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            **({"weightFormat": self.weight_format} if self.weight_format else {}),
            **({"kvCacheDtype": self.kv_cache_dtype} if self.kv_cache_dtype != "auto" else {}),
            "weightBytes": self.weight_bytes,
            "kvCacheBytesPerToken": self.kv_cache_bytes_per_token,
            "contextTokens": self.context_tokens,
            "tensorParallel": self.tensor_parallel,
            "tensorParallelMeasured": self.tensor_parallel_measured,
            "minBatch": self.min_batch,
            "minBatchReason": self.min_batch_reason,
            "maxBatchByMemory": self.max_batch_by_memory,
            "maxBatchByLatency": self.max_batch_by_latency,
            "recommendedRange": _pair(self.recommended_range),
            "tokensPerSecondAtRange": _pair(self.tokens_per_second_at_range),
            "predictions": [
                {
                    "batch": p.batch,
                    "contextTokens": p.context_tokens,
                    "stepSeconds": p.step_seconds,
                    "tokensPerSecond": p.tokens_per_second,
                }
                for p in self.predictions
            ],
            "costPerMillionTokens": [
                {"batch": b, "cost": c} for b, c in self.cost_per_million_tokens
            ],
            "engineSettings": {name: list(flags) for name, flags in self.engine_settings.items()},
            "warnings": list(self.warnings),
            **({"engine": self.engine.to_dict()} if self.engine else {}),
            "itlModel": None if self.itl_model is None else self.itl_model.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelPlan:
        rng, tps = d.get("recommendedRange"), d.get("tokensPerSecondAtRange")
        return cls(
            name=str(d["name"]),
            dtype=str(d["dtype"]),
            weight_format=str(d.get("weightFormat", "")),
            kv_cache_dtype=str(d.get("kvCacheDtype", "auto")),
            weight_bytes=int(d["weightBytes"]),
            kv_cache_bytes_per_token=int(d["kvCacheBytesPerToken"]),
            context_tokens=int(d["contextTokens"]),
            tensor_parallel=int(d["tensorParallel"]),
            tensor_parallel_measured=bool(d.get("tensorParallelMeasured", True)),
            min_batch=_optional_int(d.get("minBatch")),
            min_batch_reason=d.get("minBatchReason"),
            max_batch_by_memory=int(d["maxBatchByMemory"]),
            max_batch_by_latency=_optional_int(d.get("maxBatchByLatency")),
            recommended_range=None if rng is None else (int(rng["low"]), int(rng["high"])),
            tokens_per_second_at_range=(
                None if tps is None else (float(tps["low"]), float(tps["high"]))
            ),
            predictions=tuple(
                StepPrediction(int(p["batch"]), int(p["contextTokens"]), float(p["stepSeconds"]))
                for p in d["predictions"]
            ),
            cost_per_million_tokens=tuple(
                (int(c["batch"]), float(c["cost"])) for c in d.get("costPerMillionTokens", ())
            ),
            engine_settings={k: tuple(v) for k, v in d.get("engineSettings", {}).items()},
            warnings=tuple(d.get("warnings", ())),
            engine=StepEngine.from_dict(d["engine"]) if d.get("engine") else None,
            itl_model=None if d.get("itlModel") is None else ItlModel.from_dict(d["itlModel"]),
        )


def interpolated_step_seconds(predictions: Sequence[StepPrediction], batch: int) -> float:
    """Step time at ``batch`` on the log-log line through the neighbouring predictions."""
    points = sorted((p.batch, p.step_seconds) for p in predictions)
    if not points:
        raise ValueError("no predictions to interpolate")
    for b, s in points:
        if b == batch:
            return s
    if len(points) == 1:
        return points[0][1] * batch / points[0][0]
    below = [pt for pt in points if pt[0] < batch]
    if not below:
        (b0, s0), (b1, s1) = points[0], points[1]
    elif len(below) == len(points):
        (b0, s0), (b1, s1) = points[-2], points[-1]
    else:
        (b0, s0), (b1, s1) = below[-1], points[len(below)]
    slope = math.log(s1 / s0) / math.log(b1 / b0)
    return float(s0 * (batch / b0) ** slope)


def plan_model(
    arch: ModelArch,
    dtype: str,
    context_tokens: int,
    tensor_parallel: int,
    tensor_parallel_measured: bool,
    predictions: Sequence[StepPrediction],
    device_memory_bytes: int,
    peak_flops_per_second: float,
    options: PlanOptions,
    engine: StepEngine | None = None,
) -> ModelPlan:
    """The serving plan of one model on one device at one context length; ``predictions`` are
    ``engine``'s steps."""
    size = dtype_bytes(dtype)
    if device_memory_bytes <= 0:
        raise ValueError(f"{arch.name}: device memory must be known to plan a batch")
    points = _points_at(predictions, context_tokens)
    memory = kv_budget.model_memory(
        arch, size, context_tokens, tensor_parallel, device_memory_bytes,
        options.gpu_memory_utilization,
    )  # fmt: skip
    by_memory = memory.max_batch
    warnings = _capacity_warnings(
        arch, context_tokens, tensor_parallel, tensor_parallel_measured, memory
    )
    min_batch, reason = _min_batch(
        arch, points, context_tokens, tensor_parallel, peak_flops_per_second,
        options.min_efficiency_percent, by_memory,
    )  # fmt: skip
    by_latency = None
    if options.itl_slo_seconds is not None:
        by_latency = _max_batch_by_latency(points, options.itl_slo_seconds, warnings)
    high = by_memory if by_latency is None else min(by_memory, by_latency)
    recommended, tokens_per_second = _range(points, min_batch, high, warnings)
    return ModelPlan(
        name=arch.name,
        dtype=dtype,
        weight_bytes=memory.weights,
        kv_cache_bytes_per_token=memory.kv_per_token,
        context_tokens=context_tokens,
        tensor_parallel=tensor_parallel,
        tensor_parallel_measured=tensor_parallel_measured,
        min_batch=min_batch,
        min_batch_reason=reason,
        max_batch_by_memory=by_memory,
        max_batch_by_latency=by_latency,
        recommended_range=recommended,
        tokens_per_second_at_range=tokens_per_second,
        predictions=points,
        cost_per_million_tokens=cost_per_million_tokens(
            points, options.gpu_hour_cost, tensor_parallel
        ),
        engine_settings=_engine_flags(arch, memory, high, context_tokens, tensor_parallel),
        warnings=tuple(warnings),
        engine=engine,
        weight_format=arch.weight_format,
        kv_cache_dtype=arch.kv_cache_dtype,
    )


def _points_at(
    predictions: Sequence[StepPrediction], context_tokens: int
) -> tuple[StepPrediction, ...]:
    """The predicted steps at one context length, by batch."""
    at = sorted(
        (p for p in predictions if p.context_tokens == context_tokens), key=lambda p: p.batch
    )
    if not at:
        raise ValueError(f"no predicted step at {context_tokens} tokens of context")
    return tuple(at)


def _engine_flags(
    arch: ModelArch,
    memory: kv_budget.ModelMemory,
    high: int,
    context_tokens: int,
    tensor_parallel: int,
) -> Mapping[str, tuple[str, ...]]:
    """Each engine's flags for the range's high end; none for a model that leaves no room for
    one sequence (any value would fail to start). One that meets no SLO gets batch 1, the lowest
    latency there is."""
    if memory.max_batch < 1:
        return dict.fromkeys(serving_flags.ENGINES, ())
    return serving_flags.engine_settings(
        arch,
        max_batch=max(1, high),
        context_tokens=context_tokens,
        tensor_parallel=tensor_parallel,
        gpu_memory_utilization=memory.utilization,
        weight_bytes=memory.weights,
        activation_reserve_bytes=memory.reserve,
        device_memory_bytes=memory.device_bytes,
        kv_cache_bytes_per_token=memory.kv_per_token,
    )


def _capacity_warnings(
    arch: ModelArch,
    context_tokens: int,
    tensor_parallel: int,
    tensor_parallel_measured: bool,
    memory: kv_budget.ModelMemory,
) -> list[str]:
    """What limits the plan before any batch is chosen: no room for one sequence, all-reduces
    modelled rather than measured, a context past what the model was trained for."""
    warnings = []
    if memory.max_batch == 0:
        warnings.append(
            f"{memory.weights / 2**30:.1f} GiB of weights and {memory.reserve / 2**30:.1f} GiB "
            f"of activations leave no room for one sequence of {context_tokens} tokens in "
            f"{memory.utilization:.0%} of {memory.device_bytes / 2**30:.1f} GiB"
        )
    if tensor_parallel > 1 and not tensor_parallel_measured:
        warnings.append(
            f"the all-reduces of tensor parallel {tensor_parallel} are modelled, not measured "
            f"(fewer than {tensor_parallel} devices visible)"
        )
    if context_tokens > arch.max_position_embeddings:
        warnings.append(
            f"context {context_tokens} exceeds the model's max_position_embeddings "
            f"({arch.max_position_embeddings}); engines refuse it without an override"
        )
    return warnings


def cost_per_million_tokens(
    points: Sequence[StepPrediction], gpu_hour_cost: float | None, tensor_parallel: int
) -> tuple[tuple[int, float], ...]:
    """``(batch, cost)`` of a million tokens at each predicted batch: one replica costs
    ``tensor_parallel`` GPU-hours per hour; nothing without a GPU-hour price."""
    if gpu_hour_cost is None:
        return ()
    per_second = gpu_hour_cost * tensor_parallel / units.SECONDS_PER_HOUR
    return tuple((p.batch, per_second / p.tokens_per_second * 1e6) for p in points)


def _min_batch(
    arch: ModelArch,
    points: Sequence[StepPrediction],
    context: int,
    tp: int,
    peak: float,
    percent: int,
    by_memory: int,
) -> tuple[int | None, str | None]:
    fractions = [
        models.decode_step_flops(arch, p.batch, context, tp) / p.step_seconds / peak for p in points
    ]
    target = percent / 100
    found: int | None = None
    for p, fraction in zip(reversed(points), reversed(fractions), strict=True):
        if fraction < target:
            break
        found = p.batch
    if found is None:
        best = max(range(len(points)), key=lambda i: fractions[i])
        largest = points[-1].batch
        kv = (
            largest
            * models.attended_tokens(arch, context)
            * models.kv_cache_bytes_per_token(arch, 1, tp)
        )
        weights = models.weight_bytes(arch, 1, tp)
        cause = "attention keeps" if kv > weights else "the predictions keep"
        return None, (
            f"at {context} tokens of context {cause} every batch up to {largest} below "
            f"{percent}% of peak (best {fractions[best]:.0%} at batch {points[best].batch})"
        )
    if found > by_memory:
        return found, (
            f"batch {found} reaches {percent}% of peak but only {by_memory} sequences of "
            f"{context} tokens fit in memory"
        )
    return found, None


def _max_batch_by_latency(points: Sequence[StepPrediction], slo: float, warnings: list[str]) -> int:
    within = [p for p in points if p.step_seconds <= slo]
    if not within:
        warnings.append(
            f"no batch meets the {slo * 1e3:g} ms ITL SLO (batch {points[0].batch} takes "
            f"{points[0].step_seconds * 1e3:.3g} ms)"
        )
        return 0
    best = within[-1]
    above = [p for p in points if p.batch > best.batch and p.step_seconds > slo]
    if not above:
        warnings.append(
            f"every predicted batch up to {best.batch} meets the ITL SLO; predict larger batches "
            "to find its bound"
        )
        return best.batch
    nxt = above[0]
    slope = math.log(nxt.step_seconds / best.step_seconds) / math.log(nxt.batch / best.batch)
    bound = float(best.batch * (slo / best.step_seconds) ** (1 / slope))
    return max(best.batch, min(nxt.batch - 1, math.floor(bound + 1e-9)))


def _range(
    points: Sequence[StepPrediction], low: int | None, high: int, warnings: list[str]
) -> tuple[tuple[int, int] | None, tuple[float, float] | None]:
    if high < 1:
        return None, None
    if low is None:
        warnings.append(
            f"no batch reaches the efficiency threshold; run as close to batch {high} as the "
            "load allows"
        )
        low = high
    if low > high:
        warnings.append(f"the bounds cap the batch at {high}, below the min batch {low}")
        return None, None
    if high > points[-1].batch:
        warnings.append(
            f"tokens/s at batch {high} extrapolated past the largest predicted batch "
            f"{points[-1].batch}"
        )
    rates = (
        low / interpolated_step_seconds(points, low),
        high / interpolated_step_seconds(points, high),
    )
    return (low, high), rates


def _pair(pair: tuple[int, int] | tuple[float, float] | None) -> dict[str, float] | None:
    return None if pair is None else {"low": pair[0], "high": pair[1]}


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
