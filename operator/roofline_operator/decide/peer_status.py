"""The fleet view (``peers.py``) in a profile's status.

* ``status.classes[]``: per measured product class, its device kind, node and device counts,
  the median bandwidth, peak and ridge point with their intervals, and the nodes slower than
  their peers;
* each listed node's ``gpuClass``, ``relativePerformance`` (its farthest GPU's ratio to each
  median, with the ratio's 95% interval), ``slowerGpus`` (the indices of its GPUs slower than
  their peers, on a node of several) and its ``SlowerThanPeers`` condition (naming each slower
  GPU on a node of several);
* each listed node's ``ProductLabelMismatch`` condition while its ``nvidia.com/gpu.product``
  label disagrees with the product it measured (``product_label.py``);
* the profile's own ``SlowerThanPeers`` condition, naming the slower nodes.

Bounded like the rest of the status: at most :data:`MAX_CLASSES` classes (the largest), and at
most :data:`MAX_NAMED_SLOWER` slower nodes named per class (``slower`` counts them all). Class
names are measured device names, at most 64 characters; ``slowerGpus`` holds at most one index
per GPU the pod measured (``plausibility.MAX_DEVICES``).

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline_operator.core.model_plans import STATUS_SIGNIFICANT_DIGITS
from roofline_operator.decide import product_label
from roofline_operator.decide.peers import (
    COMPARED,
    FleetView,
    PeerClass,
    Spread,
    Standing,
    describe,
)
from roofline_profiler.core.units import round_significant

#: Classes ``status.classes[]`` lists, the largest first (a fleet has a handful of products).
MAX_CLASSES = 32
#: Slower nodes a class entry names; ``slower`` counts them all.
MAX_NAMED_SLOWER = 10
#: Nodes the profile's condition names before it counts the rest.
MAX_NODES_IN_MESSAGE = 5
#: The type of the node entries' and the profile's condition.
CONDITION_TYPE = "SlowerThanPeers"
#: The type of a node entry's condition while its product label disagrees with what it measured.
MISMATCH_CONDITION_TYPE = "ProductLabelMismatch"


def _rounded(value: float) -> float | int:
    return round_significant(value, digits=STATUS_SIGNIFICANT_DIGITS)


def _spread(spread: Spread, name: str) -> dict[str, float | int]:
    low, high = _rounded(spread.low), _rounded(spread.high)
    return {name: _rounded(spread.value), "low": low, "high": high}


def class_entry(item: PeerClass, view: FleetView) -> dict[str, Any]:
    """One ``status.classes[]`` entry."""
    slower = [n for n in item.nodes if view.standings.get(n) and view.standings[n].slower]
    entry: dict[str, Any] = {
        "name": item.name,
        "device": item.device,
        "nodes": len(item.nodes),
        "devices": item.devices,
        **{c.headline.key: _spread(item.medians[c.quantity], "median") for c in COMPARED},
        "slower": len(slower),
    }
    if slower:
        entry["slowerNodes"] = slower[:MAX_NAMED_SLOWER]
    return entry


def classes_to_status(view: FleetView) -> list[dict[str, Any]]:
    """``status.classes[]``: the largest :data:`MAX_CLASSES` classes, by name."""
    largest = sorted(view.classes, key=lambda c: (-len(c.nodes), c.name))[:MAX_CLASSES]
    return [class_entry(c, view) for c in sorted(largest, key=lambda c: c.name)]


def standing_to_status(item: Standing) -> dict[str, Any]:
    """A node entry's ``gpuClass``, ``relativePerformance`` and, on a node of several GPUs with
    some slower than their peers, ``slowerGpus``."""
    fields: dict[str, Any] = {
        "gpuClass": item.gpu_class,
        "relativePerformance": {c.key: _spread(item.ratios[c.quantity], "ratio") for c in COMPARED},
    }
    if item.multi_device and item.slower_gpus():
        fields["slowerGpus"] = list(item.slower_gpus())
    return fields


def mismatch_condition(node: str, mismatch: product_label.LabelMismatch) -> tuple[bool, str, str]:
    """A node's ``ProductLabelMismatch`` condition as ``(status, reason, message)``."""
    message = (
        f"{product_label.describe(node, mismatch)} (check GPU Feature Discovery on the node, "
        "and who else may write its labels)"
    )
    return True, "LabelDisagrees", message


def node_condition(item: Standing, threshold_percent: int) -> tuple[bool, str, str]:
    """A node's ``SlowerThanPeers`` condition as ``(status, reason, message)``."""
    if item.slower:
        message = (
            f"{describe(item)}: more than {threshold_percent}% below its peers, beyond the "
            "uncertainty (throttling, power capping, a degraded link or a misconfigured node)"
        )
        return True, "BelowClassMedian", message
    message = (
        f"within {threshold_percent}% of the {item.gpu_class} medians, or within the uncertainty"
    )
    return False, "WithinPeers", message


def profile_condition(view: FleetView) -> tuple[bool, str, str]:
    """The profile's ``SlowerThanPeers`` condition: the slower nodes, or that there are none."""
    slower = view.slower_nodes()
    if not slower:
        ranked = len(view.standings)
        return False, "WithinPeers", f"no node of {ranked} with peers is slower than its peers"
    lines = [f"node {n}: {describe(view.standings[n])}" for n in slower[:MAX_NODES_IN_MESSAGE]]
    rest = len(slower) - MAX_NODES_IN_MESSAGE
    message = "; ".join(lines) + (f"; and {rest} more node(s)" if rest > 0 else "")
    return True, "BelowClassMedian", message


def _nodes_with_condition(status: Mapping[str, Any], condition_type: str) -> set[str]:
    """The nodes whose entry in a written status carries ``condition_type`` as True."""
    found: set[str] = set()
    for entry in status.get("nodes") or []:
        if not isinstance(entry, Mapping):
            continue
        for condition in entry.get("conditions") or []:
            if (
                isinstance(condition, Mapping)
                and condition.get("type") == condition_type
                and condition.get("status") == "True"
            ):
                found.add(str(entry.get("name")))
    return found


def mismatched_from_status(status: Mapping[str, Any]) -> frozenset[str]:
    """The nodes a written status says carry a product label that disagrees with what they
    measured: what a restarted operator announced already."""
    return frozenset(_nodes_with_condition(status, MISMATCH_CONDITION_TYPE))


def slower_from_status(status: Mapping[str, Any]) -> frozenset[str]:
    """The nodes a written status says are slower than their peers (its node entries'
    conditions and its classes' named nodes): what a restarted operator announced already."""
    found = _nodes_with_condition(status, CONDITION_TYPE)
    for item in status.get("classes") or []:
        if isinstance(item, Mapping) and isinstance(item.get("slowerNodes"), list):
            found.update(str(n) for n in item["slowerNodes"])
    return frozenset(found)
