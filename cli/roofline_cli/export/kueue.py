"""``--target kueue``: Kueue v0.17 (``kueue.x-k8s.io/v1beta2``) objects sized by measured tokens/s.

* one **ResourceFlavor** per measured class of nodes: the nodes whose ``roofline.dev/min-batch``
  label (the operator's) carries the same recommended min batch, and, from a status, its
  profile's ``roofline.dev/profile`` label; Kueue adds ``spec.nodeLabels`` to the admitted pods'
  node selector;
* one **Cohort**, in which the model queues borrow each other's unused quota;
* per model, a **ClusterQueue** whose ``nominalQuota`` per flavor is the GPUs that sustain the
  demand ``T`` (``--tokens-per-second``) on that flavor: ``⌈T / (tokens/s per replica × u)⌉``
  replicas of ``tensorParallel`` GPUs, ``u`` the planned share of the decode ceiling
  (``--utilization``, default 0.75: room for prefill, bursts and uneven routing). The flavors are
  alternatives for the same demand, fastest first, so Kueue fills the class that needs the fewest
  GPUs before the next. Its ``fairSharing.weight`` is the demand in GPUs of that fastest class
  (unrounded): fair sharing divides a queue's borrowed GPUs by its weight, so queues borrow in
  proportion to what their demand needs on the hardware that serves it, not by GPU count alone;
* per model, a **LocalQueue** in ``--namespace`` pointing at it.

Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note
from roofline_cli.export.options import ExportOptions, by_model, object_name
from roofline_cli.export.plans import ExportSource, NodeClass

API = "kueue.x-k8s.io/v1beta2"
PROFILE_LABEL = "roofline.dev/profile"
MIN_BATCH_LABEL = "roofline.dev/min-batch"


class NoDemand(ValueError):
    """Kueue quotas need the demand they serve."""


def flavor_name(node_class: NodeClass) -> str:
    return f"roofline-min-batch-{node_class.min_batch_label}"


def _flavor(node_class: NodeClass, source: ExportSource) -> tuple[str, dict[str, Any]]:
    labels: dict[str, Any] = {}
    if source.profile is not None:
        labels[PROFILE_LABEL] = Note(source.profile, "nodes the profile measured")
    labels[MIN_BATCH_LABEL] = Note(
        str(node_class.min_batch_label),
        f"the recommended min batch the operator measured on {', '.join(node_class.nodes)} "
        f"({', '.join(node_class.products)}, {node_class.gpus} device(s))",
    )
    spec = {"nodeLabels": Note(labels, "spec.nodeLabels: Kueue adds them to the pods' selector")}
    header = f"Measured class: nodes with min batch {node_class.min_batch_label}."
    document = {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(node_class)},
        "spec": spec,
    }
    return header, document


def _quota(model: str, tp: int, options: ExportOptions, node_class: NodeClass) -> tuple[int, str]:
    demand = options.tokens_per_second or 0.0
    rate = node_class.tokens_per_second[model]
    replicas = thresholds.replicas_for(rate, demand, options.utilization)
    return replicas * tp, (
        f"nominalQuota: ⌈{demand:g} tokens/s ÷ ({rate:.4g} tokens/s per replica at maxBatch × "
        f"{options.utilization:g})⌉ = {replicas} replica(s) × tensorParallel {tp} = "
        f"{replicas * tp} {options.resource}; tokens/s measured on the slowest of "
        f"{', '.join(node_class.nodes)}"
    )


def _cluster_queue(model: str, options: ExportOptions, source: ExportSource) -> dict[str, Any]:
    tp = by_model(source.plans)[model][0].tensor_parallel
    classes = [c for c in source.node_classes if model in c.tokens_per_second]
    classes.sort(key=lambda c: (-c.tokens_per_second[model], c.min_batch_label))
    flavors = []
    for node_class in classes:
        quota, how = _quota(model, tp, options, node_class)
        resources = [{"name": options.resource, "nominalQuota": Note(quota, how)}]
        flavors.append({"name": flavor_name(node_class), "resources": resources})
    fastest = classes[0].tokens_per_second[model]
    weight = (options.tokens_per_second or 0.0) / (fastest * options.utilization) * tp
    spec = {
        "cohortName": options.cohort,
        "namespaceSelector": {},
        "resourceGroups": [
            Note(
                {"coveredResources": [options.resource], "flavors": flavors},
                "the flavors are alternatives for the same demand, fastest first",
            )
        ],
        "fairSharing": {
            "weight": Note(
                f"{weight:.2f}",
                f"fairSharing.weight: the demand in {options.resource} of the fastest class, "
                f"{options.tokens_per_second:g} ÷ ({fastest:.4g} × {options.utilization:g}) × "
                f"{tp}: queues borrow in proportion to what their demand needs",
            )
        },
    }
    metadata = {"name": object_name(model)}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": metadata, "spec": spec}


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """Flavors, the Cohort, and a ClusterQueue and LocalQueue per model."""
    if options.tokens_per_second is None:
        raise NoDemand("--target kueue needs --tokens-per-second: the decode tokens/s to serve")
    models = [
        m for m in source.models() if any(m in c.tokens_per_second for c in source.node_classes)
    ]
    if not models:
        raise NoDemand("no measured class of nodes has a plan's tokens/s for these models")
    documents: list[tuple[str, Any]] = [_flavor(c, source) for c in source.node_classes]
    documents.append(
        (
            "The cohort in which the model queues share unused quota.",
            {"apiVersion": API, "kind": "Cohort", "metadata": {"name": options.cohort}, "spec": {}},
        )
    )
    for model in models:
        documents.append(
            (
                f"{model}: {options.tokens_per_second:g} decode tokens/s, from "
                f"{source.description}.",
                _cluster_queue(model, options, source),
            )
        )
        local = {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": object_name(model), "namespace": options.namespace},
            "spec": {"clusterQueue": object_name(model)},
        }
        documents.append((f"Where {model}'s serving workloads queue.", local))
    return documents
