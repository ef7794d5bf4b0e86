from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.server import Health, start_server


@pytest.mark.asyncio
async def test_healthz_turns_ok_once_ready_and_metrics_share_the_port() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    metrics.pods_launched.labels("fleet").inc()
    health = Health()
    runner = await start_server(registry, health, "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        async with aiohttp.ClientSession(f"http://{host}:{port}") as session:
            async with session.get("/healthz") as response:
                assert response.status == 503
            health.started = True
            async with session.get("/healthz") as response:
                assert response.status == 200
            async with session.get("/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                text = await response.text()
    finally:
        await runner.cleanup()
    assert 'roofline_profiler_pods_launched_total{profile="fleet"} 1.0' in text


@pytest.mark.asyncio
async def test_readyz_turns_ok_only_once_the_profiles_are_listed_and_says_why_not() -> None:
    health = Health(started=True)
    runner = await start_server(CollectorRegistry(), health, "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        async with aiohttp.ClientSession(f"http://{host}:{port}") as session:
            async with session.get("/readyz") as response:
                assert response.status == 503
                assert "not been listed" in await response.text()
            health.mark_ready()
            async with session.get("/readyz") as response:
                assert response.status == 200
            health.mark_not_ready("cannot list rooflineprofiles.roofline.dev: HTTP 503")
            async with session.get("/readyz") as response:
                assert response.status == 503
                assert "HTTP 503" in await response.text()
            async with session.get("/healthz") as response:
                assert response.status == 200, "liveness does not follow the API server"
    finally:
        await runner.cleanup()
