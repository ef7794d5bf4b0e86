"""A real control plane for the tests: etcd and kube-apiserver, built from source.

``scripts/control-plane.sh`` builds pinned ``etcd``, ``kube-apiserver`` and ``kubectl`` once per
machine (cached outside the repository; with ``--node`` the real node's binaries too).
:class:`ControlPlane` starts etcd, then the API server (on loopback, or on a real node's address)
with RBAC on, client-certificate authentication for the admin (``system:masters``), signed
service-account tokens, and an audit log of every request made by a service account, so a test
can tell exactly which requests the operator made and whether any was forbidden. It waits for
``/livez`` and ``/readyz``, writes an admin kubeconfig, and stops both processes (process groups,
parent-death signal) when it stops: nothing outlives the test session.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from .commands import REPO_ROOT, die_with_parent
from .pki import FRONT_PROXY_CLIENT, ControlPlanePki, generate
from .processes import free_port, stop_group
from .waiting import wait_for

BUILD_SCRIPT = REPO_ROOT / "scripts" / "control-plane.sh"
START_TIMEOUT_SECONDS = 120
TOO_MANY_REQUESTS_TRIES = 30
STOP_TIMEOUT_SECONDS = 20
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
LOOPBACK = "127.0.0.1"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
#: The ``kubernetes`` Service's ClusterIP: the first address of the service range.
KUBERNETES_SERVICE_IP = "10.96.0.1"
#: Requests by service accounts (the operator) at Metadata level; nothing else is audited.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}


class ControlPlaneUnavailable(Exception):
    """The binaries cannot be built here (no Go toolchain); the reason is the message."""


def build_binaries(node: bool = False) -> Path:
    """The directory of the pinned binaries, building them on first use (minutes, once): the
    control plane's, or with ``node`` the real node's (kubelet, scheduler, controller manager,
    kube-proxy, pause)."""
    flags = ["--node"] if node else []
    sample = "kubelet" if node else "kube-apiserver"
    if shutil.which("go") is None and not _cached_dir(flags).joinpath(sample).exists():
        raise ControlPlaneUnavailable(
            "Go is not installed, so the Kubernetes binaries cannot be built "
            f"(scripts/control-plane.sh {' '.join(flags)})"
        )
    result = subprocess.run(
        [str(BUILD_SCRIPT), *flags], capture_output=True, text=True, check=False, timeout=3600
    )
    if result.returncode != 0:
        raise RuntimeError(f"scripts/control-plane.sh failed:\n{result.stdout}{result.stderr}")
    return Path(result.stdout.strip().splitlines()[-1])


def _cached_dir(flags: Sequence[str] = ()) -> Path:
    result = subprocess.run(
        [str(BUILD_SCRIPT), *flags, "--dir"], capture_output=True, text=True, check=True
    )
    return Path(result.stdout.strip())


class ApiRequestError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


@dataclass
class ApiClient:
    """Plain HTTPS requests to the API server as the admin (client certificate)."""

    server: str
    context: ssl.SSLContext

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={"Content-Type": content_type, "Accept": "application/json"},
        )
        for _ in range(TOO_MANY_REQUESTS_TRIES):
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=timeout) as rsp:
                    text = rsp.read().decode()
                break
            except urllib.error.HTTPError as error:
                with error:
                    answer = error.read().decode(errors="replace")
                if error.code != 429:
                    raise ApiRequestError(error.code, answer) from None
                # A resource's watch cache answers 429 until its first list is in (seconds).
                time.sleep(float(error.headers.get("Retry-After") or 1))
        else:
            raise ApiRequestError(429, answer)
        loaded: dict[str, Any] = json.loads(text) if text else {}
        return loaded

    def healthy(self, path: str) -> bool:
        try:
            request = urllib.request.Request(self.server + path)
            with urllib.request.urlopen(request, context=self.context, timeout=5) as rsp:
                return bool(rsp.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
            return False


class BinaryProcess:
    """One binary of the control plane (or of a node) in its own process group, logging to a
    file."""

    def __init__(
        self, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        #: Variables added to this process's environment (a kubeconfig, a namespace).
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
            env={**os.environ, **self.env} if self.env else None,
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        try:
            if self.process is not None and self.running:
                stop_group(self.process, STOP_TIMEOUT_SECONDS)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class ControlPlane:
    """etcd + kube-apiserver with RBAC, started from the cached binaries.

    By default the API server listens on loopback only and serves no ``kubernetes`` Service
    endpoints (nothing runs pods). With ``address`` (a real node's address) it listens there,
    advertises it as the ``kubernetes`` Service's endpoint, serves a certificate that pods can
    verify under the Service's address and names, and reaches the kubelet with the admin's
    certificate (``kubectl logs``).
    """

    def __init__(self, binaries: Path, workdir: Path, address: str = LOOPBACK) -> None:
        self.binaries = binaries
        self.workdir = workdir
        self.address = address
        self.pki: ControlPlanePki = generate(
            workdir / "pki", ("127.0.0.1", address, KUBERNETES_SERVICE_IP)
        )
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.audit_log = workdir / "audit.log"
        #: (stopped, ready again) wall-clock times of each API server restart.
        self.outages: list[tuple[float, float]] = []
        self.etcd = BinaryProcess(self._etcd_argv(), workdir / "etcd.log")
        self.apiserver = BinaryProcess(self._apiserver_argv(), workdir / "kube-apiserver.log")
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        context.load_cert_chain(str(self.pki.admin.cert), str(self.pki.admin.key))
        self.admin = ApiClient(self.url, context)

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.port}"

    @property
    def serves_pods(self) -> bool:
        return self.address != LOOPBACK

    @property
    def kubectl_binary(self) -> Path:
        return self.binaries / "kubectl"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def _etcd_argv(self) -> list[str]:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        return [
            str(self.binaries / "etcd"),
            "--name=test",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--log-level=warn",
            # A test cluster loses nothing worth keeping in a power cut; fsync costs seconds here.
            "--unsafe-no-fsync",
        ]

    def _apiserver_argv(self) -> list[str]:
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        pki = self.pki
        if self.serves_pods:
            node_flags = [
                f"--kubelet-client-certificate={pki.admin.cert}",
                f"--kubelet-client-key={pki.admin.key}",
                # The node's name resolves nowhere (no cluster DNS): dial its address.
                "--kubelet-preferred-address-types=InternalIP",
            ]
        else:
            # No endpoints for the "kubernetes" service: its loopback address is not a valid one.
            node_flags = ["--endpoint-reconciler-type=none"]
        return [
            str(self.binaries / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--profiling=false",
            *self._aggregation_flags(),
            *node_flags,
            "--v=1",
        ]

    def _aggregation_flags(self) -> list[str]:
        """The aggregation layer, as kubeadm configures it: an extension API server registered
        by an APIService (KEDA's external metrics server) trusts the ``front-proxy-client``
        certificate to name the user in headers. Aggregator routing dials the Service's endpoint
        address itself, as a control plane without kube-proxy on its host must."""
        pki = self.pki
        return [
            f"--requestheader-client-ca-file={pki.ca.cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy.cert}",
            f"--proxy-client-key-file={pki.front_proxy.key}",
            "--enable-aggregator-routing=true",
        ]

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> ControlPlane:
        """Start etcd, then the API server; a part that fails to start stops what had started
        (a ``with`` block's exit never runs when its entry raises)."""
        try:
            self.etcd.start()
            wait_for(self._etcd_healthy, START_TIMEOUT_SECONDS, "etcd's /health")
            self.start_apiserver()
        except BaseException:
            self.stop()
            raise
        self.kubeconfig.write_text(yaml.safe_dump(self.admin_kubeconfig_document()))
        return self

    def _etcd_healthy(self) -> bool:
        if not self.etcd.running:
            raise AssertionError(f"etcd exited:\n{self.etcd.log_tail()}")
        try:
            url = f"http://127.0.0.1:{self.etcd_port}/health"
            with urllib.request.urlopen(url, timeout=2) as rsp:
                return bool(json.loads(rsp.read()).get("health") == "true")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def start_apiserver(self) -> None:
        self.apiserver.start()

        def ready() -> bool:
            if not self.apiserver.running:
                raise AssertionError(f"kube-apiserver exited:\n{self.apiserver.log_tail()}")
            return self.admin.healthy("/livez") and self.admin.healthy("/readyz")

        wait_for(ready, START_TIMEOUT_SECONDS, "kube-apiserver's /livez and /readyz")

    def restart_apiserver(self) -> None:
        """Stop the API server (every watch and connection drops) and start it again."""
        stopped = time.time()
        self.apiserver.stop()
        self.start_apiserver()
        self.outages.append((stopped, time.time()))

    def during_outage(self, timestamp: float) -> bool:
        """Whether ``timestamp`` fell between a restart's stop and the server's readiness: a
        starting server answers before its RBAC caches are filled, so a 403 then is no rule's."""
        return any(start <= timestamp <= end for start, end in self.outages)

    def stop(self) -> None:
        """Stop the API server, then etcd, even where stopping the API server failed."""
        try:
            self.apiserver.stop()
        finally:
            self.etcd.stop()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- etcd
    def _etcd(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.etcd_port}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as rsp:
            loaded: dict[str, Any] = json.loads(rsp.read())
            return loaded

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (etcd's gRPC gateway): every older
        resourceVersion becomes too old to watch from, as after the API server's own compaction."""
        header = self._etcd("/v3/kv/range", {"key": "AA==", "limit": 1})["header"]
        revision = int(header["revision"])
        self._etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def etcd_db_size_bytes(self) -> int:
        return int(self._etcd("/v3/maintenance/status", {})["dbSize"])

    # ---------------------------------------------------------------- credentials
    def admin_kubeconfig_document(self) -> dict[str, Any]:
        return self._kubeconfig(
            {
                "client-certificate": str(self.pki.admin.cert),
                "client-key": str(self.pki.admin.key),
            }
        )

    def _kubeconfig(self, user: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
        context = {"cluster": "test", "user": "user"}
        if namespace:
            context["namespace"] = namespace
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority": str(self.pki.ca.cert),
                    },
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "test", "context": context}],
            "current-context": "test",
        }

    def service_account_kubeconfig(
        self, namespace: str, name: str, path: Path, hours: int = 6
    ) -> Path:
        """A kubeconfig with a bound token of the service account (TokenRequest), as a pod
        running under that account would get; its rights are exactly what RBAC grants it. The
        context's namespace is the account's, as a pod's service-account namespace file is
        (Kopf posts the events of cluster-scoped objects there)."""
        token = self.admin.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": hours * 3600},
            },
        )["status"]["token"]
        path.write_text(yaml.safe_dump(self._kubeconfig({"token": token}, namespace)))
        return path

    # ---------------------------------------------------------------- audit
    def audit_size(self) -> int:
        """Where the audit log ends now; :meth:`audit_events` can start reading from there."""
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audit_events(self, username: str, since: int = 0) -> list[dict[str, Any]]:
        """Audited requests of ``username`` (``ResponseComplete`` or ``Panic``) logged after the
        byte offset ``since`` (an earlier :meth:`audit_size`)."""
        if not self.audit_log.exists():
            return []
        with self.audit_log.open("rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        events = []
        for line in text.splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("user", {}).get("username") == username:
                events.append(event)
        return events
