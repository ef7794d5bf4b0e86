"""A plain Kopf operator runs against the emulated API server: the harness carries Kopf itself."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import Cluster, FaultMode, wait_for
from tests.operator.harness.commands import die_with_parent, product_environment
from tests.operator.harness.samples import WIDGET_CRD, widget

HANDLERS = """
import kopf

@kopf.on.create("example.test", "v1", "widgets")
def paint(spec, **_):
    return {"painted": spec.get("color", "none")}

@kopf.on.delete("example.test", "v1", "widgets")
def scrape(body, name, **_):
    kopf.info(body, reason="Scraped", message=f"scraped {name}")
"""


@pytest.fixture
def kopf_operator(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(tmp_path, FaultMode.SUCCEED_INSTANTLY) as cluster:
        cluster.create("customresourcedefinitions", WIDGET_CRD, group="apiextensions.k8s.io")
        handlers = tmp_path / "handlers.py"
        handlers.write_text(HANDLERS)
        log = (tmp_path / "kopf.log").open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kopf",
                "run",
                "--standalone",
                "--all-namespaces",
                str(handlers),
            ],
            env=product_environment({"KUBECONFIG": str(cluster.kubeconfig)}),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        try:
            yield cluster
        finally:
            process.terminate()
            process.wait(timeout=20)
            log.close()
            print((tmp_path / "kopf.log").read_text())
        assert not cluster.internal_errors()


def test_kopf_adds_its_finalizer_writes_status_and_releases_the_object_on_delete(
    kopf_operator: Cluster,
) -> None:
    cluster = kopf_operator
    cluster.create("widgets", widget("kopf-1", color="blue"), group="example.test")

    def painted() -> dict[str, Any] | None:
        found = cluster.get("widgets", "kopf-1", group="example.test") or {}
        status = found.get("status", {})
        return found if status.get("paint") == {"painted": "blue"} else None

    found = wait_for(painted, timeout=30, what="Kopf to write the handler's result to status")
    assert found["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
    cluster.delete("widgets", "kopf-1", group="example.test")
    wait_for(
        lambda: cluster.get("widgets", "kopf-1", group="example.test") is None,
        timeout=30,
        what="Kopf to run the delete handler and remove its finalizer",
    )

    def scraped_event() -> bool:
        events = cluster.list("events", namespace="default")
        return any("scraped kopf-1" in e.get("message", "") for e in events)

    wait_for(scraped_event, timeout=15, what="Kopf to post the delete handler's event")
