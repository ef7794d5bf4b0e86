"""What a plan says about a replica under load: the workload it was asked about, the time to
first token of one request alone over a ladder of prompt lengths, the TTFT and ITL a user sees at
request rates, and the largest request rate one replica sustains under a TTFT and an ITL target.

The numbers come from ``load_model`` (the engine's scheduler run over the predicted mixed steps);
this module holds only the values and their JSON form (camelCase, documented in
docs/profiler.md under "Load").

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: What limited the largest sustainable rate (``MaxRate.limited_by``).
LIMITED_BY_TTFT = "ttft"
LIMITED_BY_ITL = "itl"
#: The replica's throughput: past it the queue grows without bound, whatever the targets.
LIMITED_BY_SATURATION = "saturation"
LIMITS = (LIMITED_BY_TTFT, LIMITED_BY_ITL, LIMITED_BY_SATURATION)


@dataclass(frozen=True)
class Workload:
    """Every request's prompt and output length, in tokens."""

    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class LoadRequest:
    """What a plan under load is asked (``--prompt-tokens``, ``--output-tokens``,
    ``--request-rate``, ``--ttft-slo``, ``--max-num-batched-tokens``, ``--max-num-seqs``): the
    workload (None: the TTFT ladder alone), the rates to report, the TTFT target (the ITL target
    is the plan's) and the engine's scheduling limits (None: the engine's defaults)."""

    workload: Workload | None = None
    rates: tuple[float, ...] = ()
    ttft_slo_seconds: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None


@dataclass(frozen=True)
class SchedulerLimits:
    """The engine's scheduling limits the load model runs under: the tokens one step may carry
    (vLLM's ``--max-num-batched-tokens``) and the sequences that may run at once (the smaller of
    ``--max-num-seqs`` and the sequences whose KV cache fits at the workload's context)."""

    max_num_batched_tokens: int
    max_num_seqs: int


@dataclass(frozen=True)
class TtftPoint:
    """Time to first token of one request alone on an idle replica."""

    prompt_tokens: int
    seconds: float


@dataclass(frozen=True)
class LoadPoint:
    """What a user sees at one request rate (open-loop Poisson arrivals), in the steady state.
    Medians are the model's estimate; the 90th percentiles are labelled estimates of the tail.
    ``saturated``: the rate is past the replica's throughput (the queue, and so the TTFT, grow
    without bound; the TTFT figures are then those of the simulated window only)."""

    requests_per_second: float
    ttft_median_seconds: float
    ttft_p90_seconds: float
    itl_median_seconds: float
    itl_p90_seconds: float
    running_batch: float
    output_tokens_per_second: float
    saturated: bool


@dataclass(frozen=True)
class MaxRate:
    """The largest request rate per replica that keeps the median TTFT and the median ITL within
    their targets (and below saturation), and which of them limits it."""

    requests_per_second: float
    limited_by: str


@dataclass(frozen=True)
class LoadPlan:
    """One model's predicted behaviour under load on one device, for one engine."""

    name: str
    dtype: str
    tensor_parallel: int
    #: The engine whose steps and scheduler were modelled (``engines``).
    engine: str
    #: None: no workload was given, the TTFT ladder alone.
    workload: Workload | None
    limits: SchedulerLimits
    ttft_slo_seconds: float | None
    itl_slo_seconds: float | None
    ttft_ladder: tuple[TtftPoint, ...]
    rates: tuple[LoadPoint, ...]
    max_rate: MaxRate | None
    #: How the numbers were obtained, in a line (the scheduler rule and the prefill attention's
    #: source: the engine's kernel or the roofline).
    method: str
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "tensorParallel": self.tensor_parallel,
            "engine": self.engine,
            "promptTokens": None if self.workload is None else self.workload.prompt_tokens,
            "outputTokens": None if self.workload is None else self.workload.output_tokens,
            "maxNumBatchedTokens": self.limits.max_num_batched_tokens,
            "maxNumSeqs": self.limits.max_num_seqs,
            "ttftSloSeconds": self.ttft_slo_seconds,
            "itlSloSeconds": self.itl_slo_seconds,
            "ttftLadder": [
                {"promptTokens": p.prompt_tokens, "ttftSeconds": p.seconds}
                for p in self.ttft_ladder
            ],
            "rates": [
                {
                    "requestsPerSecond": r.requests_per_second,
                    "ttftMedianSeconds": r.ttft_median_seconds,
                    "ttftP90Seconds": r.ttft_p90_seconds,
                    "itlMedianSeconds": r.itl_median_seconds,
                    "itlP90Seconds": r.itl_p90_seconds,
                    "runningBatch": r.running_batch,
                    "outputTokensPerSecond": r.output_tokens_per_second,
                    "saturated": r.saturated,
                }
                for r in self.rates
            ],
            "maxRequestRate": None
            if self.max_rate is None
            else {
                "requestsPerSecond": self.max_rate.requests_per_second,
                "limitedBy": self.max_rate.limited_by,
            },
            "method": self.method,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadPlan:
        best = d.get("maxRequestRate")
        return cls(
            name=str(d["name"]),
            dtype=str(d["dtype"]),
            tensor_parallel=int(d["tensorParallel"]),
            engine=str(d["engine"]),
            workload=None
            if d.get("promptTokens") is None
            else Workload(int(d["promptTokens"]), int(d["outputTokens"])),
            limits=SchedulerLimits(int(d["maxNumBatchedTokens"]), int(d["maxNumSeqs"])),
            ttft_slo_seconds=_optional_float(d.get("ttftSloSeconds")),
            itl_slo_seconds=_optional_float(d.get("itlSloSeconds")),
            ttft_ladder=tuple(
                TtftPoint(int(p["promptTokens"]), float(p["ttftSeconds"]))
                for p in d.get("ttftLadder", ())
            ),
            rates=tuple(
                LoadPoint(
                    requests_per_second=float(r["requestsPerSecond"]),
                    ttft_median_seconds=float(r["ttftMedianSeconds"]),
                    ttft_p90_seconds=float(r["ttftP90Seconds"]),
                    itl_median_seconds=float(r["itlMedianSeconds"]),
                    itl_p90_seconds=float(r["itlP90Seconds"]),
                    running_batch=float(r["runningBatch"]),
                    output_tokens_per_second=float(r["outputTokensPerSecond"]),
                    saturated=bool(r["saturated"]),
                )
                for r in d.get("rates", ())
            ),
            max_rate=None
            if best is None
            else MaxRate(float(best["requestsPerSecond"]), str(best["limitedBy"])),
            method=str(d.get("method", "")),
            warnings=tuple(str(w) for w in d.get("warnings", ())),
        )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
