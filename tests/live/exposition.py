"""The cluster's side of the plan-drift join, served on loopback for a live suite without one.

In a cluster the ITL model of a served model on a node comes from the operator's ``/metrics``
(``roofline_model_itl_*``, one series per node, GPU and model) and the serving pod's node from
kube-state-metrics (``kube_pod_info``). Here the first is rendered by the operator's own metrics
code (its ``OperatorMetrics`` registry and collector, fed a node record whose model plan carries
the ITL model the test calibrated), exactly the text ``roofline operator`` serves for such a plan;
the second is a one-line stand-in with kube-state-metrics' labels. The ITL model may be replaced
while Prometheus scrapes, which is how the suite makes a prediction wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest

from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.records import NodeRecord
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records
from roofline_profiler.wire.compact import CompactDevice, CompactProfile
from roofline_profiler.wire.compact_models import CompactModelPlan
from tests.profiler.headline_builders import headline_numbers

#: Where each part is served.
OPERATOR_PATH = "/metrics"
KUBE_STATE_METRICS_PATH = "/kube-state-metrics"
SPEC_HASH = "live"


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
            + self.per_sequence_context_token * context_tokens
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
    """Where the engine runs, as kube-state-metrics and the operator name it."""

    namespace: str
    pod: str
    node: str
    model: str
    context_tokens: int
    profile: str = "live"
    product: str = "cpu"


def node_record(pod: ServingPod, model: ItlModel) -> NodeRecord:
    """The operator's record of the pod's node: one profiled device whose plan of the served
    model carries ``model``."""
    plan = CompactModelPlan(
        name=pod.model,
        context_tokens=pod.context_tokens,
        tensor_parallel=1,
        min_batch=None,
        max_batch_by_memory=64,
        max_batch_by_latency=None,
        step_seconds_at_min_batch=None,
        step_seconds_at_max_batch=None,
        itl_intercept_seconds=model.intercept,
        itl_per_sequence_seconds=model.per_sequence,
        itl_per_sequence_context_token_seconds=model.per_sequence_context_token,
        itl_max_relative_error=0.0,
    )
    device = CompactDevice(
        index=0,
        name=pod.product,
        numbers=headline_numbers(3e10, 3e11, 10.0, 32),
        step_seconds=(),
        models=(plan,),
    )
    profile = CompactProfile("bfloat16", 4096, 4096, 1.7e9, 10.0, (1, 64), (device,))
    result = from_compact(profile, SPEC_HASH)
    return NodeRecord(pod.node, 1, state=NodeState.PROFILED, result=result)


def kube_pod_info(pod: ServingPod) -> str:
    labels = f'namespace="{pod.namespace}",pod="{pod.pod}",node="{pod.node}",uid="uid-{pod.pod}"'
    return f"# TYPE kube_pod_info gauge\nkube_pod_info{{{labels}}} 1\n"


class FixedExposition:
    """The operator's metrics for the pod's node and kube-state-metrics' ``kube_pod_info``, on a
    free loopback port; :meth:`set_model` changes the ITL model while it runs."""

    def __init__(self, pod: ServingPod, model: ItlModel) -> None:
        self.pod = pod
        self.metrics = OperatorMetrics(CollectorRegistry())
        self.set_model(model)
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == OPERATOR_PATH:
                    body = generate_latest(served.metrics.registry)
                elif self.path == KUBE_STATE_METRICS_PATH:
                    body = kube_pod_info(served.pod).encode()
                else:
                    self.send_error(404)
                    return
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
        """Publish ``model`` as the ITL model of the pod's model on its node (the collector
        swaps its snapshot atomically, as the operator's rounds do)."""
        self.model = model
        records = {self.pod.node: node_record(self.pod, model)}
        snapshot = snapshot_from_records(self.pod.profile, records, SPEC_HASH, (self.pod.model,))
        self.metrics.collector.update(snapshot)

    @contextmanager
    def running(self) -> Iterator[FixedExposition]:
        self._thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            self._thread.join(timeout=10)
