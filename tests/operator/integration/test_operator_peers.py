"""The fleet view end to end: a node made slower in the emulated cluster is found among its peers
by the real operator, and a real Prometheus server, scraping the operator and running the
project's rules, fires ``RooflineNodeSlowerThanPeers`` for it and for no peer.

The Prometheus copy of the rules shortens the alert's ``for:`` to a few seconds (the rules file's
15 minutes would make the test wait 15 minutes); everything else is the shipped file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import Cluster, OperatorProcess, SyntheticGpu, wait_for
from tests.operator.harness.profiles import (
    GROUP,
    PLURAL,
    condition,
    example_profile,
    node_entries,
    profile_status,
    wait_for_nodes,
)
from tests.prometheus_server import (
    MISSING_REASON,
    PROMETHEUS,
    PrometheusServer,
    ScrapeTarget,
    rules_copy,
    wait_for_alert,
)

from roofline_operator.decide.product_label import PRODUCT_LABEL

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "observability" / "prometheus" / "rules" / "roofline.rules.yaml"
ALERT = "RooflineNodeSlowerThanPeers"
#: The alert's ``for:`` in the test's copy of the rules.
ALERT_FOR_SECONDS = 4

pytestmark = [
    pytest.mark.usefixtures("shared_operator"),
    pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON),
]


@pytest.fixture(scope="module")
def prometheus(
    shared_operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """A real Prometheus scraping the module's operator every second, with the project's rules."""
    workdir = tmp_path_factory.mktemp("prometheus")
    rules = rules_copy(RULES, workdir / "rules.yaml", alert_for={ALERT: f"{ALERT_FOR_SECONDS}s"})
    target = ScrapeTarget("roofline-operator", [f"127.0.0.1:{shared_operator.port}"])
    with PrometheusServer(workdir, [target], [rules]) as server:
        yield server
        print(f"---- prometheus log ----\n{server.log_tail()}")


def nodes_of(cluster: Cluster, suite: str, gpus: dict[str, SyntheticGpu]) -> list[str]:
    """Nodes of one suite, each with its synthetic GPU and the class label GFD would write."""
    for name, gpu in gpus.items():
        cluster.add_gpu_node(
            name, labels={"suite": suite, PRODUCT_LABEL: "NVIDIA-H200"}, synthetic_gpus=(gpu,)
        )
    return list(gpus)


def events_of(cluster: Cluster, profile: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.list("events", namespace="default")
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == profile
    ]


def peer_condition(entry: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in entry.get("conditions", []) if c["type"] == "SlowerThanPeers"), {})


def test_a_node_made_slower_is_found_among_its_peers_and_alerted_by_prometheus(
    shared_cluster: Cluster, prometheus: PrometheusServer
) -> None:
    gpu = SyntheticGpu(bandwidth_bytes_per_second=4.3e12)
    names = nodes_of(shared_cluster, "fleet", {f"fleet-{i}": gpu for i in range(5)})
    slow = names[-1]
    # Its results claim to be 57 s old under a 1-minute re-profile interval: re-profiled soon.
    shared_cluster.set_result_age(slow, 57)
    spec = {"reprofileInterval": "1m", "timeoutSeconds": 30}
    shared_cluster.create(PLURAL, example_profile("fleet", {"suite": "fleet"}, **spec), group=GROUP)
    entries = wait_for_nodes(
        shared_cluster,
        "fleet",
        lambda e: peer_condition(e).get("status") == "False",
        names,
        what="every node within its peers",
    )
    # The class is what the pods measured; GFD's label (its own form) agrees, so no mismatch.
    assert {e["gpuClass"] for e in entries.values()} == {"NVIDIA H200"}
    assert not any(
        c["type"] == "ProductLabelMismatch" for e in entries.values() for c in e["conditions"]
    )
    (fleet_class,) = profile_status(shared_cluster, "fleet")["classes"]
    assert (fleet_class["name"], fleet_class["nodes"], fleet_class["slower"]) == (
        "NVIDIA H200",
        5,
        0,
    )

    # The node loses a fifth of its bandwidth (a lower memory clock, say) and is re-profiled.
    slower = SyntheticGpu(bandwidth_bytes_per_second=3.3e12)
    shared_cluster.call(shared_cluster.faults.gpus.__setitem__, slow, (slower,))
    entries = wait_for_nodes(
        shared_cluster,
        "fleet",
        lambda e: peer_condition(e).get("status") == "True",
        [slow],
        timeout=40,
        what="the slowed node to be slower than its peers",
    )
    ratio = entries[slow]["relativePerformance"]["bandwidth"]
    assert ratio["high"] < 0.9, ratio
    assert peer_condition(entries[slow])["reason"] == "BelowClassMedian"
    peers = node_entries(shared_cluster, "fleet")
    assert all(peer_condition(peers[n])["status"] == "False" for n in names[:-1])
    status = profile_status(shared_cluster, "fleet")
    assert condition(status, "SlowerThanPeers")["status"] == "True"
    assert status["classes"][0]["slowerNodes"] == [slow]
    (event,) = wait_for(
        lambda: events_of(shared_cluster, "fleet", "SlowerThanPeers"),
        timeout=20,
        what="a SlowerThanPeers Event",
    )
    assert event["type"] == "Warning"
    assert event["message"].startswith(f"node {slow}: bandwidth 0.")

    pending = wait_for_alert(prometheus, ALERT, "pending", timeout=30, profile="fleet")
    firing = wait_for_alert(prometheus, ALERT, "firing", timeout=30, profile="fleet")
    assert pending["labels"]["node"] == firing["labels"]["node"] == slow
    assert firing["labels"]["gpu_class"] == "NVIDIA H200"
    assert "of the medians of its GPU class (NVIDIA H200)" in firing["annotations"]["description"]
    alerted = {
        a["labels"]["node"] for a in prometheus.alerts(ALERT) if a["labels"]["profile"] == "fleet"
    }
    assert alerted == {slow}
    assert prometheus.rule_health()[ALERT].startswith("ok")


def test_peers_below_the_median_within_their_uncertainty_stay_silent(
    shared_cluster: Cluster, prometheus: PrometheusServer
) -> None:
    """A node 12% below the others, measured with ±15% intervals, is not called slower; nor is a
    peer within the threshold measured tightly."""
    wide = SyntheticGpu(bandwidth_bytes_per_second=4.3e12, uncertainty=0.15)
    gpus = {f"calm-{i}": wide for i in range(4)}
    gpus["calm-noisy"] = SyntheticGpu(bandwidth_bytes_per_second=4.3e12 * 0.88, uncertainty=0.15)
    gpus["calm-close"] = SyntheticGpu(bandwidth_bytes_per_second=4.3e12 * 0.95, uncertainty=0.01)
    names = nodes_of(shared_cluster, "calm", gpus)
    shared_cluster.create(PLURAL, example_profile("calm", {"suite": "calm"}), group=GROUP)
    entries = wait_for_nodes(
        shared_cluster, "calm", lambda e: bool(peer_condition(e)), names, what="every standing"
    )
    noisy = entries["calm-noisy"]["relativePerformance"]["bandwidth"]
    assert noisy["ratio"] < 0.9 < noisy["high"], noisy
    assert all(peer_condition(e)["status"] == "False" for e in entries.values())
    # Prometheus has seen every node's decision for longer than the alert's for: none fires.
    wait_for(
        lambda: len(prometheus.query('roofline_node_slower_than_peers{profile="calm"} == 0')) == 6,
        timeout=30,
        what="Prometheus to scrape the six decisions",
    )
    wait_for(
        lambda: (
            prometheus.value(
                f'min_over_time(count(roofline_node_slower_than_peers{{profile="calm"}})'
                f"[{ALERT_FOR_SECONDS + 4}s:1s])"
            )
            == 6
        ),
        timeout=30,
        what="the decisions to stand longer than the alert's for:",
    )
    assert [a for a in prometheus.alerts(ALERT) if a["labels"]["profile"] == "calm"] == []
    assert events_of(shared_cluster, "calm", "SlowerThanPeers") == []
