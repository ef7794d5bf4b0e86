"""The profile's status: per-node entries, the summary and the conditions.

Counting rules: a node is *failed* while its latest attempt failed, *unschedulable* while its
latest pod could not be scheduled (busy GPUs: not a failure), otherwise *profiled* when it holds a
result under the current spec, otherwise *pending*; the four add up to *matched*.

``status.nodes[]`` is bounded: a real API server stores at most about 1.5 MiB per object, and a
full entry takes about 1 KiB for a single-GPU node with two models, up to 8.5 KB for eight GPUs,
eight models and a failure message, which ``sizes.py`` trims to its 6 KiB budget. It lists
full entries for at most ``max_nodes`` nodes, those that need attention first (failed, then
materially changed, then pending), then the rest by name; the summary says how many are listed
and how many omitted. The aggregates (``summary``, ``status.models[]``, the conditions) always
cover every node. Every node's publication also lives in its own record annotation
(``records.py``).
"""

from __future__ import annotations

import heapq
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline_operator.core.names import NodeState, format_time
from roofline_operator.decide import model_classes, model_status, peer_status, sizes
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.peers import FleetView
from roofline_operator.decide.records import NodeRecord, record_to_status

#: Decimals of the ridge points in ``status.summary``: enough to tell GPUs apart, and no float
#: noise (``3.9225000000000003``) in ``kubectl get``.
RIDGE_POINT_DECIMALS = 2
#: Nodes named in a condition message before the rest is summed up as "and N more".
MAX_NODES_IN_MESSAGE = 5
#: Default of the operator setting ``--status-max-nodes``: 100 full entries of at most 6 KiB
#: each (``sizes.STATUS_ENTRY_BUDGET_BYTES``) take at most 600 KiB.
DEFAULT_STATUS_MAX_NODES = 100
#: The order in which node categories claim the listed places (``listing_order``).
LISTING_PRIORITY = {
    "failed": 0,
    "unschedulable": 1,
    "changed": 2,
    "unavailable": 3,
    "pending": 3,
    "profiled": 4,
}


def node_category(record: NodeRecord, spec_hash: str) -> str:
    if record.state in (NodeState.RETRYING, NodeState.FAILED):
        return "failed"
    if record.state is NodeState.UNAVAILABLE:
        return "unavailable"
    if record.state is NodeState.UNSCHEDULABLE:
        return "unschedulable"
    if record.result is not None and record.result.spec_hash == spec_hash:
        return "profiled"
    return "pending"


def summarize(records: Mapping[str, NodeRecord], spec_hash: str) -> dict[str, Any]:
    """``status.summary``; ``recommendedMinBatch`` is the largest per-node recommendation.

    The largest, because a batch size chosen for a whole pool must keep its slowest-to-saturate
    node past the roofline's ridge (Williams, Waterman, Patterson 2009), not just the median one.
    """
    counts = Counter(node_category(r, spec_hash) for r in records.values())
    results = [r.result for r in records.values() if r.result is not None]
    summary: dict[str, Any] = {
        "matched": len(records),
        "profiled": counts["profiled"],
        "failed": counts["failed"],
        "pending": counts["pending"],
        "unschedulable": counts["unschedulable"],
    }
    if counts["unavailable"]:
        summary["unavailable"] = counts["unavailable"]
    if results:
        worst = [r.worst_gpu() for r in results]
        ridges = [g.ridge_point for g in worst]
        summary.update(
            minRidgePoint=round(min(ridges), RIDGE_POINT_DECIMALS),
            medianRidgePoint=round(statistics.median(ridges), RIDGE_POINT_DECIMALS),
            maxRidgePoint=round(max(ridges), RIDGE_POINT_DECIMALS),
            recommendedMinBatch=max(g.recommended_min_batch for g in worst),
        )
    return summary


def listing_category(record: NodeRecord, spec_hash: str, slower: bool = False) -> str:
    """``node_category``, with nodes whose latest profile changed materially, or that are slower
    than their peers (``peers.py``), apart."""
    category = node_category(record, spec_hash)
    if category == "profiled" and (record.change or slower):
        return "changed"
    return category


def listing_order(
    records: Mapping[str, NodeRecord], spec_hash: str, slower: frozenset[str] = frozenset()
) -> list[str]:
    """Node names in the order they claim ``status.nodes[]`` places: failed, changed or slower
    than their peers, pending, then the rest, each by name."""
    return sorted(records, key=lambda name: _listing_key(records, name, spec_hash, slower))


def _listing_key(
    records: Mapping[str, NodeRecord], name: str, spec_hash: str, slower: frozenset[str]
) -> tuple[int, str]:
    category = listing_category(records[name], spec_hash, name in slower)
    return (LISTING_PRIORITY[category], name)


def listed_nodes(
    records: Mapping[str, NodeRecord],
    spec_hash: str,
    max_nodes: int | None,
    slower: frozenset[str] = frozenset(),
) -> list[str]:
    """The nodes ``status.nodes[]`` lists (at most ``max_nodes``; all for ``None``), by name."""
    if max_nodes is None or len(records) <= max_nodes:
        return sorted(records)
    first = heapq.nsmallest(
        max_nodes, records, key=lambda name: _listing_key(records, name, spec_hash, slower)
    )
    return sorted(first)


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str


def _names(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:MAX_NODES_IN_MESSAGE])
    rest = len(nodes) - MAX_NODES_IN_MESSAGE
    return f"{shown} and {rest} more" if rest > 0 else shown


def desired_conditions(
    records: Mapping[str, NodeRecord],
    spec_hash: str,
    conflicts: Mapping[str, str],
    spec_error: str | None,
) -> list[Condition]:
    if spec_error is not None:
        return [Condition("Ready", False, "InvalidSpec", spec_error)]
    counts = Counter(node_category(r, spec_hash) for r in records.values())
    reasons = Counter(r.reason for r in records.values() if node_category(r, spec_hash) == "failed")
    if not records:
        ready = Condition("Ready", False, "NoMatchingNodes", "no Ready node matches the selector")
    elif counts["failed"]:
        ready = Condition("Ready", False, "NodesFailed", f"{counts['failed']} node(s) failed")
    elif counts["unschedulable"]:
        message = (
            f"{counts['unschedulable']} node(s) could not schedule a profiler pod (see "
            "status.nodes[].message); they are tried again later"
        )
        ready = Condition("Ready", False, "NodesUnschedulable", message)
    elif counts["pending"]:
        message = f"{counts['profiled']} of {len(records)} node(s) profiled"
        ready = Condition("Ready", False, "Profiling", message)
    else:
        ready = Condition("Ready", True, "Profiled", f"all {len(records)} node(s) profiled")
    if reasons:
        detail = ", ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items(), key=str))
        degraded = Condition("Degraded", True, "NodesFailed", f"failed nodes by reason: {detail}")
    else:
        degraded = Condition("Degraded", False, "NoFailures", "no node failed")
    if conflicts:
        by_owner: dict[str, list[str]] = {}
        for node, owner in sorted(conflicts.items()):
            by_owner.setdefault(owner, []).append(node)
        message = "; ".join(
            f"labels of {_names(nodes)} are owned by the older profile {owner}"
            for owner, nodes in by_owner.items()
        )
        conflict = Condition("LabelConflict", True, "OwnedByOlderProfile", message)
    else:
        conflict = Condition("LabelConflict", False, "NoConflict", "no selected node is shared")
    return [ready, degraded, conflict, device_changed_condition(records)]


def device_changed_condition(records: Mapping[str, NodeRecord]) -> Condition:
    """``DeviceChanged``: true while a node's latest profile changed a published number by more
    than the threshold (and more than its uncertainty); the next profile within noise clears it."""
    changed = sorted((name, r.change) for name, r in records.items() if r.change)
    if not changed:
        return Condition(
            "DeviceChanged",
            False,
            "NoMaterialChange",
            "no node's latest profile changed materially",
        )
    shown = "; ".join(f"node {name}: {change}" for name, change in changed[:MAX_NODES_IN_MESSAGE])
    rest = len(changed) - MAX_NODES_IN_MESSAGE
    message = f"{shown}; and {rest} more node(s)" if rest > 0 else shown
    return Condition("DeviceChanged", True, "MaterialChange", message)


def merge_conditions(
    previous: Sequence[Mapping[str, Any]],
    desired: Sequence[Condition],
    generation: int | None,
    now: float,
) -> list[dict[str, Any]]:
    """Conditions with ``lastTransitionTime`` kept unless the status value actually flips."""
    before = {c.get("type"): c for c in previous if isinstance(c, Mapping)}
    merged = []
    for condition in desired:
        status = "True" if condition.status else "False"
        old = before.get(condition.type)
        keep = old is not None and old.get("status") == status and old.get("lastTransitionTime")
        entry: dict[str, Any] = {
            "type": condition.type,
            "status": status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": old["lastTransitionTime"] if keep and old else format_time(now),
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        merged.append(entry)
    return merged


def build_status(
    *,
    records: Mapping[str, NodeRecord],
    spec_hash: str,
    conflicts: Mapping[str, str],
    spec_error: str | None,
    previous_conditions: Sequence[Mapping[str, Any]],
    generation: int | None,
    now: float,
    models: ModelsView | None = None,
    max_nodes: int | None = DEFAULT_STATUS_MAX_NODES,
    peers: FleetView | None = None,
    previous_nodes: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The whole operator-owned part of ``status`` (``status.kopf`` is Kopf's and left alone).

    ``previous_nodes``: the node entries written before, whose conditions keep their
    ``lastTransitionTime`` while their status holds.
    """
    conditions = desired_conditions(records, spec_hash, conflicts, spec_error)
    attention = peers.attention_nodes() if peers is not None else frozenset()
    listed = listed_nodes(records, spec_hash, max_nodes, attention)
    summary = summarize(records, spec_hash)
    summary.update(listed=len(listed), omitted=len(records) - len(listed))
    status: dict[str, Any] = {
        "summary": summary,
        "nodes": [record_to_status(records[name]) for name in listed],
        "conditions": [],
    }
    _add_models(status, records, spec_hash, models or ModelsView(), conditions)
    if peers is not None and spec_error is None:
        _add_peers(status, peers, conditions, previous_nodes, generation, now)
    status["nodes"] = [
        sizes.fit(entry, sizes.STATUS_ENTRY_BUDGET_BYTES) for entry in status["nodes"]
    ]
    status["conditions"] = merge_conditions(previous_conditions, conditions, generation, now)
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def _add_models(
    status: dict[str, Any],
    records: Mapping[str, NodeRecord],
    spec_hash: str,
    view: ModelsView,
    conditions: list[Condition],
) -> None:
    """Model entries of the listed nodes; the per-model summary over every node, and
    ``ModelsReady``, following the spec."""
    listed = {entry["name"]: entry for entry in status["nodes"]}
    per_node = []
    products = []
    for name, record in records.items():
        current = record.result is not None and record.result.spec_hash == spec_hash
        entries = model_status.node_model_entries(record.result, current, view)
        entry = listed.get(name)
        if entry is not None:
            entry.pop("models", None)
            if entries:
                entry["models"] = entries
        per_node.append(entries)
        if record.result is not None:
            products.append((name, record.result.worst_gpu().product, entries))
    if not view.models:
        return
    summary = model_status.models_summary(per_node, view)
    model_classes.add_classes(summary, products)
    status["models"] = summary
    status["summary"]["models"] = model_status.planned_models(summary)
    ready = model_status.models_condition(view, summary)
    if ready is not None:
        conditions.append(Condition("ModelsReady", *ready))


def _add_peers(
    status: dict[str, Any],
    view: FleetView,
    conditions: list[Condition],
    previous_nodes: Sequence[Mapping[str, Any]],
    generation: int | None,
    now: float,
) -> None:
    """The fleet view: ``status.classes[]``, each listed node's standing and conditions
    (``SlowerThanPeers``, ``ProductLabelMismatch``), the counts of slower and mislabelled nodes
    and the profile's ``SlowerThanPeers`` condition."""
    before = {e.get("name"): e for e in previous_nodes if isinstance(e, Mapping)}
    for entry in status["nodes"]:
        name = entry["name"]
        desired = []
        item = view.standings.get(name)
        if item is not None:
            entry.update(peer_status.standing_to_status(item))
            desired.append(
                Condition(
                    peer_status.CONDITION_TYPE,
                    *peer_status.node_condition(item, view.threshold_percent),
                )
            )
        mismatch = view.mismatches.get(name)
        if mismatch is not None:
            desired.append(
                Condition(
                    peer_status.MISMATCH_CONDITION_TYPE,
                    *peer_status.mismatch_condition(name, mismatch),
                )
            )
        if desired:
            previous = (before.get(name) or {}).get("conditions") or []
            entry["conditions"] = merge_conditions(previous, desired, generation, now)
    if view.classes:
        status["classes"] = peer_status.classes_to_status(view)
        status["summary"]["slowerThanPeers"] = len(view.slower_nodes())
    if view.mismatches:
        status["summary"]["productLabelMismatches"] = len(view.mismatches)
    conditions.append(Condition(peer_status.CONDITION_TYPE, *peer_status.profile_condition(view)))


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``; empty if equal.

    Keys missing from ``new`` become ``None`` (deleted), nested objects are diffed key by key,
    lists and scalars are replaced whole.
    """
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif before != value or key not in old:
            patch[key] = value
    return patch
