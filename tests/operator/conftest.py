"""Fixtures that put an emulated cluster, ``kubectl`` and ``roofline operator`` in a test's hands.

Fixtures are opt-in by name: unit tests of the operator in this folder pay nothing for them.
Every fixture stops what it started, so no process outlives its test (or its module, for the
module-scoped cluster that suites of instant-result tests share).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.operator.harness import Cluster, FaultMode, Kubectl, OperatorFactory, OperatorProcess
from tests.operator.harness.profiles import CRD_PATH, EXAMPLE_PATH

PROFILER_NAMESPACE = "roofline-system"


@contextlib.contextmanager
def running_cluster(workdir: Path, mode: FaultMode) -> Iterator[Cluster]:
    """A started cluster with the profiler namespace; any emulator bug fails the test."""
    with Cluster(workdir, default_mode=mode) as emulated:
        emulated.create("namespaces", {"metadata": {"name": PROFILER_NAMESPACE}})
        yield emulated
        errors = emulated.internal_errors()
        assert not errors, f"the emulated API server failed on: {errors}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """An empty cluster whose kubelet runs the pods' real commands."""
    with running_cluster(tmp_path, FaultMode.RUN_COMMAND) as emulated:
        yield emulated


@pytest.fixture
def instant_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """An empty cluster whose pods succeed at once with synthetic results."""
    with running_cluster(tmp_path, FaultMode.SUCCEED_INSTANTLY) as emulated:
        yield emulated


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One instant-result cluster with the CRD installed, shared by a module's tests.

    Tests that share it use distinct profile and node names, so they cannot see each other.
    """
    require_product_files()
    with running_cluster(
        tmp_path_factory.mktemp("cluster"), FaultMode.SUCCEED_INSTANTLY
    ) as emulated:
        emulated.apply_manifest(CRD_PATH)
        yield emulated


def require_product_files() -> None:
    missing = [p for p in (CRD_PATH, EXAMPLE_PATH) if not p.exists()]
    if missing:
        pytest.fail(f"the operator's CRD or example is missing: {', '.join(map(str, missing))}")


@pytest.fixture
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    """``kubectl`` against whichever cluster fixture the test uses."""
    for name in ("cluster", "instant_cluster", "shared_cluster"):
        if name in request.fixturenames:
            emulated: Cluster = request.getfixturevalue(name)
            return Kubectl(emulated.kubeconfig, tmp_path)
    raise pytest.UsageError("kubectl needs a cluster fixture in the same test")


#: Short rounds so tests converge in seconds; the defaults are for clusters, not tests.
TEST_OPERATOR_ARGS = ("--resync-seconds", "2", "--batch-window-seconds", "0.1")


@pytest.fixture(scope="module")
def shared_operator(
    shared_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """One operator for the module's shared cluster; its log is printed when the module ends."""
    process = OperatorProcess(
        shared_cluster.kubeconfig,
        tmp_path_factory.mktemp("operator"),
        namespace=PROFILER_NAMESPACE,
        extra_args=TEST_OPERATOR_ARGS,
    )
    process.start()
    yield process
    process.stop()
    print(f"---- shared operator log ----\n{process.log_tail(200)}")


@pytest.fixture
def start_operator(tmp_path: Path) -> Iterator[OperatorFactory]:
    """Start ``roofline operator`` processes; all stop at teardown, and print their logs."""
    started: list[OperatorProcess] = []

    def start(cluster: Cluster, *extra_args: str, wait: bool = True) -> OperatorProcess:
        workdir = tmp_path / f"operator-{len(started)}"
        workdir.mkdir()
        process = OperatorProcess(
            cluster.kubeconfig,
            workdir,
            namespace=PROFILER_NAMESPACE,
            extra_args=[*TEST_OPERATOR_ARGS, *extra_args],
        )
        started.append(process)
        return process.start(wait=wait)

    yield start
    for process in started:
        process.stop()
        print(f"---- operator log ({process.log_path.name}) ----\n{process.log_tail(200)}")
