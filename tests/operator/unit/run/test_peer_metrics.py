"""The fleet view's gauges: each node's ratios to its class's medians, their intervals, and the
decision the alert fires on; only nodes with peers have series."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from tests.operator.unit.peer_builders import member

from roofline_operator.decide.peers import fleet_view
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records


def test_each_node_with_peers_has_its_ratios_intervals_and_decision(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    found = [member(f"gpu-{i}", 4.3e12) for i in range(4)] + [member("gpu-slow", 3.4e12)]
    found.append(member("h100", 3.0e12, gpu_class="NVIDIA H100"))
    view = fleet_view(found, 10)
    metrics.collector.update(snapshot_from_records("fleet", {}, "h", fleet=view))
    slow = {"profile": "fleet", "node": "gpu-slow", "gpu_class": "NVIDIA H200"}
    ratio = registry.get_sample_value(
        "roofline_node_relative_performance", {**slow, "quantity": "bandwidth"}
    )
    assert ratio == pytest.approx(3.4 / 4.3)
    high = registry.get_sample_value(
        "roofline_node_relative_performance_interval",
        {**slow, "quantity": "bandwidth", "bound": "high"},
    )
    assert high == pytest.approx(3.4 * 1.01 / (4.3 * 0.99))
    ridge = registry.get_sample_value(
        "roofline_node_relative_performance", {**slow, "quantity": "ridge point"}
    )
    assert ridge is not None
    assert ridge > 1
    assert registry.get_sample_value("roofline_node_slower_than_peers", slow) == 1.0
    peer = {**slow, "node": "gpu-0"}
    assert registry.get_sample_value("roofline_node_slower_than_peers", peer) == 0.0
    alone = {"profile": "fleet", "node": "h100", "gpu_class": "NVIDIA H100"}
    assert registry.get_sample_value("roofline_node_slower_than_peers", alone) is None


def test_a_snapshot_without_a_view_has_no_peer_series(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", {}, "h"))
    names = {m.name for m in registry.collect() for s in m.samples}
    assert not any(name.startswith("roofline_node_relative") for name in names)
