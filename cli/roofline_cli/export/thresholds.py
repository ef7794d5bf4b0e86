"""The thresholds the targets write, each derived from a plan and explained in words.

Every function returns ``(value, derivation)``: the number, and the sentence a comment carries
(the measured numbers it came from, and the arithmetic). The upstream defaults these replace
are named where a derivation keeps their proportion.

* **KV-cache utilisation at the SLO batch**: the plan's ``maxBatch`` sequences of the planned
  context take ``maxBatch / maxBatchByMemory`` of the KV cache the engine has (the plan's
  ``maxBatchByMemory`` is that cache in sequences of the context). Above it, a replica runs
  more (or longer) sequences than its latency bound allows: saturated. Rounded down to 0.01.
* **Queue depth**: a tenth of the SLO batch, at least one request: the "10% local queue buffer"
  the Gateway API Inference Extension's flow-control guide recommends above a server's active
  batch (``maxConcurrency`` at 110% of it), so the engine always has the next requests to
  admit as sequences finish, and no more.
* **Spare triggers** (llm-d's autoscaler): its defaults scale up when the spare KV share falls
  below 0.1 of a 0.8 threshold and the spare queue below 3 of 5; the same proportions of the
  derived thresholds keep its behaviour and move its operating point to the plan's.
* **Replicas and quotas**: a replica serves ``tokensPerSecondAtMaxBatch`` at its SLO batch;
  ``⌈T / (rate × u)⌉`` replicas sustain ``T`` tokens/s at a planned utilisation ``u``, each
  ``tensorParallel`` GPUs.

Pure module.
"""

from __future__ import annotations

import math
from fractions import Fraction

from roofline_cli.export.plans import ClassPlan, RequestRate

#: Share of the SLO batch a replica's engine may queue (GAIE flow control: 110% of the batch).
QUEUE_SHARE = 0.1
#: The HPA's tolerance: it changes the replicas only when the metric per replica is more than
#: this share away from its target (kube-controller-manager's
#: ``--horizontal-pod-autoscaler-tolerance``, default 0.1).
HPA_TOLERANCE = 0.1
#: llm-d's autoscaler defaults (v0.5.1 ``deploy/configmap-saturation-scaling.yaml``).
WVA_DEFAULT_KV_THRESHOLD = 0.8
WVA_DEFAULT_QUEUE_THRESHOLD = 5
WVA_DEFAULT_KV_SPARE = 0.1
WVA_DEFAULT_QUEUE_SPARE = 3


class NoThreshold(ValueError):
    """A plan that gives no threshold (no sequence fits, or no batch meets the SLO)."""


def _usable(plan: ClassPlan) -> None:
    if plan.max_batch_by_memory < 1:
        raise NoThreshold(
            f"model {plan.model} on {plan.gpu_class}: no sequence of {plan.context_tokens} tokens "
            "fits in memory beside the weights, so no replica can run"
        )
    if plan.max_batch < 1:
        raise NoThreshold(
            f"model {plan.model} on {plan.gpu_class}: no batch meets the ITL SLO, so no "
            "replica can serve within it"
        )


def _floor_hundredths(value: float) -> float:
    return math.floor(value * 100 + 1e-9) / 100


def kv_cache_threshold(plan: ClassPlan) -> tuple[float, str]:
    """The KV-cache utilisation of the SLO batch at the planned context."""
    _usable(plan)
    share = plan.max_batch / plan.max_batch_by_memory
    value = min(1.0, max(0.01, _floor_hundredths(share)))
    return value, (
        f"maxBatch {plan.max_batch} (bound by {plan.bound_by}) of maxBatchByMemory "
        f"{plan.max_batch_by_memory} sequences of {plan.context_tokens} tokens = {share:.4f} of "
        f"the KV cache, rounded down (upstream default {WVA_DEFAULT_KV_THRESHOLD})"
    )


def queue_depth(plan: ClassPlan) -> tuple[int, str]:
    """Requests a replica's engine may queue: a tenth of its SLO batch, at least one."""
    _usable(plan)
    value = max(1, math.ceil(QUEUE_SHARE * plan.max_batch))
    return value, (
        f"⌈{QUEUE_SHARE:g} × maxBatch {plan.max_batch}⌉ = {value}: the 10% queue above the active "
        f"batch that the inference gateway's flow-control guide recommends (upstream default "
        f"{WVA_DEFAULT_QUEUE_THRESHOLD})"
    )


def kv_spare_trigger(plan: ClassPlan) -> tuple[float, str]:
    threshold, _ = kv_cache_threshold(plan)
    ratio = WVA_DEFAULT_KV_SPARE / WVA_DEFAULT_KV_THRESHOLD
    value = max(0.01, _floor_hundredths(threshold * ratio))
    return value, (
        f"kvCacheThreshold {threshold:g} × {WVA_DEFAULT_KV_SPARE:g}/{WVA_DEFAULT_KV_THRESHOLD:g} "
        f"(the upstream defaults' proportion) = {value:g}"
    )


def queue_spare_trigger(plan: ClassPlan) -> tuple[int, str]:
    depth, _ = queue_depth(plan)
    ratio = WVA_DEFAULT_QUEUE_SPARE / WVA_DEFAULT_QUEUE_THRESHOLD
    value = max(1, round(depth * ratio))
    return value, (
        f"queueLengthThreshold {depth} × {WVA_DEFAULT_QUEUE_SPARE}/{WVA_DEFAULT_QUEUE_THRESHOLD} "
        f"(the upstream defaults' proportion), rounded, at least 1 = {value}"
    )


def requests_per_replica(plan: ClassPlan) -> tuple[int, str]:
    """The running requests one replica holds within the SLO: the plan's batch."""
    _usable(plan)
    step = plan.itl.step_seconds(plan.max_batch, plan.context_tokens) if plan.itl else None
    at = f"; its ITL model predicts {step * 1e3:.3g} ms per step there" if step else ""
    return plan.max_batch, (
        f"maxBatch {plan.max_batch}: min(maxBatchByMemory {plan.max_batch_by_memory}, "
        f"maxBatchByLatency {plan.max_batch_by_latency}), the largest batch within the memory "
        f"and the ITL SLO at {plan.context_tokens} tokens{at}"
    )


def scale_up_target(plan: ClassPlan) -> tuple[int, str]:
    """The requests per replica an HPA targets so that it adds a replica no later than when
    each replica holds its SLO batch: the largest target ``t`` with ``t × (1 + tolerance) <
    maxBatch``.

    The HPA adds replicas only when requests per replica exceed the target by more than its
    tolerance (a ratio within ``1 ± tolerance`` changes nothing); a target of ``maxBatch`` (the
    engine's ``--max-num-seqs``) would wait until each replica holds ``1.1 × maxBatch``
    requests, a tenth of a batch already queued behind the engine's cap.
    """
    batch, _ = requests_per_replica(plan)
    limit = Fraction(batch) / (1 + Fraction(str(HPA_TOLERANCE)))
    value = max(1, math.ceil(limit) - 1)
    return value, (
        f"the largest target whose {1 + HPA_TOLERANCE:g}× (the HPA's tolerance, "
        f"{HPA_TOLERANCE:g}) lies below maxBatch {batch}, = {value}: the HPA adds replicas once "
        f"requests per replica exceed {float(value * (1 + Fraction(str(HPA_TOLERANCE)))):.4g}, "
        f"by the time each replica holds its SLO batch of {batch} (--max-num-seqs), before a "
        f"request waits; it removes them below "
        f"{float(value * (1 - Fraction(str(HPA_TOLERANCE)))):.4g}"
    )


def replicas_for(rate: float, tokens_per_second: float, utilization: float) -> int:
    """Replicas that sustain ``tokens_per_second`` at ``rate`` each, used to ``utilization``."""
    return max(1, math.ceil(tokens_per_second / (rate * utilization) - 1e-9))


#: Significant digits of a request-rate target: KEDA takes a decimal threshold.
RATE_TARGET_DIGITS = 3


def request_rate_target(rate: RequestRate) -> tuple[float, str]:
    """The requests per second per replica an HPA targets so that it adds a replica before each
    replica passes the plan's largest sustainable rate: the largest ``t`` of
    :data:`RATE_TARGET_DIGITS` significant digits with ``t × (1 + tolerance) < maxRequestRate``,
    the headroom :func:`scale_up_target` leaves below ``maxBatch``."""
    limit = Fraction(rate.requests_per_second) / (1 + Fraction(str(HPA_TOLERANCE)))
    if limit <= 0:
        raise ValueError("a rate target needs a positive maxRequestRate")
    exponent = math.floor(math.log10(limit)) - RATE_TARGET_DIGITS + 1
    unit = Fraction(10) ** exponent
    steps = math.ceil(limit / unit) - 1  # strictly below the limit
    value = float(steps * unit)
    return value, (
        f"the largest target of {RATE_TARGET_DIGITS} digits whose {1 + HPA_TOLERANCE:g}× (the "
        f"HPA's tolerance) lies below maxRequestRate {rate.requests_per_second:g} requests/s "
        f"(limited by {rate.limited_by}, for {rate.prompt_tokens}-token prompts and "
        f"{rate.output_tokens}-token outputs), = {value:g}: the HPA adds replicas before each "
        f"replica passes the rate at which its median TTFT or ITL leaves the SLO"
    )
