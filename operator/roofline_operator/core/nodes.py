"""Nodes as the operator sees them, and which of them a profile selects.

The rules mirror what the scheduler would do with the profiler pod (node selector, node affinity
terms, taints and tolerations, allocatable GPUs), so the operator never creates a pod that can
only sit Pending, and a cordoned or NotReady node is simply not profiled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from roofline_operator.core.names import ANNOTATION_RECORD_PREFIX, UNSCHEDULABLE_TAINT
from roofline_operator.core.selection_spec import MatchExpression, NodeSelection, Toleration
from roofline_profiler.core import plausibility

#: Taint effects that keep a pod off a node; ``PreferNoSchedule`` does not.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None
    effect: str


@dataclass(frozen=True)
class NodeFacts:
    """The few fields of a Node that selection, labelling and restarts need (``cache.py``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: Mapping[str, str] = field(default_factory=dict)
    #: The node's record annotations (``records.py``), by annotation key: one per profile.
    records: Mapping[str, str] = field(default_factory=dict)
    #: ``metadata.resourceVersion``: changes with every write the watch has delivered.
    resource_version: str = ""

    def gpu_count(self, resource: str) -> int:
        """Allocatable units of an extended resource; extended resources are whole numbers.
        More than :data:`~roofline_profiler.core.plausibility.MAX_GPU_UNITS` (no real node)
        counts as none, so a record never holds a count its restore refuses."""
        text = str(self.allocatable.get(resource, "0"))
        if len(text) > 12:
            return 0
        try:
            count = int(text)
        except ValueError:
            return 0
        return count if count <= plausibility.MAX_GPU_UNITS else 0


def node_facts(body: Mapping[str, Any]) -> NodeFacts:
    """Extract :class:`NodeFacts` from a Node object as served by the API."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    taints = tuple(
        Taint(key=str(t.get("key", "")), value=t.get("value"), effect=str(t.get("effect", "")))
        for t in spec.get("taints") or []
    )
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return NodeFacts(
        name=str(metadata.get("name", "")),
        labels=dict(metadata.get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        allocatable={str(k): str(v) for k, v in (status.get("allocatable") or {}).items()},
        records={
            str(k): str(v)
            for k, v in (metadata.get("annotations") or {}).items()
            if str(k).startswith(ANNOTATION_RECORD_PREFIX)
        },
        resource_version=str(metadata.get("resourceVersion", "")),
    )


def _expression_matches(expression: MatchExpression, labels: Mapping[str, str]) -> bool:
    value = labels.get(expression.key)
    match expression.operator:
        case "In":
            return value is not None and value in expression.values
        case "NotIn":
            return value is None or value not in expression.values
        case "Exists":
            return value is not None
        case "DoesNotExist":
            return value is None
        case "Gt" | "Lt":
            try:
                number, bound = int(value or ""), int(expression.values[0])
            except ValueError:
                return False
            return number > bound if expression.operator == "Gt" else number < bound
    return False


def labels_match(selection: NodeSelection, labels: Mapping[str, str]) -> bool:
    """``nodeSelector`` AND (any term of ANDed match expressions), as in node affinity."""
    if any(labels.get(k) != v for k, v in selection.node_selector.items()):
        return False
    if not selection.terms:
        return True
    return any(all(_expression_matches(e, labels) for e in term) for term in selection.terms)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """The scheduler's rule: an empty effect matches all, ``Exists`` with no key matches all."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return toleration.key is None or toleration.key == taint.key
    return toleration.key == taint.key and (toleration.value or "") == (taint.value or "")


def blocking_taints(node: NodeFacts) -> tuple[Taint, ...]:
    """Taints that keep pods off the node; a cordon counts even if no taint was written."""
    taints = [t for t in node.taints if t.effect in BLOCKING_EFFECTS]
    if node.unschedulable and not any(t.key == UNSCHEDULABLE_TAINT for t in taints):
        taints.append(Taint(key=UNSCHEDULABLE_TAINT, value=None, effect="NoSchedule"))
    return tuple(taints)


def gpus_to_request(node: NodeFacts, selection: NodeSelection) -> int:
    """GPUs the profiler pod on ``node`` requests: the spec's count, else all allocatable ones;
    a CPU profile's one device is the CPU (and its pod requests no GPU)."""
    if selection.measures_cpu:
        return 1
    if selection.gpus_per_node is not None:
        return selection.gpus_per_node
    return node.gpu_count(selection.gpu_resource)


def is_selected(node: NodeFacts, selection: NodeSelection) -> bool:
    if not node.ready or not labels_match(selection, node.labels):
        return False
    available = node.gpu_count(selection.gpu_resource)
    if not selection.measures_cpu and available < max(selection.gpus_per_node or 1, 1):
        return False
    return all(
        any(tolerates(t, taint) for t in selection.tolerations) for taint in blocking_taints(node)
    )


def unavailable_reason(node: NodeFacts, selection: NodeSelection) -> str:
    """Why a node whose labels match is not selected, as the end of a sentence."""
    if not node.ready:
        return "is not Ready"
    available = node.gpu_count(selection.gpu_resource)
    if not selection.measures_cpu and available < max(selection.gpus_per_node or 1, 1):
        return f"has {available} allocatable {selection.gpu_resource}"
    keys = [
        t.key
        for t in blocking_taints(node)
        if not any(tolerates(tol, t) for tol in selection.tolerations)
    ]
    return f"has untolerated taints {', '.join(sorted(keys))}" if keys else "is not schedulable"


def select_nodes(nodes: Iterable[NodeFacts], selection: NodeSelection) -> dict[str, int]:
    """Selected node names mapped to the number of GPUs to profile on each, sorted by name."""
    chosen = {n.name: gpus_to_request(n, selection) for n in nodes if is_selected(n, selection)}
    return dict(sorted(chosen.items()))
