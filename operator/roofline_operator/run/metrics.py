"""Prometheus metrics: gauges from the latest per-profile snapshot, plus operator counters.

Gauges come from a custom collector that reads immutable snapshots at scrape time, so a node that
leaves a profile simply vanishes from the next scrape instead of lingering as a stale series.
Label sets are bounded: nodes, GPUs and batches come from the profiled fleet, failure reasons
from a fixed enum, and weight formats from the names the format parser reads back to themselves
(``format_metrics.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from roofline_operator.core.names import FailureReason
from roofline_operator.decide.hysteresis import MATERIAL_QUANTITIES
from roofline_operator.decide.model_sources import ServedFormat
from roofline_operator.decide.peers import FleetView
from roofline_operator.decide.records import NodeRecord
from roofline_operator.decide.status import node_category
from roofline_operator.run.format_metrics import (
    FormatRooflineSample,
    format_roofline_families,
    format_roofline_samples,
)
from roofline_operator.run.model_metrics import (
    FormatSample,
    ModelSample,
    format_family,
    format_samples,
    model_families,
    model_samples,
)
from roofline_operator.run.peer_metrics import PeerSample, peer_families, peer_samples
from roofline_profiler.wire import fields

GPU_LABELS = ["profile", "node", "gpu", "product", "dtype"]
NODE_LABELS = ["profile", "node"]
NODE_CATEGORIES = ("profiled", "failed", "pending", "unschedulable", "unavailable")


@dataclass(frozen=True)
class DeviceSample(fields.HeadlineNumbers):
    node: str
    gpu: str
    product: str
    dtype: str
    #: The headline numbers (``fields.DEVICE_HEADLINE``), with intervals when the result has them.
    numbers: fields.Numbers
    step_seconds: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class NodeSample:
    node: str
    timestamp_seconds: float | None
    duration_seconds: float | None
    failed: bool
    #: The latest pod could not be scheduled (busy GPUs); not a failure.
    unschedulable: bool = False


@dataclass(frozen=True)
class ProfileSnapshot:
    profile: str
    devices: tuple[DeviceSample, ...]
    nodes: tuple[NodeSample, ...]
    counts: Mapping[str, int]
    models: tuple[ModelSample, ...] = ()
    #: Each node's standing among the nodes of its GPU class (``peers.py``).
    peers: tuple[PeerSample, ...] = ()
    #: How each model is served (``roofline_model_format_info``).
    formats: tuple[FormatSample, ...] = ()
    #: Each node's roofline per weight format (``roofline_format_*``).
    weight_formats: tuple[FormatRooflineSample, ...] = ()


def snapshot_from_records(
    profile: str,
    records: Mapping[str, NodeRecord],
    spec_hash: str,
    model_names: tuple[str, ...] = (),
    fleet: FleetView | None = None,
    formats: Mapping[str, ServedFormat] | None = None,
) -> ProfileSnapshot:
    """The gauges' snapshot of a profile: its nodes and GPUs, and the plans of ``model_names``
    (the spec's valid models), each served as ``formats`` says (else in its dtype)."""
    devices: list[DeviceSample] = []
    nodes: list[NodeSample] = []
    counts = dict.fromkeys(("matched", *NODE_CATEGORIES), 0)
    for name in sorted(records):
        record = records[name]
        category = node_category(record, spec_hash)
        counts["matched"] += 1
        counts[category] += 1
        result = record.result
        nodes.append(
            NodeSample(
                node=name,
                timestamp_seconds=result.profiled_at if result else None,
                duration_seconds=result.duration_seconds if result else None,
                failed=category == "failed",
                unschedulable=category == "unschedulable",
            )
        )
        for gpu in result.gpus if result else ():
            devices.append(
                DeviceSample(
                    node=name,
                    gpu=str(gpu.index),
                    product=gpu.product,
                    dtype=result.dtype if result else "",
                    numbers=gpu.numbers,
                    step_seconds=gpu.step_seconds,
                )
            )
    models = model_samples(records, model_names)
    return ProfileSnapshot(
        profile,
        tuple(devices),
        tuple(nodes),
        counts,
        models,
        peer_samples(fleet),
        format_samples(model_names, formats or {}),
        format_roofline_samples(records),
    )


def _gauge(name: str, documentation: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)


class RooflineCollector(Collector):
    """Yields the per-node and per-GPU gauges of every profile's latest snapshot."""

    def __init__(self) -> None:
        self._snapshots: dict[str, ProfileSnapshot] = {}

    def update(self, snapshot: ProfileSnapshot) -> None:
        self._snapshots[snapshot.profile] = snapshot

    def drop(self, profile: str) -> None:
        self._snapshots.pop(profile, None)

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return self._families()

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return self._families(list(self._snapshots.values()))

    def _families(self, snapshots: list[ProfileSnapshot] | None = None) -> list[GaugeMetricFamily]:
        snapshots = snapshots or []
        return [
            *_device_families(snapshots),
            *_node_families(snapshots),
            *_interval_families(snapshots),
            *model_families((s.profile, s.models) for s in snapshots),
            format_family((s.profile, s.formats) for s in snapshots),
            *format_roofline_families((s.profile, s.weight_formats) for s in snapshots),
            *peer_families((s.profile, s.peers) for s in snapshots),
        ]


def _device_families(snapshots: list[ProfileSnapshot]) -> list[GaugeMetricFamily]:
    """The headline numbers of every profiled GPU (``fields.DEVICE_HEADLINE``), and its step
    time per batch size."""
    headline = [(f, _gauge(f.metric, f.metric_help, GPU_LABELS)) for f in fields.DEVICE_HEADLINE]
    step = _gauge(
        "roofline_decode_step_seconds",
        "Measured decode-GEMM step time per batch size.",
        [*GPU_LABELS, "batch"],
    )
    for snapshot in snapshots:
        for device in snapshot.devices:
            labels = [snapshot.profile, device.node, device.gpu, device.product, device.dtype]
            for f, family in headline:
                family.add_metric(labels, f.value_of(device))
            for batch, seconds in device.step_seconds:
                step.add_metric([*labels, str(batch)], seconds)
    return [*(family for _, family in headline), step]


def _node_families(snapshots: list[ProfileSnapshot]) -> list[GaugeMetricFamily]:
    """Per node: when and how long it was last profiled, whether its latest pod failed or could
    not be scheduled; per profile, its nodes by state."""
    timestamp = _gauge(
        "roofline_profile_timestamp_seconds",
        "Unix time of the node's last successful profile.",
        NODE_LABELS,
    )
    duration = _gauge(
        "roofline_profile_duration_seconds",
        "Wall time of the node's last successful profile.",
        NODE_LABELS,
    )
    failed = _gauge(
        "roofline_node_profile_failed",
        "1 when the node's latest profiling attempt failed, else 0.",
        NODE_LABELS,
    )
    unschedulable = _gauge(
        "roofline_node_profile_unschedulable",
        "1 when the node's latest profiler pod could not be scheduled (busy GPUs), else 0.",
        NODE_LABELS,
    )
    nodes = _gauge("roofline_profile_nodes", "Nodes of a profile by state.", ["profile", "state"])
    for snapshot in snapshots:
        for node in snapshot.nodes:
            labels = [snapshot.profile, node.node]
            if node.timestamp_seconds is not None:
                timestamp.add_metric(labels, node.timestamp_seconds)
            if node.duration_seconds is not None:
                duration.add_metric(labels, node.duration_seconds)
            failed.add_metric(labels, 1.0 if node.failed else 0.0)
            unschedulable.add_metric(labels, 1.0 if node.unschedulable else 0.0)
        for state, count in snapshot.counts.items():
            nodes.add_metric([snapshot.profile, state], count)
    return [timestamp, duration, failed, unschedulable, nodes]


def _interval_families(snapshots: list[ProfileSnapshot]) -> list[GaugeMetricFamily]:
    """One family per headline number, label ``bound`` (``low``, ``high``): its 95% interval."""
    families = [
        (f, _gauge(f.interval_metric, f.interval_help, [*GPU_LABELS, "bound"]))
        for f in fields.DEVICE_HEADLINE
    ]
    for snapshot in snapshots:
        for device in snapshot.devices:
            labels = [snapshot.profile, device.node, device.gpu, device.product, device.dtype]
            for f, family in families:
                interval = f.estimate_of(device).interval
                if interval is None:
                    continue
                low, high = interval
                family.add_metric([*labels, "low"], low)
                family.add_metric([*labels, "high"], high)
    return [family for _, family in families]


class OperatorMetrics:
    """All of the operator's metrics, registered in one registry (a fresh one in tests)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.collector = RooflineCollector()
        registry.register(self.collector)
        self.pods_launched = Counter(
            "roofline_profiler_pods_launched",
            "Profiler pods created.",
            ["profile"],
            registry=registry,
        )
        self.failures = Counter(
            "roofline_profile_failures",
            "Failed profiling attempts by reason.",
            ["profile", "reason"],
            registry=registry,
        )
        self.device_changes = Counter(
            "roofline_device_changes",
            "Profiles that moved a published number by more than the change threshold.",
            ["profile", "quantity"],
            registry=registry,
        )
        self.held_back = Counter(
            "roofline_profiles_held_back",
            "Profiles that warned of interference and so moved no published number.",
            ["profile"],
            registry=registry,
        )
        self.foreign_pods = Counter(
            "roofline_foreign_pods_ignored",
            "Pods carrying a profile's labels that the operator did not create, ignored.",
            ["profile"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "roofline_reconcile_errors",
            "Reconcile rounds that ended in an error.",
            ["profile"],
            registry=registry,
        )

    def start_profile(self, profile: str) -> None:
        """Create the profile's counter series at zero.

        A counter without a series reads as "no data" to ``rate()`` and to alerts, not as zero;
        every failure reason is a series from the start, as the reason set is bounded.
        """
        self.pods_launched.labels(profile)
        self.reconcile_errors.labels(profile)
        self.held_back.labels(profile)
        self.foreign_pods.labels(profile)
        for reason in FailureReason:
            self.failures.labels(profile, reason.value)
        for quantity in MATERIAL_QUANTITIES:
            self.device_changes.labels(profile, quantity)

    def forget(self, profile: str) -> None:
        """Drop every series of a deleted profile, keeping label cardinality bounded."""
        self.collector.drop(profile)
        self.pods_launched.remove(profile)
        self.reconcile_errors.remove(profile)
        self.failures.remove_by_labels({"profile": profile})
        self.device_changes.remove_by_labels({"profile": profile})
        self.held_back.remove(profile)
        self.foreign_pods.remove(profile)
