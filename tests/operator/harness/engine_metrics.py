"""A serving engine's request gauges, served on loopback with values the test sets.

The Prometheus text exposition of vLLM's ``vllm:num_requests_running`` and
``vllm:num_requests_waiting`` for one served model, with the labels a PodMonitor scrape of a vLLM
pod carries (``model_name`` from the engine, ``namespace`` from the scrape), so that a real
Prometheus scrapes what an engine under load would expose and a KEDA query selects it as it
selects the engines' series. Both gauges are always exposed (an engine exposes them from its
start): a query adding them must never see a missing one.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


class EngineMetrics:
    """``/metrics`` on ``127.0.0.1:<port>``; :meth:`set` changes what the next scrape reads."""

    def __init__(self, model: str, namespace: str) -> None:
        self.labels = f'model_name="{model}",namespace="{namespace}"'
        self._values = {RUNNING: 0.0, WAITING: 0.0}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set(self, running: float, waiting: float) -> None:
        with self._lock:
            self._values = {RUNNING: running, WAITING: waiting}

    def exposition(self) -> str:
        with self._lock:
            values = dict(self._values)
        lines = []
        for name, value in values.items():
            lines += [f"# TYPE {name} gauge", f"{name}{{{self.labels}}} {value}"]
        return "\n".join(lines) + "\n"

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> EngineMetrics:
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = metrics.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
