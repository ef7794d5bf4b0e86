"""The fleet view: each device class's medians, and every node's standing among its peers.

A device's *class* is what its own profiler pod measured: the product name of a GPU, the model
name of a CPU for a ``device: cpu`` profile, together with that device kind, so a CPU and a GPU
never share a class. Devices of one class run the same silicon, so the same dtype and weight shape
should measure the same roofline on each, within their uncertainty. A device far below its class's
median is throttled, power-capped, misconfigured or failing (the runbook's
``RooflineNodeSlowerThanPeers``). No Node label moves a device into a class: GPU Feature
Discovery's ``nvidia.com/gpu.product`` is writable by the node's kubelet, node agents and NFD
writers, so it is only a cross-check of the measured product (``product_label.py``).

For each class and each compared number (bandwidth, peak, ridge point) the view holds the median
of the devices' published values, with an interval: the median of the intervals' low ends to the
median of their high ends. The median is non-decreasing in each of its arguments, so whenever
every device's true value lies in its 95% interval the class's true median lies in that one. Each
device's ratio to the median takes its interval by interval division (its own low end over the
median's high end, its high end over the median's low end), which covers the true ratio whenever
both intervals cover theirs.

A device is *slower than its peers* on bandwidth or peak (a higher ridge point is not slower)
when, as for a published number's material change (``hysteresis.py``), the gap is both material
and beyond noise: its ratio is below ``1 − outlierThresholdPercent/100`` and the ratio's whole
interval lies below 1. Every GPU of a multi-GPU node is compared, each with its own interval (a
GPU capped to 60% of its power lowers its own numbers, not the node's worst GPU's); a node is
slower when any of its GPUs is, and its published ratio on each quantity is its farthest GPU's
(the lowest bandwidth or peak ratio, the highest ridge point ratio), preferring a GPU that is
slower on it. A class of one device has no peers, and no standing.

Only results measured under the profile's current spec count (one device kind, dtype, weight shape
and image).

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from roofline_operator.core.node_results import GpuResult, NodeResult
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.core.spec import DEFAULT_OUTLIER_THRESHOLD_PERCENT
from roofline_operator.decide.product_label import LabelMismatch, label_mismatch
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire import fields

#: Devices a class needs before its members have a standing: one device has no peers (the GPUs
#: of one multi-GPU node are peers of each other).
MIN_CLASS_DEVICES = 2
#: The device kind of a class when none is said (``spec.device``).
DEFAULT_DEVICE = "gpu"
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
    """One measured device of a node as the view compares it: its class (the product it
    measured) and its published numbers."""

    node: str
    gpu_class: str
    numbers: fields.Numbers
    #: The device's index on its node (``status.nodes[].devices[].index``).
    gpu: int = 0
    #: The device kind the class is of (``spec.device``: ``gpu`` or ``cpu``).
    device: str = DEFAULT_DEVICE

    @property
    def class_key(self) -> tuple[str, str]:
        return (self.device, self.gpu_class)


@dataclass(frozen=True)
class DeviceStanding:
    """One device's ratios to its class's medians (by quantity) and where it is slower."""

    gpu: int
    gpu_class: str
    ratios: Mapping[str, Spread]
    #: The quantities on which the device is slower than its peers, in :data:`COMPARED` order.
    slower: tuple[str, ...] = ()


@dataclass(frozen=True)
class Standing:
    """A node's ratios to its class's medians (by quantity: its farthest device's) and where
    it is slower (on any device)."""

    node: str
    gpu_class: str
    ratios: Mapping[str, Spread]
    #: The quantities on which the node is slower than its peers, in :data:`COMPARED` order.
    slower: tuple[str, ...] = ()
    #: Every compared device of the node, by index; empty for a standing built by hand, which
    #: stands for one device of the node's class.
    devices: tuple[DeviceStanding, ...] = ()

    def slower_gpus(self) -> tuple[int, ...]:
        """The indices of the node's devices slower than their peers."""
        return tuple(d.gpu for d in self.devices if d.slower)

    @property
    def multi_device(self) -> bool:
        return len(self.devices) > 1


@dataclass(frozen=True)
class PeerClass:
    """One device class: its nodes (by name), its medians (by quantity), its device kind and
    how many devices it holds."""

    name: str
    nodes: tuple[str, ...]
    medians: Mapping[str, Spread]
    device: str = DEFAULT_DEVICE
    devices: int = 0


@dataclass(frozen=True)
class FleetView:
    """Every class of a profile's profiled devices, every node's standing in its class, and
    the nodes whose product label disagrees with what they measured."""

    classes: tuple[PeerClass, ...] = ()
    standings: Mapping[str, Standing] = field(default_factory=dict)
    threshold_percent: int = DEFAULT_OUTLIER_THRESHOLD_PERCENT
    mismatches: Mapping[str, LabelMismatch] = field(default_factory=dict)

    def slower_nodes(self) -> tuple[str, ...]:
        """The nodes slower than their peers, by name."""
        return tuple(sorted(n for n, s in self.standings.items() if s.slower))

    def attention_nodes(self) -> frozenset[str]:
        """The nodes a reader should see first: slower than their peers, or labelled as
        another product than they measured."""
        return frozenset(self.slower_nodes()) | frozenset(self.mismatches)


def current_results(
    records: Mapping[str, NodeRecord], spec_hash: str
) -> list[tuple[str, NodeResult]]:
    """The nodes with a published result under the current spec, by name."""
    found = []
    for name in sorted(records):
        result = records[name].result
        if result is not None and result.spec_hash == spec_hash:
            found.append((name, result))
    return found


def members(
    records: Mapping[str, NodeRecord], spec_hash: str, device: str = DEFAULT_DEVICE
) -> list[Member]:
    """Every device of the nodes with a published result under the current spec, each in the
    class of the product it measured and of the device kind its result names (``device``, the
    profile's ``spec.device``, for a result restored without one). No Node label is read: see
    :func:`mismatches`."""
    return [
        Member(name, gpu.product, gpu.numbers, gpu.index, result.device_or(device))
        for name, result in current_results(records, spec_hash)
        for gpu in _worst_first(result)
    ]


def _worst_first(result: NodeResult) -> list[GpuResult]:
    """The node's devices, the one its labels and status entry describe first: its class is
    the node's (``roofline.dev/class``, ``gpuClass``)."""
    worst = result.worst_gpu()
    return [worst, *(g for g in result.gpus if g is not worst)]


def mismatches(
    records: Mapping[str, NodeRecord],
    nodes: Mapping[str, NodeFacts],
    spec_hash: str,
    device: str = DEFAULT_DEVICE,
) -> dict[str, LabelMismatch]:
    """The nodes whose GPU product label disagrees with the products their pods measured. A
    CPU profile measured no GPU: the GPU label says nothing of its numbers."""
    found = {}
    for name, result in current_results(records, spec_hash):
        if result.device_or(device) != DEFAULT_DEVICE:
            continue
        facts = nodes.get(name)
        mismatch = label_mismatch(facts.labels, result) if facts is not None else None
        if mismatch is not None:
            found[name] = mismatch
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


def device_standing(
    member: Member, medians: Mapping[str, Spread], threshold_percent: int
) -> DeviceStanding:
    ratios = {
        c.quantity: ratio_to(member.numbers[c.headline.attribute], medians[c.quantity])
        for c in COMPARED
    }
    slower = tuple(
        c.quantity
        for c in COMPARED
        if c.slower_below and is_slower(ratios[c.quantity], threshold_percent)
    )
    return DeviceStanding(member.gpu, member.gpu_class, ratios, slower)


def _farthest(compared: Compared, devices: Sequence[DeviceStanding]) -> Spread:
    """A node's ratio on one quantity: its farthest device's in the slower direction, a device
    slower on it first (so the node's ratio and its ``slower`` agree)."""
    q = compared.quantity
    slower = [d for d in devices if q in d.slower]
    pool = slower or devices
    if compared.slower_below:
        return min((d.ratios[q] for d in pool), key=lambda r: r.value)
    return max((d.ratios[q] for d in pool), key=lambda r: r.value)


def node_standing(node: str, node_class: str, devices: Sequence[DeviceStanding]) -> Standing:
    """A node's standing from its compared devices (by index)."""
    ordered = tuple(sorted(devices, key=lambda d: d.gpu))
    ratios = {c.quantity: _farthest(c, ordered) for c in COMPARED}
    slower = tuple(c.quantity for c in COMPARED if any(c.quantity in d.slower for d in ordered))
    return Standing(node, node_class, ratios, slower, ordered)


def fleet_view(
    found: Sequence[Member],
    threshold_percent: int = DEFAULT_OUTLIER_THRESHOLD_PERCENT,
    label_mismatches: Mapping[str, LabelMismatch] | None = None,
) -> FleetView:
    """The classes of ``found`` (by device kind and name) and the standing of every node with a
    device in a class of at least :data:`MIN_CLASS_DEVICES` devices."""
    by_class: dict[tuple[str, str], list[Member]] = {}
    for member in found:
        by_class.setdefault(member.class_key, []).append(member)
    classes = []
    compared: dict[str, list[DeviceStanding]] = {}
    for key in sorted(by_class):
        group = by_class[key]
        medians = {
            c.quantity: class_median([m.numbers[c.headline.attribute] for m in group])
            for c in COMPARED
        }
        nodes = tuple(dict.fromkeys(m.node for m in group))
        classes.append(PeerClass(key[1], nodes, medians, key[0], len(group)))
        if len(group) < MIN_CLASS_DEVICES:
            continue
        for member in group:
            compared.setdefault(member.node, []).append(
                device_standing(member, medians, threshold_percent)
            )
    node_classes = _node_classes(found)
    standings = {
        node: node_standing(node, node_classes[node], devices)
        for node, devices in sorted(compared.items())
    }
    return FleetView(tuple(classes), standings, threshold_percent, dict(label_mismatches or {}))


def _node_classes(found: Sequence[Member]) -> dict[str, str]:
    """Each node's class: that of its first device in ``found``, the worst GPU's for
    :func:`members` (a node of mixed products has every device compared in its own class)."""
    classes: dict[str, str] = {}
    for member in found:
        classes.setdefault(member.node, member.gpu_class)
    return classes


def _clauses(ratios: Mapping[str, Spread], slower: Sequence[str], gpu_class: str) -> str:
    return ", ".join(
        f"{q} {_ratio_text(ratios[q].value)} of the {gpu_class} median "
        f"(95% {_ratio_text(ratios[q].low)} to {_ratio_text(ratios[q].high)})"
        for q in slower
    )


#: GPUs of one node a message describes before it counts the rest.
MAX_GPUS_DESCRIBED = 3


def describe(item: Standing) -> str:
    """What makes a node slower, for messages: ``bandwidth 0.80 of the class median (95% 0.78
    to 0.82)``, one clause per slower quantity; for a node of several devices, per slower GPU
    (``GPU 3: bandwidth 0.60 of ...``), at most :data:`MAX_GPUS_DESCRIBED` of them."""
    if not item.multi_device:
        return _clauses(item.ratios, item.slower, item.gpu_class)
    slower = [d for d in item.devices if d.slower]
    text = "; ".join(
        f"GPU {d.gpu}: {_clauses(d.ratios, d.slower, d.gpu_class)}"
        for d in slower[:MAX_GPUS_DESCRIBED]
    )
    rest = len(slower) - MAX_GPUS_DESCRIBED
    return text + (f"; and {rest} more GPU(s)" if rest > 0 else "")


def _ratio_text(value: float) -> str:
    return f"{value:.2f}"
