"""The operator process's probes: alive once started, ready only while it can list its profiles.

On a real cluster the operator pod was Ready from its start although it could not reach the API
server (it retried for a minute, exited and restarted). ``/readyz``, the chart's readiness probe,
now follows a LIST of the profiles; ``/healthz``, the liveness probe, does not follow the API.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from tests.operator.harness import Cluster, OperatorFactory, wait_for
from tests.operator.harness.processes import OperatorProcess, free_port
from tests.operator.harness.profiles import CRD_PATH


def refusal(process: OperatorProcess, why: str) -> tuple[int, str] | None:
    """``/readyz``'s answer once it says the operator cannot list its profiles for ``why``."""
    status, body = process.probe("/readyz")
    return (status, body) if "cannot list" in body and why in body else None


def test_an_operator_that_cannot_reach_the_api_server_is_alive_but_not_ready(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    server = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    workdir = tmp_path / "operator"
    workdir.mkdir()
    process = OperatorProcess(kubeconfig, workdir, namespace="roofline-system")
    process.start()
    try:
        status, body = wait_for(
            lambda: refusal(process, "connection failed"),
            timeout=30,
            what="/readyz to say why it is not ready",
        )
        assert status == 503
        assert "rooflineprofiles.roofline.dev" in body
        assert process.probe("/healthz")[0] == 200, "liveness does not follow the API server"
    finally:
        process.stop()


def test_the_operator_turns_ready_once_its_profiles_can_be_listed(
    cluster: Cluster, start_operator: OperatorFactory
) -> None:
    operator = start_operator(cluster)  # no CRD yet: the LIST is answered 404
    status, _ = wait_for(
        lambda: refusal(operator, "HTTP 404"),
        timeout=30,
        what="/readyz to refuse while the CRD is missing",
    )
    assert status == 503
    cluster.apply_manifest(CRD_PATH)
    wait_for(lambda: operator.probe("/readyz")[0] == 200, timeout=30, what="/readyz to turn 200")
