"""Opt-in end-to-end run against a real cluster: ``pytest -m e2e tests/operator/e2e``.

Prerequisites: ``KUBECONFIG`` names a cluster where the chart is installed (CRD and a running
operator) and at least one GPU node matches ``ROOFLINE_E2E_NODE_SELECTOR`` (``key=value``,
default ``nvidia.com/gpu.present=true``). The test applies the shipped example under its own
name with a quick sweep, waits for every matched node to be profiled, reads the results as a user
does (``kubectl get``, node labels), then deletes the profile and checks that our labels are gone.
It never touches profiles or labels it did not create.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import Kubectl, wait_for
from tests.operator.harness.profiles import LABEL_PREFIX, example_profile, write_manifest

pytestmark = pytest.mark.e2e

NAME = "roofline-e2e"
TIMEOUT_SECONDS = float(os.environ.get("ROOFLINE_E2E_TIMEOUT", "1800"))


@pytest.fixture(scope="module")
def real_kubectl(tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        pytest.skip("KUBECONFIG is not set: no cluster to run against")
    return Kubectl(Path(kubeconfig), tmp_path_factory.mktemp("e2e"))


@pytest.fixture(scope="module")
def selector() -> dict[str, str]:
    key, _, value = os.environ.get(
        "ROOFLINE_E2E_NODE_SELECTOR", "nvidia.com/gpu.present=true"
    ).partition("=")
    return {key: value}


@pytest.fixture(scope="module")
def applied(
    real_kubectl: Kubectl, selector: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    real_kubectl("get", "crd", "rooflineprofiles.roofline.dev")
    doc = example_profile(
        NAME,
        selector,
        dtype="bfloat16",
        shape={"k": 4096, "n": 4096},
        batches=[1, 8, 64, 256],
        maxParallel=1,
    )
    doc["spec"].pop("reprofileInterval", None)
    manifest = write_manifest(tmp_path_factory.mktemp("manifest"), doc)
    real_kubectl("apply", "-f", str(manifest))
    yield manifest
    real_kubectl(
        "delete", "-f", str(manifest), "--ignore-not-found", "--wait=true", "--timeout=300s"
    )


def status(real_kubectl: Kubectl) -> dict[str, Any]:
    found: dict[str, Any] = real_kubectl.json("get", "rooflineprofile", NAME)
    return found.get("status") or {}


def test_a_real_cluster_profiles_its_gpu_nodes_and_labels_them(
    real_kubectl: Kubectl, applied: Path
) -> None:
    def done() -> dict[str, Any] | None:
        summary = status(real_kubectl).get("summary") or {}
        matched = summary.get("matched", 0)
        finished = summary.get("profiled", 0) + summary.get("failed", 0)
        return summary if matched and finished == matched else None

    summary = wait_for(
        done, timeout=TIMEOUT_SECONDS, what="every matched node to finish", interval=10
    )
    assert summary["profiled"] >= 1, status(real_kubectl)
    row = next(r for r in real_kubectl.table("rooflineprofiles") if r["NAME"] == NAME)
    assert int(row["MIN-BATCH"]) >= 1
    profiled = [n["name"] for n in status(real_kubectl)["nodes"] if n["state"] == "Profiled"]
    node = real_kubectl.json("get", "node", profiled[0])
    labels = node["metadata"]["labels"]
    assert labels[f"{LABEL_PREFIX}profile"] == NAME
    assert float(labels[f"{LABEL_PREFIX}ridge-point"]) > 1


def test_deleting_the_profile_removes_our_labels_from_real_nodes(
    real_kubectl: Kubectl, applied: Path
) -> None:
    profiled = [
        n["name"] for n in status(real_kubectl).get("nodes", []) if n["state"] == "Profiled"
    ]
    real_kubectl("delete", "-f", str(applied), "--wait=true", "--timeout=300s")
    deadline = time.monotonic() + 300
    for name in profiled:

        def unlabelled(node: str = name) -> bool:
            labels = real_kubectl.json("get", "node", node)["metadata"].get("labels") or {}
            return labels.get(f"{LABEL_PREFIX}profile") != NAME

        wait_for(
            unlabelled,
            timeout=max(1.0, deadline - time.monotonic()),
            what=f"our labels to leave {name}",
            interval=5,
        )
