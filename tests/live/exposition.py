"""A fixed exposition on loopback: the series the plan-drift rules join a serving pod with, for
a live suite that has no cluster.

In a cluster the ITL model comes from the operator (``roofline_model_itl_*``, one series per
node, GPU and model) and the pod's node from kube-state-metrics (``kube_pod_info``). Here both are
served by this small HTTP server, in the Prometheus text format, with the labels their exporters
give them; the ITL model's three coefficients are set by the test (from its calibration of the
engine) and can be scaled while Prometheus scrapes, which is how a wrong prediction is made.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The ITL model's gauges, in the order of :class:`ItlModel`'s fields.
ITL_GAUGES = (
    "roofline_model_itl_intercept_seconds",
    "roofline_model_itl_per_sequence_seconds",
    "roofline_model_itl_per_sequence_context_token_seconds",
)


@dataclass(frozen=True)
class ItlModel:
    """``step(B, C) = intercept + per_sequence·B + per_sequence_context_token·B·C``."""

    intercept: float
    per_sequence: float
    per_sequence_context_token: float

    def step(self, batch: float, context_tokens: float) -> float:
        """The predicted step at ``batch`` sequences holding ``context_tokens`` tokens in all."""
        return (
            self.intercept
            + self.per_sequence * batch
            + self.per_sequence_context_token * (context_tokens)
        )

    def scaled(self, factor: float) -> ItlModel:
        return replace(
            self,
            intercept=self.intercept * factor,
            per_sequence=self.per_sequence * factor,
            per_sequence_context_token=self.per_sequence_context_token * factor,
        )


@dataclass(frozen=True)
class ServingPod:
    """Where the engine runs, as kube-state-metrics and the operator would name it."""

    namespace: str
    pod: str
    node: str
    model: str
    profile: str = "live"
    product: str = "cpu"
    dtype: str = "bfloat16"


def _labels(pairs: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def exposition(pod: ServingPod, model: ItlModel) -> str:
    """The text the rules read: the pod on its node, the ITL model of its model on that node."""
    gauge = {
        "profile": pod.profile,
        "node": pod.node,
        "gpu": "0",
        "product": pod.product,
        "dtype": pod.dtype,
        "model": pod.model,
    }
    info = {"namespace": pod.namespace, "pod": pod.pod, "node": pod.node, "uid": f"uid-{pod.pod}"}
    lines = ["# TYPE kube_pod_info gauge", f"kube_pod_info{{{_labels(info)}}} 1"]
    values = (model.intercept, model.per_sequence, model.per_sequence_context_token)
    for name, value in zip(ITL_GAUGES, values, strict=True):
        lines += [f"# TYPE {name} gauge", f"{name}{{{_labels(gauge)}}} {value!r}"]
    return "\n".join(lines) + "\n"


class FixedExposition:
    """The exposition served on a free loopback port; :attr:`model` may change while it runs."""

    def __init__(self, pod: ServingPod, model: ItlModel) -> None:
        self.pod = pod
        self.model = model
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    body = exposition(server.pod, server.model).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{host}:{port}"

    def set_model(self, model: ItlModel) -> None:
        with self._lock:
            self.model = model

    @contextmanager
    def running(self) -> Iterator[FixedExposition]:
        self._thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            self._thread.join(timeout=10)
