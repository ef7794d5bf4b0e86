"""Fixtures of the real-node suite: a real single-node cluster on this machine.

Every test here is marked ``realnode``. It needs root, containerd, runc, the CNI plugins,
buildah, iptables, nft and Go (``.ci/run`` installs them); the Kubernetes binaries are built from
source on first use (``scripts/control-plane.sh`` and ``scripts/control-plane.sh --node``) and
the project's images by ``make images``. Elsewhere the suite is skipped with the reason.

A node is started per module (modules run one after the other, so two nodes never share the
host's fixed paths), and each stop must leave the host as it was: a leftover fails the module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from tests.deploy import images as img
from tests.operator.harness.consumers import ConsumersUnavailable, build_consumers
from tests.operator.harness.containerd import project_images
from tests.operator.harness.controlplane import ControlPlaneUnavailable, build_binaries
from tests.operator.harness.processes import Kubectl
from tests.operator.harness.realnode import RealNode, build_node_binaries, unavailable_reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realnode)


@pytest.fixture(scope="session")
def node_binaries() -> tuple[Path, Path]:
    """The control plane's binaries and the node's, built on first use."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    try:
        return build_binaries(), build_node_binaries()
    except ControlPlaneUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def consumer_binaries(node_binaries: tuple[Path, Path]) -> Path:
    """Kueue's and KEDA's binaries and manifests (``scripts/consumers.sh``), built on first use."""
    try:
        return build_consumers()
    except ConsumersUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def built_images(node_binaries: tuple[Path, Path]) -> img.Images:
    """Both images of the Dockerfile, from ``make images`` (rebuilt only when changed)."""
    reason = img.unavailable_reason()
    if reason is not None:
        pytest.skip(f"the project's images cannot be built: {reason}")
    return img.build_images()


@contextlib.contextmanager
def running_node(
    binaries: tuple[Path, Path], workdir: Path, images: img.Images | None = None
) -> Iterator[RealNode]:
    """A started node; stopping it must leave nothing behind on the host."""
    node = RealNode(*binaries, workdir, project_images(images) if images else ())
    node.start()
    print(f"real node started: {node.timings}")
    try:
        yield node
    finally:
        leftovers = node.stop()
        assert not leftovers, "the real node left changes on the host:\n" + "\n".join(leftovers)


@pytest.fixture(scope="module")
def real_node(
    node_binaries: tuple[Path, Path],
    built_images: img.Images,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealNode]:
    """The node with the project's images imported."""
    with running_node(node_binaries, tmp_path_factory.mktemp("real-node"), built_images) as node:
        yield node


def node_kubectl(node: RealNode, workdir: Path) -> Kubectl:
    return Kubectl(node.kubeconfig, workdir, node.kubectl_binary)


def log_tails(node: RealNode, components: Sequence[str]) -> str:
    return "\n".join(f"---- {c} ----\n{node.log_tail(c)}" for c in components)
