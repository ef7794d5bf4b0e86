"""``--target kueue``: Kueue v0.17 (``kueue.x-k8s.io/v1beta2``) objects sized by measured tokens/s.

What Kueue v0.17.0 does with them, from its sources:

* it refuses a workload that requests a resource its ClusterQueue does not cover ("resource cpu
  unavailable in ClusterQueue", ``pkg/scheduler/flavorassigner/flavorassigner.go:783``), so a
  queue covers every resource a serving pod requests: ``cpu``, ``memory`` and, on an
  accelerated class, the accelerator (``--resource``);
* each flavor's ``nominalQuota`` is capacity of its own, and with the default
  ``flavorFungibility`` (``whenCanPreempt: TryNextFlavor``,
  ``apis/kueue/v1beta2/clusterqueue_types.go:411``) a workload that does not fit one flavor goes
  to the next, so the flavors of one ClusterQueue *add up*. Two classes that are alternatives
  for one demand (26 H100s *or* 105 L40Ss) are therefore two ClusterQueues, not two flavors of
  one: each sized for the whole demand on its class, with its own LocalQueue. A serving
  Deployment targets one class anyway, since each class has its own engine flags
  (``--max-num-seqs`` is the class's SLO batch: ``--target engine-args --class``);
* a flavor's ``nodeLabels`` join the admitted pods' node selector and its ``tolerations`` their
  tolerations (``apis/kueue/v1beta2/resourceflavor_types.go:66,104``). The flavors select nodes
  by the operator's stable class label ``roofline.dev/class`` (the label-safe product the
  node's own profiler pod measured), never by a measured number a re-profile may move, and
  tolerate the accelerator's taint (``--resource``, ``NoSchedule``), as the project's
  walk-through (manifests/examples/kueue.yaml) does;
* pods join a LocalQueue by the label ``kueue.x-k8s.io/queue-name``
  (``pkg/controller/constants/constants.go:23``); on a Deployment, Kueue's webhook copies it to
  the pod template (``pkg/controller/jobs/deployment/deployment_webhook.go:91``).

Objects:

* one **ResourceFlavor** per measured class of nodes;
* one **Cohort**, in which queues of the same class lend each other idle quota (a queue can
  only borrow quota of the flavors it lists, so a model's queues on two classes never add up);
* per model and class, a **ClusterQueue** whose quota is ``r = ⌈T / (tokens/s per replica ×
  u)⌉`` replicas (``T`` is ``--tokens-per-second``, ``u`` the planned share of the decode
  ceiling, ``--utilization``, default 0.75: room for prefill, bursts and uneven routing), each
  ``tensorParallel`` accelerators and one pod's CPU and memory (``--cpu-per-replica``,
  ``--memory-per-replica``: the plan does not say what the engine's host side needs), and a
  **LocalQueue** of the same name in ``--namespace``. With ``--request-rate R`` (requests/s at
  the profile's ``spec.workload``) the replicas are ``⌈R / maxRequestRate⌉`` (the class's, its
  slowest node's), the larger of the two when both demands are given.

No ``fairSharing.weight``: it acts only when fair sharing is enabled in Kueue's own
configuration (``fairSharing`` is commented out in
``config/components/manager/controller_manager_config.yaml:67``), and the quotas alone decide.

Pure module.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note
from roofline_cli.export.options import ExportOptions, by_model, object_name
from roofline_cli.export.plans import ClassPlan, ExportSource, NodeClass

API = "kueue.x-k8s.io/v1beta2"
PROFILE_LABEL = "roofline.dev/profile"
#: The operator's class label (``roofline_operator.core.names.LABEL_CLASS``).
CLASS_LABEL = "roofline.dev/class"
#: The label that hands a pod to a LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: A Kubernetes quantity split into its number and suffix.
_QUANTITY = re.compile(
    r"^(?P<number>[+]?[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[A-Za-z]*|[eE][0-9]+)$"
)


class NoDemand(ValueError):
    """Kueue quotas need the demand they serve."""


def flavor_name(node_class: NodeClass) -> str:
    return object_name(f"roofline-{node_class.label}")


def queue_name(model: str, node_class: NodeClass) -> str:
    """The ClusterQueue and LocalQueue of ``model`` on one class."""
    return object_name(f"{model}-{node_class.label}")


def scaled_quantity(quantity: str, factor: int) -> str:
    """``factor`` times a Kubernetes quantity, in its own suffix (``64Gi`` × 3 = ``192Gi``)."""
    match = _QUANTITY.match(quantity)
    if match is None:
        raise ValueError(f"{quantity!r} is not a quantity")
    number = Decimal(match["number"]) * factor
    text = format(number.normalize(), "f") if number else "0"
    return f"{text}{match['suffix']}"


def _flavor(
    node_class: NodeClass, options: ExportOptions, source: ExportSource
) -> tuple[str, dict[str, Any]]:
    labels: dict[str, Any] = {}
    if source.profile is not None:
        labels[PROFILE_LABEL] = Note(source.profile, "nodes the profile measured")
    labels[CLASS_LABEL] = Note(
        node_class.label,
        f"the class the operator labels {', '.join(node_class.nodes)} with: the product their "
        f"own profiler pods measured, {node_class.product} ({node_class.gpus} device(s)); a "
        "re-profile does not move it",
    )
    spec: dict[str, Any] = {
        "nodeLabels": Note(labels, "spec.nodeLabels: Kueue adds them to the pods' selector")
    }
    if node_class.accelerated:
        spec["tolerations"] = Note(
            [{"key": options.resource, "operator": "Exists", "effect": "NoSchedule"}],
            f"spec.tolerations: Kueue adds them to the admitted pods, so they tolerate the "
            f"{options.resource} taint of the accelerator nodes",
        )
    header = f"Measured class {node_class.product}: the nodes labelled {CLASS_LABEL}."
    document = {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(node_class)},
        "spec": spec,
    }
    return header, document


def _plan_on(plans: list[ClassPlan], node_class: NodeClass) -> ClassPlan:
    """The model's plan on the class's product (the first one when the class is unplanned)."""
    return next((p for p in plans if p.gpu_class == node_class.product), plans[0])


def _replicas(
    model: str, plan: ClassPlan, options: ExportOptions, node_class: NodeClass
) -> tuple[int, str]:
    """Replicas for the demand: by decode tokens/s (``--tokens-per-second``), by requests/s
    (``--request-rate``, against the class's ``maxRequestRate``), or the larger of the two."""
    sized: list[tuple[int, str]] = []
    if options.tokens_per_second is not None:
        demand = options.tokens_per_second
        rate = node_class.tokens_per_second[model]
        replicas = thresholds.replicas_for(rate, demand, options.utilization)
        sized.append(
            (
                replicas,
                f"⌈{demand:g} tokens/s ÷ ({rate:.4g} tokens/s per replica at maxBatch × "
                f"{options.utilization:g})⌉ = {replicas} replica(s)",
            )
        )
    if options.request_rate is not None:
        best = plan.max_request_rate
        if best is None or best.requests_per_second <= 0:
            raise NoDemand(
                f"--request-rate needs a maxRequestRate of {model} on {node_class.product}: "
                "profile with spec.workload (and spec.slo.timeToFirstToken)"
            )
        replicas = max(1, math.ceil(options.request_rate / best.requests_per_second - 1e-9))
        sized.append(
            (
                replicas,
                f"⌈{options.request_rate:g} requests/s ÷ maxRequestRate "
                f"{best.requests_per_second:g} requests/s per replica (limited by "
                f"{best.limited_by}, {best.prompt_tokens}-token prompts, {best.output_tokens}-"
                f"token outputs; {plan.source})⌉ = {replicas} replica(s)",
            )
        )
    if len(sized) == 2:
        replicas = max(sized[0][0], sized[1][0])
        return replicas, f"the larger of {sized[0][1]} and {sized[1][1]}"
    return sized[0]


def _resources(
    model: str, plan: ClassPlan, options: ExportOptions, node_class: NodeClass
) -> tuple[list[str], list[dict[str, Any]], int]:
    replicas, sizing = _replicas(model, plan, options, node_class)
    cpu = scaled_quantity(options.cpu_per_replica, replicas)
    memory = scaled_quantity(options.memory_per_replica, replicas)
    resources: list[dict[str, Any]] = [
        {
            "name": "cpu",
            "nominalQuota": Note(
                cpu, f"{sizing} × {options.cpu_per_replica} CPU per pod (--cpu-per-replica)"
            ),
        },
        {
            "name": "memory",
            "nominalQuota": Note(
                memory,
                f"{replicas} replica(s) × {options.memory_per_replica} per pod "
                "(--memory-per-replica)",
            ),
        },
    ]
    covered = ["cpu", "memory"]
    if node_class.accelerated:
        tp = plan.tensor_parallel
        resources.append(
            {
                "name": options.resource,
                "nominalQuota": Note(
                    replicas * tp,
                    f"{replicas} replica(s) × tensorParallel {tp} = {replicas * tp} "
                    f"{options.resource}; tokens/s measured on the slowest of "
                    f"{', '.join(node_class.nodes)}",
                ),
            }
        )
        covered.append(options.resource)
    return covered, resources, replicas


def _cluster_queue(
    model: str, plan: ClassPlan, options: ExportOptions, node_class: NodeClass
) -> dict[str, Any]:
    covered, resources, _ = _resources(model, plan, options, node_class)
    what = "cpu, memory and the accelerator" if node_class.accelerated else "cpu and memory"
    spec = {
        "cohortName": Note(
            options.cohort,
            "spec.cohortName (--cohort): queues of the same class lend each other idle quota",
        ),
        "namespaceSelector": {},
        "resourceGroups": [
            Note(
                {
                    "coveredResources": covered,
                    "flavors": [{"name": flavor_name(node_class), "resources": resources}],
                },
                f"every resource a serving pod requests ({what}): Kueue refuses a workload "
                "asking for one the queue does not cover",
            )
        ],
    }
    metadata = {"name": queue_name(model, node_class)}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": metadata, "spec": spec}


def _queues(
    model: str, options: ExportOptions, source: ExportSource
) -> list[tuple[str, dict[str, Any]]]:
    plans = by_model(source.plans)[model]
    classes = [c for c in source.node_classes if model in c.tokens_per_second]
    classes.sort(key=lambda c: (-c.tokens_per_second[model], c.label))
    others = len(classes) - 1
    documents: list[tuple[str, dict[str, Any]]] = []
    for node_class in classes:
        name = queue_name(model, node_class)
        alternative = (
            f" One of {len(classes)} alternatives for the same demand, one per class: serve "
            "from one of them (the quotas of the others stay idle, lent to their cohort)."
            if others
            else ""
        )
        documents.append(
            (
                f"{model} on {node_class.product}: {_demand(options)}, from "
                f"{source.description}.{alternative}",
                _cluster_queue(model, _plan_on(plans, node_class), options, node_class),
            )
        )
        local = {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": options.namespace},
            "spec": {"clusterQueue": name},
        }
        documents.append(
            (
                f"Where {model}'s serving pods on {node_class.product} queue: label the "
                f"Deployment {QUEUE_NAME_LABEL}: {name} (Kueue's webhook copies it to the pod "
                f"template), and give its "
                f"engine this class's flags (--target engine-args --class '{node_class.product}').",
                local,
            )
        )
    return documents


def _demand(options: ExportOptions) -> str:
    parts = []
    if options.tokens_per_second is not None:
        parts.append(f"{options.tokens_per_second:g} decode tokens/s")
    if options.request_rate is not None:
        parts.append(f"{options.request_rate:g} requests/s")
    return " and ".join(parts)


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """Flavors, the Cohort, and a ClusterQueue and LocalQueue per model and class."""
    if options.tokens_per_second is None and options.request_rate is None:
        raise NoDemand(
            "--target kueue needs --tokens-per-second (the decode tokens/s to serve) or "
            "--request-rate (the requests/s to serve)"
        )
    models = [
        m for m in source.models() if any(m in c.tokens_per_second for c in source.node_classes)
    ]
    if not models:
        raise NoDemand("no measured class of nodes has a plan's tokens/s for these models")
    documents: list[tuple[str, Any]] = [_flavor(c, options, source) for c in source.node_classes]
    documents.append(
        (
            "The cohort in which queues of the same class lend each other idle quota.",
            {"apiVersion": API, "kind": "Cohort", "metadata": {"name": options.cohort}, "spec": {}},
        )
    )
    for model in models:
        documents.extend(_queues(model, options, source))
    return documents
