"""Releasing a deleted profile: only what it owns goes, wherever its pods may be."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from prometheus_client import CollectorRegistry
from tests.operator.unit.operator_builders import spec
from tests.operator.unit.recording_client import RecordingClient

from roofline_operator.core.names import LABEL_PROFILE
from roofline_operator.decide.pods import ProfileRef, build_profiler_pod
from roofline_operator.decide.records import record_annotation_key
from roofline_operator.run.config import load_config
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.release import release_namespaces, release_profile
from roofline_operator.run.runtime import Runtime

PROFILE = {"metadata": {"name": "fleet", "uid": "u"}, "spec": {"nodeSelector": {"pool": "h"}}}


class ListingClient(RecordingClient):
    """Lists the given nodes and pods for the caches' priming."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        super().__init__()
        self.nodes = nodes
        self.pods = pods

    async def list_pages(
        self, path: str, label_selector: str | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        yield self.nodes if path == "/api/v1/nodes" else self.pods


def runtime_with(client: RecordingClient | None = None, **env: str) -> Runtime:
    runtime = Runtime(config=load_config([], env), metrics=OperatorMetrics(CollectorRegistry()))
    runtime.api.connection = kopf.ConnectionInfo(server="http://cluster.invalid")
    runtime.api.built_from = runtime.api.connection
    runtime.api.client = client  # type: ignore[assignment]
    return runtime


def node_body(name: str, profile: str | None, *annotated: str) -> dict[str, Any]:
    labels = {"pool": "h", **({LABEL_PROFILE: profile} if profile else {})}
    annotations = {record_annotation_key(p): "{}" for p in annotated}
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations}}


def pod_body(node: str, uid: str) -> dict[str, Any]:
    return build_profiler_pod(
        profile=ProfileRef("fleet", uid),
        spec=spec(),
        node=node,
        gpus=1,
        attempt=1,
        spec_hash="h",
        namespace="default",
        image="roofline:test",
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(PROFILE, {"default"}, id="configured"),
        pytest.param(
            {**PROFILE, "spec": {**PROFILE["spec"], "namespace": "gpu"}},
            {"default", "gpu"},
            id="spec-namespace",
        ),
        pytest.param(
            {
                "spec": {"dtype": "int3"},
                "status": {"nodes": [{"name": "a", "pod": "p", "podNamespace": "old"}]},
            },
            {"default"},
            id="invalid-spec-and-status",
        ),
    ],
)
def test_a_released_profile_deletes_pods_in_its_configured_and_spec_namespaces_only(
    body: dict[str, Any], expected: set[str]
) -> None:
    assert release_namespaces(runtime_with(), body) == expected


@pytest.mark.asyncio
async def test_releasing_a_profile_removes_its_labels_records_and_own_pods_only() -> None:
    nodes = [
        node_body("owned", "fleet", "fleet"),
        node_body("recorded", "other", "fleet", "other"),
        node_body("foreign", "other", "other"),
    ]
    own, foreign = pod_body("owned", "u"), pod_body("recorded", "someone-else")
    client = ListingClient(nodes, [own, foreign])
    runtime = runtime_with(client)
    runtime.metrics.start_profile("fleet")
    await release_profile(runtime, "fleet", PROFILE)
    assert client.deleted == [("default", own["metadata"]["name"])]
    labelled = dict(client.labelled)
    assert list(labelled) == ["owned"]
    assert labelled["owned"][LABEL_PROFILE] is None
    key = record_annotation_key("fleet")
    assert sorted(client.annotated) == [("owned", {key: None}), ("recorded", {key: None})]
    errors = runtime.metrics.registry.get_sample_value(
        "roofline_reconcile_errors_total", {"profile": "fleet"}
    )
    assert errors is None, "the released profile's series are gone"
