"""The HTTP endpoint for Prometheus (``/metrics``) and for probes (``/healthz``).

It runs in the operator's event loop (aiohttp) rather than in prometheus_client's thread, so a
scrape sees snapshots that only that loop writes, without locks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

logger = logging.getLogger(__name__)


@dataclass
class Health:
    """Set once the operator has logged in and its API session exists."""

    ready: bool = False


def build_app(registry: CollectorRegistry, health: Health) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def healthz(_: web.Request) -> web.Response:
        if health.ready:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="starting\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    return app


async def start_server(
    registry: CollectorRegistry, health: Health, host: str, port: int
) -> web.AppRunner:
    """Start serving; the caller keeps the runner and calls ``cleanup()`` at shutdown."""
    runner = web.AppRunner(build_app(registry, health), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    for address in runner.addresses:
        logger.info("Serving /metrics and /healthz on %s", address)
    return runner
