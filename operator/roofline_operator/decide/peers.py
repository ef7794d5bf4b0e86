"""The fleet view: each GPU product class's medians, and every node's standing among its peers.

A node's *class* is the GPU product its Node object is labelled with by GPU Feature Discovery
(``nvidia.com/gpu.product``), else the device name its profile reported: nodes of one class run
the same silicon, so the same dtype and weight shape should measure the same roofline on each,
within their uncertainty. A node far below its class's median is throttled, misconfigured or
failing (the runbook's ``RooflineNodeSlowerThanPeers``).

For each class and each compared number (bandwidth, peak, ridge point) the view holds the median
of the nodes' published values, with an interval: the median of the intervals' low ends to the
median of their high ends. The median is non-decreasing in each of its arguments, so whenever
every node's true value lies in its 95% interval the class's true median lies in that one. Each
node's ratio to the median takes its interval by interval division (its own low end over the
median's high end, its high end over the median's low end), which covers the true ratio whenever
both intervals cover theirs.

A node is *slower than its peers* on bandwidth or peak (a higher ridge point is not slower) when,
as for a published number's material change (``hysteresis.py``), the gap is both material and
beyond noise: its ratio is below ``1 − outlierThresholdPercent/100`` and the ratio's whole
interval lies below 1. A class of one node has no peers, and no standing.

Only results measured under the profile's current spec count (one dtype, one weight shape, one
image), and a node's numbers are those of its worst GPU, the ones its labels describe.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from roofline_operator.core.node_results import NodeResult
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.core.spec import DEFAULT_OUTLIER_THRESHOLD_PERCENT
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.core import plausibility
from roofline_profiler.wire import fields

#: The Node label that names a GPU's product (GPU Feature Discovery); the class of a node.
PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Nodes a class needs before its members have a standing: one node has no peers.
MIN_CLASS_NODES = 2
#: The largest ratio the view publishes.
MAX_RATIO = 1e6


@dataclass(frozen=True)
class Compared:
    """One number compared among peers: its headline field, and its key in the status."""

    headline: fields.HeadlineField
    #: The key of the ratio in ``status.nodes[].relativePerformance``.
    key: str
    #: Whether a value below the median means a slower node (bandwidth, peak; not the ridge).
    slower_below: bool

    @property
    def quantity(self) -> str:
        return self.headline.quantity


def _headline(quantity: str) -> fields.HeadlineField:
    return next(f for f in fields.DEVICE_HEADLINE if f.quantity == quantity)


#: The numbers the view compares, in the order of every published form.
COMPARED: tuple[Compared, ...] = (
    Compared(_headline("bandwidth"), "bandwidth", slower_below=True),
    Compared(_headline("peak"), "peak", slower_below=True),
    Compared(_headline("ridge point"), "ridgePoint", slower_below=False),
)


@dataclass(frozen=True)
class Spread:
    """A value with its interval ``low ≤ value ≤ high``: a class's median, or a node's ratio."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Member:
    """A node as the view compares it: its class and its worst GPU's published numbers."""

    node: str
    gpu_class: str
    numbers: fields.Numbers


@dataclass(frozen=True)
class Standing:
    """A node's ratios to its class's medians (by quantity) and where it is slower."""

    node: str
    gpu_class: str
    ratios: Mapping[str, Spread]
    #: The quantities on which the node is slower than its peers, in :data:`COMPARED` order.
    slower: tuple[str, ...] = ()


@dataclass(frozen=True)
class PeerClass:
    """One GPU product class: its nodes (by name) and its medians (by quantity)."""

    name: str
    nodes: tuple[str, ...]
    medians: Mapping[str, Spread]


@dataclass(frozen=True)
class FleetView:
    """Every class of a profile's profiled nodes and every node's standing in its class."""

    classes: tuple[PeerClass, ...] = ()
    standings: Mapping[str, Standing] = field(default_factory=dict)
    threshold_percent: int = DEFAULT_OUTLIER_THRESHOLD_PERCENT

    def slower_nodes(self) -> tuple[str, ...]:
        """The nodes slower than their peers, by name."""
        return tuple(sorted(n for n, s in self.standings.items() if s.slower))


def gpu_class(labels: Mapping[str, str], result: NodeResult) -> str:
    """The node's product label when it has a usable one, else its worst GPU's device name."""
    label = labels.get(PRODUCT_LABEL)
    if isinstance(label, str) and plausibility.DEVICE_NAME.fullmatch(label):
        return label
    return result.worst_gpu().product


def members(
    records: Mapping[str, NodeRecord], nodes: Mapping[str, NodeFacts], spec_hash: str
) -> list[Member]:
    """The nodes with a published result under the current spec, each with its class."""
    found = []
    for name in sorted(records):
        result = records[name].result
        if result is None or result.spec_hash != spec_hash:
            continue
        facts = nodes.get(name)
        labels = facts.labels if facts is not None else {}
        found.append(Member(name, gpu_class(labels, result), result.worst_gpu().numbers))
    return found


def _bounds(number: fields.Estimate) -> tuple[float, float]:
    """A published number's interval; a number published without one counts as exact."""
    return number.interval if number.interval is not None else (number.value, number.value)


def class_median(numbers: Sequence[fields.Estimate]) -> Spread:
    """The median of the values, within the medians of the intervals' ends."""
    lows, highs = zip(*(_bounds(n) for n in numbers), strict=True)
    return Spread(
        statistics.median(n.value for n in numbers),
        statistics.median(lows),
        statistics.median(highs),
    )


def ratio_to(number: fields.Estimate, median: Spread) -> Spread:
    """``number ÷ median`` with its interval by interval division, each end at most
    :data:`MAX_RATIO` (a median interval reaching zero, which no plausible published number has,
    would make it unbounded, and the status and gauges hold finite numbers only)."""
    low, high = _bounds(number)

    def divided(top: float, bottom: float) -> float:
        return min(top / bottom, MAX_RATIO) if bottom > 0 else MAX_RATIO

    value = divided(number.value, median.value)
    return Spread(
        value, min(divided(low, median.high), value), max(divided(high, median.low), value)
    )


def is_slower(ratio: Spread, threshold_percent: int) -> bool:
    """Material (below ``1 − threshold``) and beyond noise (the whole interval below 1)."""
    return ratio.value < 1 - threshold_percent / 100 and ratio.high < 1


def standing(member: Member, medians: Mapping[str, Spread], threshold_percent: int) -> Standing:
    ratios = {
        c.quantity: ratio_to(member.numbers[c.headline.attribute], medians[c.quantity])
        for c in COMPARED
    }
    slower = tuple(
        c.quantity
        for c in COMPARED
        if c.slower_below and is_slower(ratios[c.quantity], threshold_percent)
    )
    return Standing(member.node, member.gpu_class, ratios, slower)


def fleet_view(
    found: Sequence[Member], threshold_percent: int = DEFAULT_OUTLIER_THRESHOLD_PERCENT
) -> FleetView:
    """The classes of ``found`` (by name) and the standing of every node in a class of at least
    :data:`MIN_CLASS_NODES` nodes."""
    by_class: dict[str, list[Member]] = {}
    for member in found:
        by_class.setdefault(member.gpu_class, []).append(member)
    classes = []
    standings: dict[str, Standing] = {}
    for name in sorted(by_class):
        group = by_class[name]
        medians = {
            c.quantity: class_median([m.numbers[c.headline.attribute] for m in group])
            for c in COMPARED
        }
        classes.append(PeerClass(name, tuple(m.node for m in group), medians))
        if len(group) < MIN_CLASS_NODES:
            continue
        for member in group:
            standings[member.node] = standing(member, medians, threshold_percent)
    return FleetView(tuple(classes), standings, threshold_percent)


def describe(item: Standing) -> str:
    """What makes a node slower, for messages: ``bandwidth 0.80 of the class median (95% 0.78
    to 0.82)``, one clause per slower quantity."""
    return ", ".join(
        f"{q} {_ratio_text(item.ratios[q].value)} of the {item.gpu_class} median "
        f"(95% {_ratio_text(item.ratios[q].low)} to {_ratio_text(item.ratios[q].high)})"
        for q in item.slower
    )


def _ratio_text(value: float) -> str:
    return f"{value:.2f}"
