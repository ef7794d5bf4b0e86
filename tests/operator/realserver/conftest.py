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
    crds = [*yaml.safe_load_all(CRD_PATH.read_text())]
    nfd = control_plane.binaries / "nfd-api-crds.yaml"
    crds += [d for d in yaml.safe_load_all(nfd.read_text()) if d]
    cluster.apply_objects(crds, control_plane.kubectl_binary)
    for crd in crds:
        Kubectl(control_plane.kubeconfig, cluster.workdir, control_plane.kubectl_binary)(
            "wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s"
        )
    yield cluster
    cluster.stop()
    assert not cluster.internal_errors(), cluster.internal_errors()


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
