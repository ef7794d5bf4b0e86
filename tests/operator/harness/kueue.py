"""Kueue v0.17.0's manager on a real node, installed as its release installs it.

The CRDs of its module with the conversion webhook its kustomization patches in
(``config/components/crd``), its mutating and validating webhook configurations with the
namespace selectors its kustomization adds (``config/components/webhook``), named and placed as
the release names them (``kueue-`` prefix, namespace ``kueue-system``), and its own certificate
management (``internalCertManagement``, on by default): the manager makes its CA and serving
certificate for ``kueue-webhook-service.kueue-system.svc``, keeps them in the Secret the release
ships and injects the CA into the webhook configurations and CRDs; the harness writes the
Secret's files where the manager reads them, as the kubelet's mount of it would. The manager runs
on the host, so the webhook Service sends the API server to the node's address
(``harness/consumers.py``). Integrations: ``batch/job``, ``pod`` and ``deployment`` (the serving
workloads); the visibility API server is off.

:meth:`KueueManager.stop` removes the webhook configurations before it stops the manager: with
``failurePolicy: Fail`` and nobody serving them, every Deployment and Pod would be refused.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from .consumers import (
    KUEUE_MANAGER,
    apply_documents,
    host_service,
    install_crds,
    load_crds,
    namespace_object,
    seconds_since,
)
from .controlplane import BinaryProcess
from .processes import Kubectl, free_port
from .waiting import wait_for

NAMESPACE = "kueue-system"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
#: The names the release gives them (``config/default``: prefix ``kueue-``), which Kueue's
#: certificate management derives from the webhook Service's name (``pkg/util/cert/cert.go``).
WEBHOOK_CONFIGURATIONS = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
FRAMEWORKS = ("batch/job", "pod", "deployment")
START_TIMEOUT_SECONDS = 120
#: The label a workload joins a LocalQueue by.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def configuration(
    workdir: Path, address: str, webhook_port: int, health_port: int
) -> dict[str, Any]:
    """The manager's configuration: the release's, bound to the node and this session's ports."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": address, "certDir": str(workdir / "certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": WEBHOOK_SERVICE,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }


def _service_reference(reference: dict[str, Any]) -> dict[str, Any]:
    return {**reference, "name": WEBHOOK_SERVICE, "namespace": NAMESPACE}


def crds(manifests: Path) -> list[dict[str, Any]]:
    """Kueue's CRDs with the conversion webhook of each ``webhook_in_*`` patch the CRD
    kustomization lists."""
    found = {crd["metadata"]["name"]: crd for crd in load_crds(manifests / "crd" / "bases")}
    kustomization = yaml.safe_load((manifests / "crd" / "kustomization.yaml").read_text())
    for entry in kustomization.get("patches") or []:
        patch = yaml.safe_load((manifests / "crd" / entry["path"]).read_text())
        conversion = copy.deepcopy(patch["spec"]["conversion"])
        client = conversion["webhook"]["clientConfig"]
        client["service"] = _service_reference(client["service"])
        found[patch["metadata"]["name"]]["spec"]["conversion"] = conversion
    return list(found.values())


def certificate_secret(manifests: Path) -> dict[str, Any]:
    """The empty Secret the release ships for the certificates Kueue makes
    (``config/components/internalcert``): its certificate management fills it, and does not
    create it."""
    secret: dict[str, Any] = yaml.safe_load(
        (manifests / "internalcert" / "secret.yaml").read_text()
    )
    secret["metadata"] = {"name": WEBHOOK_SECRET, "namespace": NAMESPACE}
    return secret


def webhook_configurations(manifests: Path) -> list[dict[str, Any]]:
    """The webhook manifest under the release's names, every webhook sent to the host Service,
    with the namespace selectors of the webhook kustomization's patches."""
    documents = [
        d for d in yaml.safe_load_all((manifests / "webhook" / "manifests.yaml").read_text()) if d
    ]
    kustomization = yaml.safe_load((manifests / "webhook" / "kustomization.yaml").read_text())
    selectors: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in kustomization.get("patches") or []:
        patch = yaml.safe_load(entry["patch"])
        for webhook in patch.get("webhooks") or []:
            selectors[(patch["kind"], webhook["name"])] = webhook["namespaceSelector"]
    for document in documents:
        document["metadata"]["name"] = WEBHOOK_CONFIGURATIONS[document["kind"]]
        for webhook in document["webhooks"]:
            client = webhook["clientConfig"]
            client["service"] = _service_reference(client["service"])
            selector = selectors.get((document["kind"], webhook["name"]))
            if selector is not None:
                webhook["namespaceSelector"] = selector
    return documents


class KueueManager:
    """Kueue's manager against a real node's API server (``kubectl`` as its admin)."""

    def __init__(
        self, binaries: Path, address: str, kubeconfig: Path, kubectl: Kubectl, workdir: Path
    ) -> None:
        self.binaries = binaries
        self.address = address
        self.kubeconfig = kubeconfig
        self.kubectl = kubectl
        self.workdir = workdir
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.process: BinaryProcess | None = None
        #: Seconds each phase of the start took.
        self.timings: dict[str, float] = {}

    @property
    def manifests(self) -> Path:
        return self.binaries / "kueue"

    def start(self) -> KueueManager:
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        install_crds(self.kubectl, crds(self.manifests), self.workdir / "crds.yaml")
        self.timings["CRDs"] = seconds_since(started)
        apply_documents(
            self.kubectl,
            [
                namespace_object(NAMESPACE),
                certificate_secret(self.manifests),
                *host_service(WEBHOOK_SERVICE, NAMESPACE, self.address, self.webhook_port),
                *webhook_configurations(self.manifests),
            ],
            self.workdir / "install.yaml",
        )
        config = self.workdir / "controller_manager_config.yaml"
        config.write_text(
            yaml.safe_dump(
                configuration(self.workdir, self.address, self.webhook_port, self.health_port)
            )
        )
        started = time.monotonic()
        self.process = BinaryProcess(
            [
                str(self.binaries / KUEUE_MANAGER),
                f"--config={config}",
                "--feature-gates=VisibilityOnDemand=false",
            ],
            self.workdir / "kueue-manager.log",
            {"KUBECONFIG": str(self.kubeconfig)},
        )
        self.process.start()
        try:
            self._mount_certificates()
            wait_for(
                self._ready,
                START_TIMEOUT_SECONDS,
                "Kueue's /readyz (its certificates injected)",
                interval=0.5,
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.log_tail()}") from None
        self.timings["manager ready"] = seconds_since(started)
        return self

    def _mount_certificates(self) -> None:
        """Do the kubelet's part: the release mounts the certificate Secret at the webhook's
        certificate directory, and Kueue's certificate management waits until the files there
        are the ones it put in the Secret."""

        def filled() -> dict[str, str] | None:
            self._alive()
            found = self.kubectl(
                "get", "secret", WEBHOOK_SECRET, "-n", NAMESPACE, "-o", "json", check=False
            )
            data = json.loads(found.stdout).get("data") if found.returncode == 0 else None
            return data if data and "tls.crt" in data else None

        data = wait_for(filled, START_TIMEOUT_SECONDS, f"Kueue to fill {WEBHOOK_SECRET}")
        certs = self.workdir / "certs"
        certs.mkdir(exist_ok=True)
        for name, value in data.items():
            (certs / name).write_bytes(base64.b64decode(value))

    def _alive(self) -> None:
        assert self.process is not None
        if not self.process.running:
            raise AssertionError(f"Kueue's manager exited:\n{self.process.log_tail()}")

    def _ready(self) -> bool:
        self._alive()
        try:
            url = f"http://127.0.0.1:{self.health_port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as rsp:
                return bool(rsp.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
            return False

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines) if self.process is not None else ""

    def stop(self) -> None:
        for kind, name in WEBHOOK_CONFIGURATIONS.items():
            self.kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)
        if self.process is not None:
            self.process.stop()
