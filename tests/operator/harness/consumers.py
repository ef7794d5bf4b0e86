"""What the consumers of ``roofline export``'s objects need from a real node: their binaries, and
a way for the API server to reach a server they run on the host.

``scripts/consumers.sh`` builds Kueue's manager and KEDA's operator and metrics API server once
per machine from their pinned Go module zips, with the CRDs and Kueue's webhook manifest of the
same zips, into a cache outside the repository (like ``scripts/control-plane.sh``).

Kueue's webhooks and KEDA's metrics API server are reached by the API server through a Service,
as they are in a cluster; here their processes run on the node's host, so the Service has no
selector and its Endpoints name the node's address and the process's port. The API server runs
with aggregator routing (``harness/controlplane.py``), so it dials that endpoint for webhooks,
CRD conversion and APIServices alike, and verifies the serving certificate against the Service's
DNS name (``<name>.<namespace>.svc``), as it does in a cluster.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .commands import REPO_ROOT
from .processes import Kubectl

BUILD_SCRIPT = REPO_ROOT / "scripts" / "consumers.sh"
KUEUE_MANAGER = "kueue-manager"
KEDA_OPERATOR = "keda-operator"
KEDA_METRICS_APISERVER = "keda-metrics-apiserver"
#: The port a host Service listens on (the one webhook and APIService references default to).
SERVICE_PORT = 443
CRD_ESTABLISHED_SECONDS = 60


class ConsumersUnavailable(Exception):
    """The consumers cannot be built here (no Go toolchain); the reason is the message."""


def build_consumers() -> Path:
    """The directory of Kueue's and KEDA's binaries and CRDs, built on first use (minutes,
    once per machine)."""
    cached = subprocess.run(
        [str(BUILD_SCRIPT), "--dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if shutil.which("go") is None and not Path(cached, KUEUE_MANAGER).exists():
        raise ConsumersUnavailable(
            "Go is not installed, so Kueue and KEDA cannot be built (scripts/consumers.sh)"
        )
    result = subprocess.run(
        [str(BUILD_SCRIPT)], capture_output=True, text=True, check=False, timeout=3600
    )
    if result.returncode != 0:
        raise RuntimeError(f"scripts/consumers.sh failed:\n{result.stdout}{result.stderr}")
    return Path(result.stdout.strip().splitlines()[-1])


def host_service(
    name: str, namespace: str, address: str, port: int, *, port_name: str = "https"
) -> list[dict[str, Any]]:
    """A Service without a selector and the Endpoints that send it to ``address:port`` on the
    host (the endpointslice mirroring controller copies them into an EndpointSlice)."""
    metadata = {"name": name, "namespace": namespace}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"ports": [{"name": port_name, "port": SERVICE_PORT, "targetPort": port}]},
    }
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": metadata,
        "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": port_name, "port": port}]}],
    }
    return [service, endpoints]


def namespace_object(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def apply_documents(kubectl: Kubectl, documents: Sequence[dict[str, Any]], path: Path) -> None:
    """``kubectl apply --server-side`` of ``documents``, written to ``path`` first (big CRDs do
    not fit the client-side apply annotation)."""
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=120)


def install_crds(kubectl: Kubectl, crds: Sequence[dict[str, Any]], path: Path) -> None:
    """Install the CRDs and wait until each one is served."""
    apply_documents(kubectl, crds, path)
    names = [crd["metadata"]["name"] for crd in crds]
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{name}" for name in names), timeout=CRD_ESTABLISHED_SECONDS + 10)  # fmt: skip


def load_crds(directory: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        found.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return found


def seconds_since(started: float) -> float:
    return round(time.monotonic() - started, 1)
