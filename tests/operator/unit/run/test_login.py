"""The operator's login: in a pod at the address the kubelet gives, as client-go's
``InClusterConfig`` does; elsewhere through a kubeconfig."""

from __future__ import annotations

import logging
from pathlib import Path

import kopf
import pytest
from prometheus_client import CollectorRegistry

from roofline_operator.run import login as login_module
from roofline_operator.run.config import load_config
from roofline_operator.run.handlers import login
from roofline_operator.run.login import in_cluster_server, login_in_cluster
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.runtime import Runtime


def fresh_runtime() -> Runtime:
    config = load_config([], {})
    return Runtime(config=config, metrics=OperatorMetrics(CollectorRegistry()))


def service_account(directory: Path, token: str = "sa-token\n") -> Path:
    """A service-account directory as the kubelet mounts it into a pod."""
    directory.mkdir()
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (directory / "namespace").write_text("roofline-system\n")
    return directory


@pytest.mark.parametrize(
    ("host", "port", "server"),
    [
        pytest.param("10.96.0.1", "443", "https://10.96.0.1:443", id="ipv4"),
        pytest.param("192.168.1.20", "6443", "https://192.168.1.20:6443", id="apiserver-port"),
        pytest.param("fd00:10:96::1", "443", "https://[fd00:10:96::1]:443", id="ipv6"),
        pytest.param("api.internal", "8443", "https://api.internal:8443", id="hostname"),
    ],
)
def test_the_server_is_the_kubelets_service_host_and_port(
    host: str, port: str, server: str
) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    assert in_cluster_server(environ) == server


@pytest.mark.parametrize(
    "environ",
    [
        pytest.param({}, id="neither"),
        pytest.param({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, id="host-only"),
        pytest.param({"KUBERNETES_SERVICE_PORT": "443"}, id="port-only"),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": " ", "KUBERNETES_SERVICE_PORT": "443"}, id="blank-host"
        ),
    ],
)
def test_without_both_variables_the_process_is_not_in_a_cluster(
    environ: dict[str, str],
) -> None:
    assert in_cluster_server(environ) is None


@pytest.mark.parametrize("port", ["https", "0", "65536", "-1", "4 43", "٤٤٣"])
def test_a_port_that_is_no_tcp_port_is_a_login_error_naming_the_variable(port: str) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": port}
    with pytest.raises(kopf.LoginError, match="KUBERNETES_SERVICE_PORT"):
        in_cluster_server(environ)


def test_the_in_cluster_login_carries_the_token_ca_and_namespace(tmp_path: Path) -> None:
    account = service_account(tmp_path / "sa")
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    info = login_in_cluster(kopf.OperatorSettings(), environ, account)
    assert info is not None
    assert info.server == "https://10.0.0.1:6443"
    assert info.token == "sa-token"
    assert info.ca_path == str(account / "ca.crt")
    assert info.default_namespace == "roofline-system"


def test_no_token_mounted_is_no_in_cluster_login(tmp_path: Path) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    assert login_in_cluster(kopf.OperatorSettings(), environ, tmp_path / "absent") is None


def test_the_login_handler_dials_the_service_host_not_the_cluster_dns_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kopf's own service-account login dials ``kubernetes.default.svc`` whatever the kubelet
    says; the operator's must dial where ``KUBERNETES_SERVICE_HOST``/``_PORT`` point."""
    monkeypatch.setattr(login_module, "SERVICE_ACCOUNT_DIR", service_account(tmp_path / "sa"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "172.18.0.2")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    memo = fresh_runtime()
    info = login(memo=memo, settings=kopf.OperatorSettings(), logger=logging.getLogger("t"))
    assert info is not None
    assert info.server == "https://172.18.0.2:6443"
    assert memo.api.connection is info


def test_outside_a_pod_the_login_handler_reads_the_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(login_module, "SERVICE_ACCOUNT_DIR", tmp_path / "no-account")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:7443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    memo = fresh_runtime()
    info = login(memo=memo, settings=kopf.OperatorSettings(), logger=logging.getLogger("t"))
    assert info is not None
    assert info.server == "https://127.0.0.1:7443"
