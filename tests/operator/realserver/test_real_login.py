"""The operator's in-cluster login against the real API server: the service-account directory a
kubelet mounts, and the address it puts in ``KUBERNETES_SERVICE_HOST``/``_PORT``."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import kopf
import pytest
from tests.operator.harness import wait_for
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.realsuite import RealOperators
from tests.operator.harness.releases import Release

from roofline_operator.core.names import GROUP, PLURAL, VERSION
from roofline_operator.run.kubeapi import ApiError, KubeClient, session_for
from roofline_operator.run.login import login_in_cluster


def mounted_account(cluster: RealCluster, release: Release, directory: Path) -> Path:
    """What the kubelet mounts for a pod of the release's service account: a bound token, the
    cluster's CA bundle and the namespace."""
    plane = cluster.control_plane
    token = plane.admin.request(
        "POST",
        f"/api/v1/namespaces/{release.namespace}/serviceaccounts/{release.service_account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    directory.mkdir()
    (directory / "token").write_text(token)
    shutil.copyfile(plane.pki.ca.cert, directory / "ca.crt")
    (directory / "namespace").write_text(release.namespace)
    return directory


async def list_profiles(info: kopf.ConnectionInfo) -> list[object]:
    client = KubeClient(session_for(info), info.server, concurrency=1)
    try:
        answer = await client.request("GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}?limit=1")
    finally:
        await client.close()
    return list(answer["items"])


def test_the_in_cluster_login_reaches_the_server_the_kubelet_names(
    real_cluster: RealCluster, node_release: Release, tmp_path: Path
) -> None:
    account = mounted_account(real_cluster, node_release, tmp_path / "serviceaccount")
    environ = {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(real_cluster.control_plane.port),
    }
    info = login_in_cluster(kopf.OperatorSettings(), environ, account)
    assert info is not None
    assert info.default_namespace == node_release.namespace
    assert asyncio.run(list_profiles(info)) == []


def test_a_token_of_another_cluster_is_refused(
    real_cluster: RealCluster, node_release: Release, tmp_path: Path
) -> None:
    """The check above has teeth: the same login with a token the server did not sign is 401."""
    account = mounted_account(real_cluster, node_release, tmp_path / "serviceaccount")
    (account / "token").write_text("not-a-token")
    environ = {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(real_cluster.control_plane.port),
    }
    info = login_in_cluster(kopf.OperatorSettings(), environ, account)
    assert info is not None
    with pytest.raises(ApiError) as refused:
        asyncio.run(list_profiles(info))
    assert refused.value.status == 401


def test_the_operator_is_ready_once_it_lists_the_profiles_as_the_charts_account(
    real_cluster: RealCluster, node_release: Release, real_operators: RealOperators
) -> None:
    """``/readyz`` (the chart's readiness probe) turns 200 on the LIST its RBAC allows."""
    operator = real_operators.start(node_release)
    wait_for(lambda: operator.probe("/readyz")[0] == 200, timeout=60, what="/readyz to be 200")
    assert operator.probe("/healthz")[0] == 200
