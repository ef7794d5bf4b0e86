"""KEDA v2.20.2's operator and metrics API server on a real node, installed as its release runs
them.

The CRDs of its module (``config/crd/bases``); the operator, which turns a ScaledObject into an
HPA (``keda-hpa-<name>``) on external metrics and answers the metrics server's gRPC queries by
running the scalers (here: the Prometheus scaler querying a real Prometheus); the metrics server
(``cmd/adapter``), an extension API server registered as the ``v1beta1.external.metrics.k8s.io``
APIService, which the controller manager's HPA controller reads through the API server's
aggregation layer. Both run on the host; the APIService's Service sends the API server to the
node's address (``harness/consumers.py``).

Certificates: KEDA's own rotation is off (``--enable-cert-rotation=false``, as with an external
certificate manager); the operator and the metrics server share one certificate of the cluster's
CA in ``ca.crt``/``tls.crt``/``tls.key`` (the layout of KEDA's ``kedaorg-certs`` Secret), valid for
both ends of their mutual TLS and for the metrics server's Service name, and the APIService
carries that CA, so the aggregation layer verifies the metrics server as it does in a cluster.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .consumers import (
    KEDA_METRICS_APISERVER,
    KEDA_OPERATOR,
    SERVICE_PORT,
    apply_documents,
    host_service,
    install_crds,
    load_crds,
    namespace_object,
    seconds_since,
)
from .controlplane import BinaryProcess
from .pki import CertFiles, issue_server
from .processes import Kubectl, free_port
from .waiting import wait_for

NAMESPACE = "keda"
METRICS_SERVICE = "keda-operator-metrics-apiserver"
API_SERVICE = "v1beta1.external.metrics.k8s.io"
START_TIMEOUT_SECONDS = 120


def api_service(ca: Path) -> dict[str, Any]:
    """The APIService of KEDA's release (``config/metrics-server/api_service.yaml``), with the CA
    that signed the metrics server's certificate."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {
            "service": {"name": METRICS_SERVICE, "namespace": NAMESPACE, "port": SERVICE_PORT},
            "group": "external.metrics.k8s.io",
            "version": "v1beta1",
            "caBundle": base64.b64encode(ca.read_bytes()).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


class KedaServers:
    """KEDA's operator and metrics API server against a real node's API server."""

    def __init__(
        self,
        binaries: Path,
        address: str,
        kubeconfig: Path,
        kubectl: Kubectl,
        ca: CertFiles,
        workdir: Path,
    ) -> None:
        self.binaries = binaries
        self.address = address
        self.kubeconfig = kubeconfig
        self.kubectl = kubectl
        self.ca = ca
        self.workdir = workdir
        self.certs = workdir / "certs"
        self.ports = {
            name: free_port()
            for name in ("operator health", "operator metrics", "grpc", "secure", "adapter metrics")
        }
        self.operator: BinaryProcess | None = None
        self.metrics_server: BinaryProcess | None = None
        self.timings: dict[str, float] = {}

    def _environment(self) -> dict[str, str]:
        # Every namespace watched; the namespace of the cluster-scoped objects' Secrets.
        return {
            "KUBECONFIG": str(self.kubeconfig),
            "WATCH_NAMESPACE": "",
            "POD_NAMESPACE": NAMESPACE,
            "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
        }

    def _write_certificates(self) -> None:
        issue_server(
            self.ca,
            self.certs,
            "tls",
            ("127.0.0.1", self.address),
            (f"{METRICS_SERVICE}.{NAMESPACE}.svc", "localhost"),
            client=True,
        )
        shutil.copyfile(self.ca.cert, self.certs / "ca.crt")
        (self.workdir / "scaler-ca").mkdir(exist_ok=True)

    def start(self) -> KedaServers:
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        crds = load_crds(self.binaries / "keda" / "crd" / "bases")
        install_crds(self.kubectl, crds, self.workdir / "crds.yaml")
        self.timings["CRDs"] = seconds_since(started)
        self._write_certificates()
        started = time.monotonic()
        self.operator = self._start_operator()
        self.metrics_server = self._start_metrics_server()
        apply_documents(
            self.kubectl,
            [
                namespace_object(NAMESPACE),
                *host_service(METRICS_SERVICE, NAMESPACE, self.address, self.ports["secure"]),
                api_service(self.ca.cert),
            ],
            self.workdir / "install.yaml",
        )
        wait_for(self._available, START_TIMEOUT_SECONDS, f"APIService {API_SERVICE} Available")
        self.timings["servers ready"] = seconds_since(started)
        return self

    def _start_operator(self) -> BinaryProcess:
        ports = self.ports
        process = BinaryProcess(
            [
                str(self.binaries / KEDA_OPERATOR),
                f"--health-probe-bind-address=127.0.0.1:{ports['operator health']}",
                f"--metrics-bind-address=127.0.0.1:{ports['operator metrics']}",
                f"--metrics-service-bind-address=127.0.0.1:{ports['grpc']}",
                f"--cert-dir={self.certs}",
                "--enable-cert-rotation=false",
                f"--ca-dir={self.workdir / 'scaler-ca'}",
                "--zap-log-level=info",
            ],
            self.workdir / "keda-operator.log",
            self._environment(),
        )
        process.start()
        url = f"http://127.0.0.1:{ports['operator health']}/readyz"
        wait_for(lambda: _answers(process, url), START_TIMEOUT_SECONDS, "KEDA operator's /readyz")
        return process

    def _start_metrics_server(self) -> BinaryProcess:
        ports, kubeconfig = self.ports, self.kubeconfig
        process = BinaryProcess(
            [
                str(self.binaries / KEDA_METRICS_APISERVER),
                f"--bind-address={self.address}",
                f"--secure-port={ports['secure']}",
                f"--cert-dir={self.certs}",
                f"--tls-cert-file={self.certs / 'tls.crt'}",
                f"--tls-private-key-file={self.certs / 'tls.key'}",
                f"--lister-kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--metrics-service-address=127.0.0.1:{ports['grpc']}",
                f"--port={ports['adapter metrics']}",
                "--zap-log-level=info",
            ],
            self.workdir / "keda-metrics-apiserver.log",
            self._environment(),
        )
        process.start()
        return process

    def _available(self) -> bool:
        for process in (self.operator, self.metrics_server):
            if process is not None and not process.running:
                raise AssertionError(f"{process.argv[0]} exited:\n{process.log_tail()}")
        found = self.kubectl("get", "apiservice", API_SERVICE, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions") or []
        return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

    def log_tails(self, lines: int = 40) -> str:
        parts = []
        for process in (self.operator, self.metrics_server):
            if process is not None:
                parts.append(f"---- {Path(process.argv[0]).name} ----\n{process.log_tail(lines)}")
        return "\n".join(parts)

    def stop(self) -> None:
        self.kubectl("delete", "apiservice", API_SERVICE, "--ignore-not-found", check=False)
        for process in (self.metrics_server, self.operator):
            if process is not None:
                process.stop()


def _answers(process: BinaryProcess, url: str) -> bool:
    if not process.running:
        raise AssertionError(f"{process.argv[0]} exited:\n{process.log_tail()}")
    try:
        with urllib.request.urlopen(url, timeout=2) as rsp:
            return bool(rsp.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
        return False
