"""The Kopf handlers called as Kopf calls them: what each one does to the operator's shared state.

The handlers are a table of contents; the loop they hand a profile to is tested in
``test_reconcile.py`` and the whole operator process in ``tests/operator/integration``.
"""

from __future__ import annotations

import logging

import aiohttp
import kopf
import pytest
from prometheus_client import CollectorRegistry

from roofline_operator.core.names import (
    ANNOTATION_NODE,
    ANNOTATION_PROFILE,
    FINALIZER,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from roofline_operator.decide.labels import LabelClaim
from roofline_operator.run.config import load_config
from roofline_operator.run.handlers import (
    EXIT_TIMEOUT_SECONDS,
    claim_index,
    configure,
    node_changed,
    pod_changed,
    profile_changed,
    shutdown,
)
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.runtime import Runtime


def fresh_runtime() -> Runtime:
    """The shared state of an operator whose metrics server binds a free local port."""
    config = load_config(["--metrics-host", "127.0.0.1", "--metrics-port", "0"], {})
    return Runtime(config=config, metrics=OperatorMetrics(CollectorRegistry()))


def profiler_pod(name: str, profile: str, node: str, phase: str = "Running") -> kopf.Body:
    return kopf.Body(
        {
            "metadata": {
                "name": name,
                "namespace": "roofline-system",
                "labels": {LABEL_MANAGED_BY: MANAGED_BY},
                "annotations": {ANNOTATION_PROFILE: profile, ANNOTATION_NODE: node},
            },
            "status": {"phase": phase},
        }
    )


def node_body(name: str, **labels: str) -> kopf.Body:
    return kopf.Body({"metadata": {"name": name, "labels": labels}})


@pytest.mark.asyncio
async def test_a_profiler_pod_event_updates_the_pod_cache_and_wakes_only_its_profile() -> None:
    memo = fresh_runtime()
    fleet, other = memo.wakeups.event("fleet"), memo.wakeups.event("other")
    await pod_changed(type="MODIFIED", body=profiler_pod("p-a", "fleet", "a"), memo=memo)
    cached = memo.caches.pods.get(("roofline-system", "p-a"))
    assert cached is not None
    assert (cached.profile, cached.node, cached.phase) == ("fleet", "a", "Running")
    assert fleet.is_set()
    assert not other.is_set()


@pytest.mark.asyncio
async def test_a_deleted_profiler_pod_leaves_the_pod_cache() -> None:
    memo = fresh_runtime()
    body = profiler_pod("p-a", "fleet", "a", phase="Succeeded")
    await pod_changed(type=None, body=body, memo=memo)
    await pod_changed(type="DELETED", body=body, memo=memo)
    assert ("roofline-system", "p-a") not in memo.caches.pods


@pytest.mark.asyncio
async def test_a_node_event_updates_the_node_cache_and_wakes_every_profile() -> None:
    memo = fresh_runtime()
    woken = [memo.wakeups.event(name) for name in ("fleet", "other")]
    await node_changed(type="ADDED", name="a", body=node_body("a", pool="h200"), memo=memo)
    cached = memo.caches.nodes.get("a")
    assert cached is not None
    assert cached.labels == {"pool": "h200"}
    assert all(event.is_set() for event in woken)
    await node_changed(type="DELETED", name="a", body=node_body("a"), memo=memo)
    assert "a" not in memo.caches.nodes


@pytest.mark.asyncio
async def test_a_profile_event_wakes_every_profile_since_label_claims_may_have_moved() -> None:
    memo = fresh_runtime()
    woken = [memo.wakeups.event(name) for name in ("fleet", "other")]
    await profile_changed(memo=memo)
    assert all(event.is_set() for event in woken)


@pytest.mark.asyncio
async def test_the_claim_index_holds_each_profiles_label_claim_under_its_name() -> None:
    body = kopf.Body(
        {
            "metadata": {"name": "fleet", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeSelector": {"pool": "h200"}},
        }
    )
    index = await claim_index(name="fleet", body=body)
    assert list(index) == ["fleet"]
    claim = index["fleet"]
    assert isinstance(claim, LabelClaim)
    assert claim.name == "fleet"
    assert claim.created_at == 1767225600.0
    assert claim.selection is not None


@pytest.mark.asyncio
async def test_start_up_configures_kopf_serves_healthz_and_shutdown_stops_serving() -> None:
    memo = fresh_runtime()
    settings = kopf.OperatorSettings()
    await configure(settings=settings, memo=memo)
    try:
        assert settings.persistence.finalizer == FINALIZER
        assert settings.peering.clusterwide
        assert settings.posting.level == logging.WARNING
        assert settings.process.ultimate_exiting_timeout == EXIT_TIMEOUT_SECONDS
        assert memo.health.started
        (runner,) = memo.server
        host, port = runner.addresses[0][:2]
        async with aiohttp.ClientSession(f"http://{host}:{port}") as session:
            async with session.get("/healthz") as response:
                assert response.status == 200
            # Not logged in: no API call has succeeded, so not ready.
            async with session.get("/readyz") as response:
                assert response.status == 503
        (readiness,) = memo.tasks
        assert not readiness.done()
    finally:
        await shutdown(memo=memo)
    assert not memo.health.started
    assert not memo.health.ready
    assert readiness.cancelled()
    assert runner.addresses == []
