"""How the operator finds and authenticates to the API server: in a pod as client-go does, else
through a kubeconfig.

Kopf's own service-account login dials ``https://kubernetes.default.svc``, which needs cluster
DNS and ignores the address the kubelet hands every container. client-go's ``InClusterConfig``
(and the Python client's ``load_incluster_config``, kube-rs' ``Config::in_cluster``) reads the
``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` environment variables instead, and
counts a process without both as not in a cluster; the operator follows that convention, so it
reaches the API server wherever the kubelet says it is, with or without DNS.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import kopf

#: Where the kubelet mounts a pod's service account token, CA bundle and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_VARIABLE = "KUBERNETES_SERVICE_HOST"
PORT_VARIABLE = "KUBERNETES_SERVICE_PORT"
#: Above Kopf's kubeconfig login (10), as Kopf ranks its own service-account login.
IN_CLUSTER_PRIORITY = 20


def in_cluster_server(environ: Mapping[str, str]) -> str | None:
    """The API server's URL from the kubelet's environment, as client-go builds it
    (``"https://" + net.JoinHostPort(host, port)``); ``None`` outside a cluster.

    A port that is not a TCP port number is a :class:`kopf.LoginError` naming the variable,
    not a URL that fails later with a less helpful message.
    """
    host = environ.get(HOST_VARIABLE, "").strip()
    port = environ.get(PORT_VARIABLE, "").strip()
    if not host or not port:
        return None
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise kopf.LoginError(f"{PORT_VARIABLE}={port!r} is not a TCP port number")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address, bracketed as net.JoinHostPort does
    return f"https://{host}:{port}"


def login_in_cluster(
    settings: kopf.OperatorSettings,
    environ: Mapping[str, str],
    account_dir: Path | None = None,
) -> kopf.ConnectionInfo | None:
    """The pod's service account at the address the kubelet gave; ``None`` outside a pod
    (no address in the environment, or no token mounted in ``account_dir``, by default
    :data:`SERVICE_ACCOUNT_DIR`)."""
    server = in_cluster_server(environ)
    account_dir = SERVICE_ACCOUNT_DIR if account_dir is None else account_dir
    token_path = account_dir / "token"
    if server is None or not token_path.is_file():
        return None
    token = token_path.read_text(encoding="utf-8").strip()
    ca_path = account_dir / "ca.crt"
    namespace_path = account_dir / "namespace"
    namespace = (
        namespace_path.read_text(encoding="utf-8").strip() if namespace_path.is_file() else ""
    )
    return kopf.ConnectionInfo(
        server=server,
        ca_path=str(ca_path) if ca_path.is_file() else None,
        token=token or None,
        default_namespace=namespace or None,
        trust_env=settings.networking.trust_env,
        priority=IN_CLUSTER_PRIORITY,
    )
