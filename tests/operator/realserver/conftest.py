"""Fixtures of the real-server suite: one etcd + kube-apiserver for the session, the chart's
identity installed on it, and ``roofline operator`` running as the chart's service account.

Every test here is marked ``apiserver``. The binaries are built from source on first use
(``scripts/control-plane.sh``, minutes, once per machine); without a Go toolchain the suite is
skipped with that reason. Tests share the control plane, so each stops its operators and removes
what it created (profiles, nodes, pods, NodeFeatures) before the next one starts, and each fails
if the operator was refused any request (HTTP 403) while it ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tests.operator.harness import Kubectl
from tests.operator.harness.controlplane import (
    ControlPlane,
    ControlPlaneUnavailable,
    build_binaries,
)
from tests.operator.harness.foreign_crds import ForeignCrdsUnavailable, foreign_crd_files
from tests.operator.harness.profiles import CRD_PATH
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.realsuite import (
    NFD_NAMESPACE,
    PROFILER_NAMESPACE,
    RealOperators,
    remove_everything,
)
from tests.operator.harness.releases import Release, install


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.apiserver)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        binaries = build_binaries()
    except ControlPlaneUnavailable as reason:
        pytest.skip(str(reason))
    with ControlPlane(binaries, tmp_path_factory.mktemp("control-plane")) as started:
        yield started


@pytest.fixture(scope="session")
def real_cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealCluster]:
    """The control plane with the chart's CRDs, NFD's NodeFeature CRD and the stand-in nodes."""
    cluster = RealCluster(control_plane, tmp_path_factory.mktemp("nodes")).start()
    kubectl = Kubectl(control_plane.kubeconfig, cluster.workdir, control_plane.kubectl_binary)
    install_crd_files(kubectl, [CRD_PATH, control_plane.binaries / "nfd-api-crds.yaml"])
    yield cluster
    cluster.stop()
    assert not cluster.internal_errors(), cluster.internal_errors()


def install_crd_files(kubectl: Kubectl, paths: list[Path]) -> None:
    """Install CRDs from their files with the real kubectl, as a user would (kubectl reads the
    YAML: a key it reads differently from Python fails here), and wait until they serve."""
    for path in paths:
        names = kubectl("apply", "--server-side", "-f", str(path), "-o", "name").stdout.split()
        assert names, f"{path} holds no object"
        kubectl("wait", "--for=condition=Established", *names, "--timeout=60s")


@pytest.fixture(scope="session")
def foreign_crds(real_cluster: RealCluster) -> list[Path]:
    """The Prometheus Operator's and Kueue's CRDs that shipped files use, installed."""
    try:
        files = foreign_crd_files()
    except ForeignCrdsUnavailable as reason:
        pytest.skip(str(reason))
    plane = real_cluster.control_plane
    install_crd_files(Kubectl(plane.kubeconfig, real_cluster.workdir, plane.kubectl_binary), files)
    return files


@pytest.fixture(scope="session")
def node_release(real_cluster: RealCluster) -> Release:
    """The chart with its defaults (node-label backend), as `helm install -n roofline-system`."""
    return install(
        real_cluster,
        real_cluster.control_plane.kubectl_binary,
        {},
        "roofline-operator",
        PROFILER_NAMESPACE,
        (PROFILER_NAMESPACE,),
    )


@pytest.fixture(scope="session")
def nfd_release(real_cluster: RealCluster) -> Release:
    """The chart's nodefeature scenario, installed as its own release in its own namespace."""
    values = yaml.safe_load((CRD_PATH.parents[1] / "ci" / "nodefeature-values.yaml").read_text())
    return install(
        real_cluster,
        real_cluster.control_plane.kubectl_binary,
        values,
        "roofline-nfd",
        NFD_NAMESPACE,
        (NFD_NAMESPACE,),
    )


@pytest.fixture
def kubectl(real_cluster: RealCluster, tmp_path: Path) -> Kubectl:
    """The pinned kubectl, built with the server, as the cluster admin."""
    cp = real_cluster.control_plane
    return Kubectl(cp.kubeconfig, tmp_path, cp.kubectl_binary)


@pytest.fixture
def real_operators(real_cluster: RealCluster, tmp_path: Path) -> Iterator[RealOperators]:
    operators = RealOperators(real_cluster, tmp_path)
    yield operators
    for process, _ in operators.started:
        process.stop()
        print(f"---- operator log ({process.workdir.name}) ----\n{process.log_tail(200)}")
    refused = operators.forbidden()
    unlisted = operators.undeclared()
    remove_everything(real_cluster)
    assert not refused, "the API server refused the operator (403):\n" + "\n".join(refused)
    assert not unlisted, "requests missing from OPERATOR_REQUESTS:\n" + "\n".join(unlisted)
