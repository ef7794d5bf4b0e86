"""How the real node's parts are configured: containerd, the CNI bridge, the kubelet,
kube-proxy, kube-scheduler and kube-controller-manager, as pure functions of a :class:`NodeLayout`.

Everything a part writes goes under the node's folder where the part lets it (containerd's state
and runc's root, the CNI plugins' results and addresses, the kubelet's root, certificates and pod
logs); what it writes elsewhere whatever it is told is undone by ``hoststate``. The settings that
differ from each part's defaults are the ones this machine kind needs (docs/testing-operator.md):

- containerd: ``restrict_oom_score_adj`` (root lacks CAP_SYS_RESOURCE: no process may lower its
  OOM score, and every sandbox would fail), the sandbox image built from the static ``pause``,
  network namespaces under its state folder, the cgroupfs driver (PID 1 is not systemd);
- the kubelet: ``failCgroupV1: false`` (cgroup v1 here), the node's own address (a kubelet
  refuses a loopback one), no image garbage collection (the imported images are the only copy),
  eviction only near empty disks (other tenants fill this machine), a short lease so that the
  node lifecycle controller sees a stopped kubelet within seconds;
- kube-proxy: iptables mode (no nft binary is needed), and conntrack and ``route_localnet`` left
  as the host has them;
- the controller manager: a node monitor grace period of seconds rather than 50 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

CNI_BIN_DIR = "/usr/lib/cni"
#: The CNI bridge; at most 15 characters, and named so that nothing else could own it.
BRIDGE = "roofline-cni0"
POD_SUBNET = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
NODE_NAME = "roofline-gpu-node"
#: The fake GPU's product, as GPU Feature Discovery would label a node with one.
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
GPU_RESOURCE = "nvidia.com/gpu"
#: The taint GPU node pools carry so that only pods asking for a GPU land there.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
SANDBOX_IMAGE = "localhost/roofline-pause:test"
#: How often the kubelet renews its lease, and how long the controller manager waits for one.
LEASE_SECONDS = 8
NODE_MONITOR_GRACE_SECONDS = 16
#: How often the HPA controller reconciles (15 s by default): KEDA's scaling test waits on it.
HPA_SYNC_SECONDS = 3


@dataclass(frozen=True)
class NodeLayout:
    """Where the node's parts live and how they reach each other."""

    workdir: Path
    #: The containerd root: kept between sessions (the imported images), unlike the rest.
    containerd_root: Path
    node_ip: str
    apiserver_url: str
    ca_cert: Path
    kubelet_port: int
    kubelet_healthz_port: int
    proxy_healthz_port: int
    proxy_metrics_port: int
    scheduler_port: int
    controller_manager_port: int

    @property
    def containerd_state(self) -> Path:
        return self.workdir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_state / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.workdir / "cni" / "net.d"

    @property
    def kubelet_root(self) -> Path:
        return self.workdir / "kubelet"

    def kubeconfig(self, component: str) -> Path:
        return self.workdir / f"{component}.kubeconfig"

    def config_file(self, component: str) -> Path:
        return self.workdir / f"{component}.yaml"


def containerd_config(layout: NodeLayout) -> str:
    """containerd's config.toml (version 2, containerd 1.6)."""
    state = layout.containerd_state
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = f"{cri[:-1]}.containerd.runtimes.runc]"
    return f"""version = 2
root = "{layout.containerd_root}"
state = "{state / "state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "{layout.containerd_socket}"

[ttrpc]
  address = "{state / "containerd.sock.ttrpc"}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{state / "opt"}"

{cri}
  sandbox_image = "{SANDBOX_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

{cri[:-1]}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

{runc}
  runtime_type = "io.containerd.runc.v2"

{runc[:-1]}.options]
  SystemdCgroup = false
  Root = "{state / "runc"}"

{cri[:-1]}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{layout.cni_conf_dir}"
  max_conf_num = 1
"""


def cni_network(layout: NodeLayout) -> dict[str, Any]:
    """A bridge network with host-local addresses; the node routes to the pods through it."""
    return {
        "cniVersion": "0.4.0",
        "name": "roofline-pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.workdir / "cni" / "addresses"),
                },
            }
        ],
    }


def kubelet_config(layout: NodeLayout) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": layout.node_ip,
        "port": layout.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": layout.kubelet_healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(layout.ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "podLogsDir": str(layout.workdir / "pod-logs"),
        "staticPodPath": "",
        "registerWithTaints": [GPU_TAINT],
        "nodeLeaseDurationSeconds": LEASE_SECONDS,
        "nodeStatusUpdateFrequency": "4s",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        "clusterDomain": "cluster.local",
    }


def kubelet_argv(binaries: Path, layout: NodeLayout) -> list[str]:
    return [
        str(binaries / "kubelet"),
        f"--config={layout.config_file('kubelet')}",
        f"--kubeconfig={layout.kubeconfig('kubelet')}",
        f"--root-dir={layout.kubelet_root}",
        f"--cert-dir={layout.workdir / 'kubelet-pki'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={layout.node_ip}",
        f"--node-labels=nvidia.com/gpu.product={GPU_PRODUCT}",
        # Its own OOM score stays the host's: lowering it needs CAP_SYS_RESOURCE.
        "--oom-score-adj=0",
        "--v=1",
    ]


def kube_proxy_config(layout: NodeLayout) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig("kube-proxy"))},
        "mode": "iptables",
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": CLUSTER_CIDR,
        "healthzBindAddress": f"127.0.0.1:{layout.proxy_healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{layout.proxy_metrics_port}",
        "oomScoreAdj": 0,
        "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def kube_proxy_argv(binaries: Path, layout: NodeLayout) -> list[str]:
    return [
        str(binaries / "kube-proxy"),
        f"--config={layout.config_file('kube-proxy')}",
        "--v=1",
    ]


def scheduler_argv(binaries: Path, layout: NodeLayout) -> list[str]:
    kubeconfig = layout.kubeconfig("kube-scheduler")
    return [
        str(binaries / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.scheduler_port}",
        f"--cert-dir={layout.workdir / 'kube-scheduler-certs'}",
        "--leader-elect=false",
        "--v=1",
    ]


def controller_manager_argv(
    binaries: Path, layout: NodeLayout, service_account_key: Path, service_range: str
) -> list[str]:
    kubeconfig = layout.kubeconfig("kube-controller-manager")
    return [
        str(binaries / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.controller_manager_port}",
        f"--cert-dir={layout.workdir / 'kube-controller-manager-certs'}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={service_account_key}",
        f"--root-ca-file={layout.ca_cert}",
        f"--service-cluster-ip-range={service_range}",
        "--allocate-node-cidrs=false",
        "--node-monitor-period=2s",
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s",
        f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_SECONDS}s",
        "--v=1",
    ]


def kubeconfig_document(
    layout: NodeLayout, cert: Path, key: Path, namespace: str | None = None
) -> dict[str, Any]:
    """A kubeconfig for one component, authenticated by its client certificate."""
    context: dict[str, str] = {"cluster": "node", "user": "component"}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "node",
                "cluster": {
                    "server": layout.apiserver_url,
                    "certificate-authority": str(layout.ca_cert),
                },
            }
        ],
        "users": [
            {"name": "component", "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "node", "context": context}],
        "current-context": "node",
    }
