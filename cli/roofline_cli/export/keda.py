"""``--target keda``: a KEDA ScaledObject (``keda.sh/v1alpha1``, KEDA v2.21) per model whose
Prometheus triggers hold each replica of a vLLM or SGLang Deployment at the plan's batch.

Two triggers (three with a planned workload), each ``metricType: AverageValue`` (the HPA divides
the query by the replicas):

* the requests in the engines, running plus waiting, against a target below the plan's
  ``maxBatch`` per replica: the HPA changes the replicas only when requests per replica pass
  the target by more than its tolerance (10%), so the target is ``⌊maxBatch ÷ 1.1⌋``
  (``thresholds.scale_up_target``) and a replica is added no later than when each holds its
  SLO batch, before requests wait behind the engine's cap (``--max-num-seqs`` = ``maxBatch``);
  a target of ``maxBatch`` itself would add one only once a tenth of a batch per replica
  already waits. Running requests alone cannot exceed that cap, so they could never ask for
  more replicas;
* the waiting queue against the queue depth a replica may hold (``thresholds.queue_depth``),
  whose ``activationThreshold`` of 0 wakes a Deployment scaled to zero as soon as a request
  waits (with ``--min-replicas 0`` and a queue in front of the engines, e.g. the gateway's);
* with a ``maxRequestRate`` on every class (a profile with ``spec.workload``) and vLLM, the
  requests per second the replicas finish against the largest target ``t`` with ``t × 1.1 <
  maxRequestRate`` (``thresholds.request_rate_target``): prompts long enough that prefill, not
  the batch, bounds a replica scale it out before its TTFT leaves the SLO.

The Prometheus scaler's metadata keys are KEDA v2.21.1's (``pkg/scalers/prometheus_scaler.go``:
``serverAddress``, ``query``, ``threshold``, ``activationThreshold``; v2.20.2 lines 49-53); every
metadata value is a string, as the CRD requires. A Prometheus that needs credentials is reached
through ``triggers[].authenticationRef`` (``--authentication-ref``: a TriggerAuthentication, or a
ClusterTriggerAuthentication, ``apis/keda/v1alpha1/scaletriggers_types.go:38-50`` of v2.20.2)
and the scaler's ``authModes`` (``--auth-modes``; read from the trigger's metadata or the
TriggerAuthentication's parameters, ``pkg/scalers/authentication/authentication_types.go:76``).
The engines' series are those of docs/sizing.md: vLLM's
``vllm:num_requests_running``/``vllm:num_requests_waiting`` and SGLang's
``sglang:num_running_reqs``/``sglang:num_queue_reqs``, labelled with the served ``model_name``.
Pure module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note
from roofline_cli.export.options import ExportOptions, by_model, classes_note, object_name, safest
from roofline_cli.export.plans import ClassPlan, ExportSource

#: Each engine's counter of finished requests, whose rate is the request rate the replicas serve
#: (in the steady state, the rate at which requests arrive; past saturation it stops at the
#: replicas' throughput, and the waiting queue's trigger asks for more). vLLM 0.32 exposes
#: ``vllm:request_success_total`` (labels ``model_name``, ``finished_reason``); no SGLang counter
#: is read, so an SGLang ScaledObject has no rate trigger.
COMPLETED = {"vllm": "vllm:request_success_total"}
#: The window of the rate: as short as Prometheus's scrape interval allows a stable rate over.
RATE_WINDOW = "1m"

#: Each engine's running and waiting request gauges.
SERIES = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
}


def _queries(engine: str, model: str, namespace: str) -> tuple[str, str]:
    running, waiting = SERIES[engine]
    selector = f'{{model_name="{model}",namespace="{namespace}"}}'
    demand = f"sum({running}{selector}) + sum({waiting}{selector})"
    return demand, f"sum({waiting}{selector})"


def _authenticate(trigger: dict[str, Any], options: ExportOptions) -> None:
    """The credentials of a Prometheus that needs them, on one trigger."""
    if options.auth_modes is not None:
        trigger["metadata"]["authModes"] = Note(
            options.auth_modes,
            "triggers[].metadata.authModes (--auth-modes): how the scaler presents the "
            "credentials of the authenticationRef",
        )
    if options.authentication_ref is not None:
        kind, name = options.authentication_ref
        trigger["authenticationRef"] = Note(
            {"name": name, "kind": kind},
            f"triggers[].authenticationRef (--authentication-ref): the {kind} holding the "
            "Prometheus credentials (bearerToken, username/password or ca/cert/key); its "
            "parameters may also carry authModes",
        )


def rated_class(plans: Sequence[ClassPlan]) -> ClassPlan | None:
    """The class whose largest request rate per replica is smallest, so that a per-replica rate
    target holds on every class; ``None`` unless every class has a rate (a profile without a
    workload, or written before the operator published one: the export is then as before)."""
    rated = [p for p in plans if p.max_request_rate is not None]
    if not rated or len(rated) != len(plans):
        return None
    return min(rated, key=lambda p: (_rps(p), p.gpu_class))


def _rps(plan: ClassPlan) -> float:
    return 0.0 if plan.max_request_rate is None else plan.max_request_rate.requests_per_second


def _rate_trigger(
    plans: Sequence[ClassPlan], options: ExportOptions, served: str, server: Note
) -> dict[str, Any] | None:
    """A trigger on the requests per second each replica serves, against a target below the
    class's ``maxRequestRate``; ``None`` without a rate or a counter of the engine."""
    plan = rated_class(plans)
    counter = COMPLETED.get(options.engine)
    if plan is None or plan.max_request_rate is None or counter is None:
        return None
    target, how = thresholds.request_rate_target(plan.max_request_rate)
    selector = f'{{model_name="{served}",namespace="{options.namespace}"}}'
    trigger = {
        "type": "prometheus",
        "name": "request-rate-per-replica",
        "metricType": Note(
            "AverageValue", "the HPA divides the query by the replicas: requests/s per replica"
        ),
        "metadata": {
            "serverAddress": server,
            "query": Note(
                f"sum(rate({counter}{selector}[{RATE_WINDOW}]))",
                f"the requests/s the {options.engine} engines serving {served} finish, over "
                f"{RATE_WINDOW}: the arrival rate in the steady state",
            ),
            "threshold": Note(
                f"{target:g}",
                f"triggers[].metadata.threshold, requests/s per replica: {how}; from "
                f"{plan.source}.maxRequestRate, {_rate_classes_note(plans, plan)}",
            ),
        },
    }
    _authenticate(trigger, options)
    return trigger


def _optional(trigger: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [] if trigger is None else [trigger]


def _rate_classes_note(plans: Sequence[ClassPlan], chosen: ClassPlan) -> str:
    if len(plans) == 1:
        return f"GPU class {chosen.gpu_class}"
    return f"GPU class {chosen.gpu_class}, the smallest rate of the classes that serve it"


def _scaled_object(model: str, options: ExportOptions, source: ExportSource) -> dict[str, Any]:
    plans = by_model(source.plans)[model]
    plan = safest(plans)
    batch, batch_how = thresholds.scale_up_target(plan)
    depth, depth_how = thresholds.queue_depth(plan)
    served = options.model_id or model
    demand, waiting = _queries(options.engine, served, options.namespace)
    where = f"{plan.source}; {classes_note(plans, plan)}"
    server = Note(
        options.prometheus, "triggers[].metadata.serverAddress: the Prometheus that scrapes them"
    )
    requests = {
        "type": "prometheus",
        "name": "requests-per-replica",
        "metricType": Note(
            "AverageValue", "the HPA divides the query by the replicas: requests per replica"
        ),
        "metadata": {
            "serverAddress": server,
            "query": Note(
                demand,
                f"the requests in the {options.engine} engines serving {served}, running and "
                "waiting: running alone stays at the engines' cap and would never scale up",
            ),
            "threshold": Note(
                str(batch),
                f"triggers[].metadata.threshold, requests per replica: {batch_how}; from {where}",
            ),
        },
    }
    _authenticate(requests, options)
    queue = {
        "type": "prometheus",
        "name": "waiting-queue",
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": server,
            "query": Note(waiting, f"the requests waiting in the {options.engine} engines"),
            "threshold": Note(
                str(depth), f"triggers[].metadata.threshold, waiting per replica: {depth_how}"
            ),
            "activationThreshold": Note(
                "0",
                "triggers[].metadata.activationThreshold: any waiting request wakes a "
                "Deployment scaled to zero (--min-replicas 0)",
            ),
        },
    }
    _authenticate(queue, options)
    spec = {
        "scaleTargetRef": {"name": options.deployment or object_name(model)},
        "minReplicaCount": Note(
            options.min_replicas,
            "spec.minReplicaCount (--min-replicas): scaling from zero needs a queue in front of "
            "the engines, since a Deployment at zero exports no engine metrics",
        ),
        "maxReplicaCount": Note(options.max_replicas, "spec.maxReplicaCount (--max-replicas)"),
        "triggers": [requests, queue, *_optional(_rate_trigger(plans, options, served, server))],
    }
    metadata = {"name": object_name(model), "namespace": options.namespace}
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": metadata,
            "spec": spec}  # fmt: skip


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """One ScaledObject per model."""
    documents = []
    for model in source.models():
        header = (
            f"KEDA ScaledObject for {model} served by {options.engine}, from {source.description}"
            f": each replica is held at the plan's batch within the ITL SLO."
        )
        documents.append((header, _scaled_object(model, options, source)))
    return documents
