"""The HTTP endpoint for Prometheus (``/metrics``) and for probes (``/healthz``, ``/readyz``).

It runs in the operator's event loop (aiohttp) rather than in prometheus_client's thread, so a
scrape sees snapshots that only that loop writes, without locks.

``/healthz`` (the chart's liveness probe) says the process has started and its loop answers: an
API server out of reach must not restart the operator, which reconnects on its own. ``/readyz``
(the readiness probe) says it can do its work: the latest LIST of its profiles succeeded
(``readiness.py``). Before, one ``/healthz`` served both and turned ready at start-up, so an
operator that could not reach the API server showed Ready while it retried and exited.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

logger = logging.getLogger(__name__)


@dataclass
class Health:
    """What the probes report."""

    #: The operator has started (its handlers run, this server answers): ``/healthz``.
    started: bool = False
    #: The latest LIST of the profiles succeeded: ``/readyz``.
    ready: bool = False
    #: Why it is not ready, for ``/readyz`` and the log.
    not_ready_because: str = "the profiles have not been listed yet"

    def mark_ready(self) -> None:
        if not self.ready:
            logger.info("Ready: the profiles are listed")
        self.ready = True

    def mark_not_ready(self, because: str) -> None:
        if self.ready or because != self.not_ready_because:
            logger.warning("Not ready: %s", because)
        self.ready = False
        self.not_ready_because = because


def build_app(registry: CollectorRegistry, health: Health) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def healthz(_: web.Request) -> web.Response:
        if health.started:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="starting\n")

    async def readyz(_: web.Request) -> web.Response:
        if health.started and health.ready:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"not ready: {health.not_ready_because}\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
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
        logger.info("Serving /metrics, /healthz and /readyz on %s", address)
    return runner
