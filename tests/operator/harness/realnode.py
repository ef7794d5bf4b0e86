"""A real single-node Kubernetes cluster on this machine, for the tests and for a person.

The control plane of the real-server suite (etcd, kube-apiserver), listening on the node's
address, plus kube-controller-manager and kube-scheduler, and a node: containerd with runc and
the CNI bridge, the kubelet, kube-proxy (pods reach the API server through the ``kubernetes``
Service, as real pods do). All Kubernetes binaries come from the pinned ``k8s.io/kubernetes``
(``scripts/control-plane.sh`` and ``scripts/control-plane.sh --node``); containerd, runc and the
CNI plugins from the distribution. The node has a fake GPU: ``nvidia.com/gpu: 1`` in its capacity
(written through ``nodes/status``, as a device plugin's report would be), the GPU taint it
registers with, and the product label GPU Feature Discovery would give it.

:meth:`RealNode.start` records the host first (``hoststate``), starts every part, imports the
images and waits for the node to be Ready with its GPU allocatable; :meth:`RealNode.stop` stops
what it started, by PID, in the order that lets each part clean up after the next (scheduler and
controllers first, so nothing is recreated; pods deleted and their sandboxes torn down by the
kubelet; containerd's leftovers removed), then undoes every host change and returns what, if
anything, is still different from the record.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import yaml

from . import hoststate, hostundo
from .containerd import Containerd, stale_shims
from .controlplane import (
    SERVICE_CLUSTER_IP_RANGE,
    ApiRequestError,
    BinaryProcess,
    ControlPlane,
    build_binaries,
)
from .nodeconfig import (
    BRIDGE,
    CNI_BIN_DIR,
    GPU_RESOURCE,
    NODE_NAME,
    NodeLayout,
    cni_network,
    controller_manager_argv,
    kube_proxy_argv,
    kube_proxy_config,
    kubeconfig_document,
    kubelet_argv,
    kubelet_config,
    scheduler_argv,
)
from .pki import issue_client
from .processes import free_port
from .realcluster import ApiObjects
from .waiting import wait_for

START_TIMEOUT_SECONDS = 120
POD_DRAIN_SECONDS = 90
#: The node's containerd root, kept between sessions (imported images); an override for CI.
CACHE_VARIABLE = "ROOFLINE_NODE_CACHE"
#: What the node needs from the host besides the Go toolchain (binaries it calls, by package).
HOST_TOOLS = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "buildah": "buildah",
    "iptables": "iptables",
    "nft": "nftables",
    "ip": "iproute2",
}
#: Components and the identities the API server's bootstrap RBAC binds for them.
COMPONENT_USERS = {
    "kubelet": (f"system:node:{NODE_NAME}", "system:nodes"),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kube-controller-manager": ("system:kube-controller-manager", None),
    "kube-proxy": ("system:kube-proxy", None),
}


class NodeUnavailable(Exception):
    """A real node cannot run here; the message says why."""


def unavailable_reason() -> str | None:
    """Why this machine cannot run the real node, or None when it can."""
    if os.environ.get("ROOFLINE_SKIP_REAL_NODE") == "1":
        return "ROOFLINE_SKIP_REAL_NODE=1"
    if os.geteuid() != 0:
        return "a kubelet and containerd need root"
    for tool, package in HOST_TOOLS.items():
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install {package}; .ci/run installs it)"
    if not Path(CNI_BIN_DIR, "bridge").exists():
        return "the CNI bridge plugin is missing (apt-get install containernetworking-plugins)"
    try:
        node_address()
    except (NodeUnavailable, OSError) as error:
        return str(error)
    return None


def build_node_binaries() -> Path:
    """The node's binaries (kubelet, kube-scheduler, kube-controller-manager, kube-proxy, pause),
    built on first use like the control plane's."""
    return build_binaries(node=True)


def node_address() -> str:
    """The address of the interface the default route leaves by (a kubelet refuses loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("203.0.113.1", 9))  # TEST-NET-3; a UDP connect sends no packet
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        raise NodeUnavailable("this machine has no non-loopback IPv4 address for the node")
    return address


def default_cache() -> Path:
    root = os.environ.get(CACHE_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "roofline-operator",
        "node",
    )
    return Path(root)


class NodeLock:
    """One real node per machine: two would share the fixed paths, the bridge and the containerd
    root, and one's leftover cleaning would take the other's containers. A second holder waits
    until the first releases (the lock goes with the process, so a killed session releases it)."""

    def __init__(self, cache: Path) -> None:
        self.path = cache / ".node.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("real node: another real node runs on this machine; waiting for it to stop")
            fcntl.flock(self._file, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the file releases the lock
            self._file = None

    def __enter__(self) -> NodeLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


class RealNode:
    """The cluster; ``images`` are (reference, identity, write-archive) for each project image."""

    def __init__(
        self,
        control_plane_binaries: Path,
        node_binaries: Path,
        workdir: Path,
        images: Sequence[tuple[str, str, Callable[[Path], object]]] = (),
        cache: Path | None = None,
    ) -> None:
        self.node_binaries = node_binaries
        self.workdir = workdir
        self.images = list(images)
        self.address = node_address()
        self.control_plane = ControlPlane(
            control_plane_binaries, workdir / "control-plane", address=self.address
        )
        self.api = ApiObjects(self.control_plane, workdir)
        self.layout = NodeLayout(
            workdir=workdir / "node",
            containerd_root=(cache or default_cache()) / "containerd-root",
            node_ip=self.address,
            apiserver_url=self.control_plane.url,
            ca_cert=self.control_plane.pki.ca.cert,
            kubelet_port=free_port(),
            kubelet_healthz_port=free_port(),
            proxy_healthz_port=free_port(),
            proxy_metrics_port=free_port(),
            scheduler_port=free_port(),
            controller_manager_port=free_port(),
        )
        self.containerd = Containerd(self.layout)
        self.components: dict[str, BinaryProcess] = {}
        self.before: hoststate.HostState | None = None
        #: Seconds each phase of the last start took (the docs' warm and cold figures).
        self.timings: dict[str, float] = {}
        self.lock = NodeLock(self.layout.containerd_root.parent)

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    @property
    def kubectl_binary(self) -> Path:
        return self.control_plane.kubectl_binary

    # ---------------------------------------------------------------- start
    def start(self) -> RealNode:
        self.lock.acquire()
        found = hostundo.clean_leftovers(BRIDGE)
        for pid in stale_shims():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if found:
            print("real node: removed what an interrupted session left: " + "; ".join(found))
        self.before = hoststate.snapshot([str(self.workdir), str(self.layout.containerd_root)])
        try:
            with self._timed("control plane"):
                self.control_plane.start()
            self._write_configs()
            with self._timed("containerd"):
                self.containerd.start()
            with self._timed("images"):
                self._import_images()
            with self._timed("controllers"):
                self._start_controllers()
            with self._timed("node Ready"):
                self._start_node()
            with self._timed("GPU allocatable"):
                self.set_gpu_capacity(1)
        except BaseException:
            self.stop()
            raise
        return self

    @contextlib.contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.timings[phase] = round(time.monotonic() - started, 1)

    def _write_configs(self) -> None:
        layout = self.layout
        layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        (layout.cni_conf_dir / "10-roofline.conflist").write_text(json.dumps(cni_network(layout)))
        pki = self.control_plane.pki
        for component, (user, group) in COMPONENT_USERS.items():
            cert = issue_client(pki.ca, self.control_plane.workdir / "pki", component, user, group)
            document = kubeconfig_document(layout, cert.cert, cert.key)
            layout.kubeconfig(component).write_text(yaml.safe_dump(document))
        layout.config_file("kubelet").write_text(yaml.safe_dump(kubelet_config(layout)))
        layout.config_file("kube-proxy").write_text(yaml.safe_dump(kube_proxy_config(layout)))

    def _import_images(self) -> None:
        self.containerd.import_pause(self.node_binaries / "pause")
        for reference, identity, write in self.images:
            self.containerd.import_archive(reference, identity, write)

    def _component(self, name: str, argv: list[str]) -> BinaryProcess:
        process = BinaryProcess(argv, self.layout.workdir / f"{name}.log")
        self.components[name] = process
        process.start()
        return process

    def _start_controllers(self) -> None:
        binaries, layout = self.node_binaries, self.layout
        pki = self.control_plane.pki
        self._component(
            "kube-controller-manager",
            controller_manager_argv(
                binaries, layout, pki.service_account_key, SERVICE_CLUSTER_IP_RANGE
            ),
        )
        self._component("kube-scheduler", scheduler_argv(binaries, layout))
        for name, port in (
            ("kube-controller-manager", layout.controller_manager_port),
            ("kube-scheduler", layout.scheduler_port),
        ):
            self._wait_healthy(name, f"https://127.0.0.1:{port}/healthz")

    def _start_node(self) -> None:
        binaries, layout = self.node_binaries, self.layout
        self._component("kubelet", kubelet_argv(binaries, layout))
        wait_for(
            lambda: self._alive("kubelet") and self.node() is not None,
            START_TIMEOUT_SECONDS,
            "the kubelet to register its node",
        )
        self._component("kube-proxy", kube_proxy_argv(binaries, layout))
        self._wait_healthy("kube-proxy", f"http://127.0.0.1:{layout.proxy_healthz_port}/healthz")
        self.wait_ready(True)

    def _alive(self, name: str) -> bool:
        process = self.components[name]
        if not process.running:
            raise AssertionError(f"{name} exited:\n{process.log_tail()}")
        return True

    def _wait_healthy(self, name: str, url: str) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # self-signed serving certificates

        def healthy() -> bool:
            self._alive(name)
            try:
                with urllib.request.urlopen(url, context=context, timeout=2) as rsp:
                    return bool(rsp.status == 200)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        wait_for(healthy, START_TIMEOUT_SECONDS, f"{name}'s /healthz")

    # ---------------------------------------------------------------- the node
    def node(self) -> dict[str, Any] | None:
        return self.api.get("nodes", NODE_NAME)

    def ready(self) -> str:
        """The node's Ready condition status: True, False or Unknown."""
        node = self.node() or {}
        conditions = node.get("status", {}).get("conditions", [])
        return next((c["status"] for c in conditions if c["type"] == "Ready"), "Unknown")

    def wait_ready(self, ready: bool, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Until the node is Ready (and the not-ready taint lifted), or no longer Ready."""

        def check() -> bool:
            node = self.node() or {}
            taints = {t["key"] for t in node.get("spec", {}).get("taints") or []}
            if ready:
                return self.ready() == "True" and "node.kubernetes.io/not-ready" not in taints
            return self.ready() != "True"

        wait_for(check, timeout, f"the node to be {'Ready' if ready else 'NotReady'}")

    def set_gpu_capacity(self, gpus: int | None) -> None:
        """Write the fake GPU into the node's capacity (``None`` removes it), as a device
        plugin's report would, and wait for the kubelet to make it allocatable."""
        value = None if gpus is None else str(gpus)
        self.api.patch(
            "nodes",
            NODE_NAME,
            {"status": {"capacity": {GPU_RESOURCE: value}}},
            subresource="status",
        )

        def allocatable() -> bool:
            found = (self.node() or {}).get("status", {}).get("allocatable", {})
            return found.get(GPU_RESOURCE) == value

        wait_for(allocatable, 60, f"allocatable {GPU_RESOURCE} to be {value}")

    def stop_kubelet(self) -> None:
        """Stop the kubelet alone (SIGTERM), as a node that crashes or loses power would."""
        self.components["kubelet"].stop()

    def start_kubelet(self) -> None:
        self.components["kubelet"] = BinaryProcess(
            kubelet_argv(self.node_binaries, self.layout), self.layout.workdir / "kubelet.log"
        )
        self.components["kubelet"].start()

    def log_tail(self, component: str, lines: int = 80) -> str:
        if component == "containerd":
            return self.containerd.process.log_tail(lines)
        return self.components[component].log_tail(lines)

    # ---------------------------------------------------------------- stop
    def stop(self) -> list[str]:
        """Stop everything, undo the host changes; what is still different from the record."""
        try:
            with self._timed("stop"):
                return self._stop()
        finally:
            self.lock.release()

    def _stop(self) -> list[str]:
        for name in ("kube-scheduler", "kube-controller-manager"):
            self._stop_component(name)
        if self.control_plane.apiserver.running and self._alive_quietly("kubelet"):
            with self._timed("drain"):
                self._drain_pods()
        self._stop_component("kubelet")
        with self._timed("containerd stop"):
            self.containerd.stop()
        for pid in self.containerd.shim_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._stop_component("kube-proxy")
        if (self.node_binaries / "kube-proxy").exists():
            subprocess.run(
                [str(self.node_binaries / "kube-proxy"), "--cleanup"],
                capture_output=True,
                check=False,
                timeout=60,
            )
        self.control_plane.stop()
        before, self.before = self.before, None
        if before is None:  # never started, or stopped already
            return []
        with self._timed("undo"):
            return hostundo.restore(before, BRIDGE)

    def _alive_quietly(self, name: str) -> bool:
        process = self.components.get(name)
        return process is not None and process.running

    def _stop_component(self, name: str) -> None:
        process = self.components.get(name)
        if process is not None:
            process.stop()

    def _drain_pods(self) -> None:
        """Delete every pod and wait until the kubelet has torn its sandbox down."""
        try:
            for pod in self.api.list("pods"):
                meta = pod["metadata"]
                with contextlib.suppress(ApiRequestError):
                    self.api.api.request(
                        "DELETE",
                        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 1},
                    )
            wait_for(
                lambda: not self.api.list("pods") and not self.containerd.running_tasks(),
                POD_DRAIN_SECONDS,
                "every pod and sandbox to be gone",
                interval=0.5,
            )
        except AssertionError as error:
            print(f"real node: draining pods: {error}")
