"""The fleet view's gauges (``decide/peers.py``): each node's standing among its class.

* ``roofline_node_relative_performance{profile, node, gpu_class, quantity}``: the node's published
  bandwidth, peak or ridge point over its class's median (1 = the median);
* ``roofline_node_relative_performance_interval{..., bound}``: that ratio's 95% interval;
* ``roofline_node_slower_than_peers{profile, node, gpu_class}``: 1 while any GPU of the node is
  more than ``spec.outlierThresholdPercent`` below its class's median bandwidth or peak beyond its
  uncertainty (the decision the ``RooflineNodeSlowerThanPeers`` alert fires on), else 0;
* ``roofline_node_slower_gpus{profile, node, gpu_class}``: how many of the node's GPUs are.

Every GPU of a node is compared with its class; the node's ratio on each quantity is its farthest
GPU's (``peers.py``), and which GPUs are slower is in ``status.nodes[].slowerGpus``. So the series
stay per node, not per GPU. Only nodes with a GPU in a class of at least two profiled devices have
a standing, so only they have series. Bounded: three quantities per node, ``quantity`` from a
fixed set, ``gpu_class`` one of the products the fleet measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from roofline_operator.decide.peers import COMPARED, FleetView, Standing

PEER_LABELS = ["profile", "node", "gpu_class"]


@dataclass(frozen=True)
class PeerSample:
    """A node's standing, as the gauges publish it."""

    standing: Standing


def peer_samples(view: FleetView | None) -> tuple[PeerSample, ...]:
    if view is None:
        return ()
    return tuple(PeerSample(view.standings[n]) for n in sorted(view.standings))


def peer_families(
    snapshots: Iterable[tuple[str, tuple[PeerSample, ...]]],
) -> list[GaugeMetricFamily]:
    """The four gauge families from ``(profile, samples)`` pairs."""
    ratio = GaugeMetricFamily(
        "roofline_node_relative_performance",
        "The node's published number over the median of its class (1 = the median); on a node "
        "of several GPUs, its farthest GPU's.",
        labels=[*PEER_LABELS, "quantity"],
    )
    interval = GaugeMetricFamily(
        "roofline_node_relative_performance_interval",
        "95% interval of the node's ratio to the median of its class.",
        labels=[*PEER_LABELS, "quantity", "bound"],
    )
    slower = GaugeMetricFamily(
        "roofline_node_slower_than_peers",
        "1 while a GPU of the node is more than spec.outlierThresholdPercent below the median "
        "bandwidth or peak of its class, beyond its uncertainty; else 0.",
        labels=PEER_LABELS,
    )
    slower_gpus = GaugeMetricFamily(
        "roofline_node_slower_gpus",
        "GPUs of the node more than spec.outlierThresholdPercent below the median bandwidth or "
        "peak of their class, beyond their uncertainty.",
        labels=PEER_LABELS,
    )
    for profile, samples in snapshots:
        for sample in samples:
            item = sample.standing
            labels = [profile, item.node, item.gpu_class]
            for compared in COMPARED:
                spread = item.ratios[compared.quantity]
                ratio.add_metric([*labels, compared.quantity], spread.value)
                interval.add_metric([*labels, compared.quantity, "low"], spread.low)
                interval.add_metric([*labels, compared.quantity, "high"], spread.high)
            slower.add_metric(labels, 1.0 if item.slower else 0.0)
            slower_gpus.add_metric(labels, float(_slower_gpus(item)))
    return [ratio, interval, slower, slower_gpus]


def _slower_gpus(item: Standing) -> int:
    """How many of the node's GPUs are slower (a standing built without its devices stands for
    one)."""
    if item.devices:
        return len(item.slower_gpus())
    return 1 if item.slower else 0
