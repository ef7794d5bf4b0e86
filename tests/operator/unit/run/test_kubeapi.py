"""The API client against a tiny in-process HTTP server that answers like kube-apiserver."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from tests.operator.harness.patching import apply_patch

from roofline_operator.decide.node_features import (
    build_node_feature,
    node_feature_name,
    profile_selector,
)
from roofline_operator.decide.records import record_annotation_key
from roofline_operator.run.kubeapi import ApiError, KubeClient, list_node_features


class FakeApi:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str, Any]] = []
        self.queries: list[dict[str, str]] = []
        #: Body of a successful answer, per (method, path).
        self.payloads: dict[tuple[str, str], dict[str, Any]] = {}
        #: Status codes to answer before the real answer, per (method, path).
        self.failures: dict[tuple[str, str], list[int]] = {}
        self.answer: dict[tuple[str, str], int] = {}

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        key = (request.method, request.path)
        self.requests.append((request.method, request.path, request.content_type, body))
        self.queries.append(dict(request.query))
        queued = self.failures.get(key)
        status = queued.pop(0) if queued else self.answer.get(key, 200)
        payload = (
            {"kind": "Status", "message": f"answer {status}"}
            if status >= 400
            else self.payloads.get(key, {})
        )
        return web.json_response(payload, status=status)


@pytest_asyncio.fixture
async def api() -> AsyncIterator[tuple[FakeApi, KubeClient]]:
    fake = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    client = KubeClient(aiohttp.ClientSession(), f"http://{host}:{port}", concurrency=4)
    try:
        yield fake, client
    finally:
        await client.close()
        await runner.cleanup()


POD = {"metadata": {"name": "p", "namespace": "ns"}}


@pytest.mark.asyncio
async def test_a_create_that_conflicts_means_the_pod_exists(
    api: tuple[FakeApi, KubeClient],
) -> None:
    fake, client = api
    assert await client.create_pod(POD) is True
    fake.answer[("POST", "/api/v1/namespaces/ns/pods")] = 409
    assert await client.create_pod(POD) is False
    assert len(fake.requests) == 2


@pytest.mark.asyncio
async def test_server_errors_are_retried_then_succeed(api: tuple[FakeApi, KubeClient]) -> None:
    fake, client = api
    fake.failures[("PATCH", "/api/v1/nodes/gpu-1")] = [503, 429]
    assert await client.patch_node_labels("gpu-1", {"roofline.dev/min-batch": "64"}) is True
    assert len(fake.requests) == 3
    _method, _path, content_type, body = fake.requests[-1]
    assert content_type == "application/merge-patch+json"
    assert body == {"metadata": {"labels": {"roofline.dev/min-batch": "64"}}}


@pytest.mark.asyncio
async def test_a_conflict_on_a_status_patch_is_retried(api: tuple[FakeApi, KubeClient]) -> None:
    fake, client = api
    path = "/apis/roofline.dev/v1alpha1/rooflineprofiles/fleet/status"
    fake.failures[("PATCH", path)] = [409]
    await client.patch_profile_status("fleet", {"observedGeneration": 2})
    assert [r[1] for r in fake.requests] == [path, path]
    assert fake.requests[-1][3] == {"status": {"observedGeneration": 2}}


@pytest.mark.asyncio
async def test_persistent_server_errors_give_up_with_an_api_error(
    api: tuple[FakeApi, KubeClient],
) -> None:
    fake, client = api
    fake.answer[("PATCH", "/api/v1/nodes/gpu-1")] = 500
    with pytest.raises(ApiError) as caught:
        await client.patch_node_labels("gpu-1", {"a": None})
    assert caught.value.status == 500
    assert len(fake.requests) == 4


@pytest.mark.asyncio
async def test_a_refused_pod_is_not_retried(api: tuple[FakeApi, KubeClient]) -> None:
    fake, client = api
    fake.answer[("POST", "/api/v1/namespaces/ns/pods")] = 403
    with pytest.raises(ApiError, match="HTTP 403: answer 403"):
        await client.create_pod(POD)
    assert len(fake.requests) == 1


@pytest.mark.asyncio
async def test_missing_objects_are_not_errors_for_deletes_and_label_patches(
    api: tuple[FakeApi, KubeClient],
) -> None:
    fake, client = api
    fake.answer[("DELETE", "/api/v1/namespaces/ns/pods/p")] = 404
    fake.answer[("PATCH", "/api/v1/nodes/gone")] = 404
    await client.delete_pod("ns", "p")
    assert await client.patch_node_labels("gone", {"a": None}) is False


@pytest.mark.asyncio
async def test_a_retried_request_is_logged_once_at_info(
    api: tuple[FakeApi, KubeClient], caplog: pytest.LogCaptureFixture
) -> None:
    fake, client = api
    fake.failures[("PATCH", "/api/v1/nodes/gpu-1")] = [503, 429, 500]
    with caplog.at_level(logging.INFO, logger="roofline_operator.run.kubeapi"):
        assert await client.patch_node_labels("gpu-1", {"a": "1"}) is True
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["Retrying PATCH /api/v1/nodes/gpu-1 after HTTP 503: answer 503"]
    assert len(fake.requests) == 4


@pytest.mark.asyncio
async def test_finished_pods_are_deleted_with_one_selected_collection_request(
    api: tuple[FakeApi, KubeClient],
) -> None:
    fake, client = api
    fake.payloads[("DELETE", "/api/v1/namespaces/ns/pods")] = {"items": [{}, {}]}
    labels = "roofline.dev/profile=fleet,roofline.dev/node in (gpu-1,gpu-2)"
    fields = "status.phase!=Pending,status.phase!=Running"
    assert await client.delete_pods("ns", labels, fields) == 2
    ((method, path, _, body),) = fake.requests
    assert (method, path) == ("DELETE", "/api/v1/namespaces/ns/pods")
    assert fake.queries == [{"labelSelector": labels, "fieldSelector": fields}]
    assert body["propagationPolicy"] == "Background"


@pytest.mark.asyncio
async def test_a_config_map_is_read_and_a_missing_one_is_none(
    api: tuple[FakeApi, KubeClient],
) -> None:
    fake, client = api
    path = "/api/v1/namespaces/ns/configmaps/cfg"
    fake.payloads[("GET", path)] = {"data": {"config.json": "{}"}}
    assert await client.get_config_map("ns", "cfg") == {"config.json": "{}"}
    fake.answer[("GET", "/api/v1/namespaces/ns/configmaps/gone")] = 404
    assert await client.get_config_map("ns", "gone") is None


@pytest.mark.asyncio
async def test_a_profiles_node_features_are_listed_by_its_selector_with_their_records(
    api: tuple[FakeApi, KubeClient],
) -> None:
    fake, client = api
    path = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/op/nodefeatures"
    key = record_annotation_key("fleet")
    recorded = build_node_feature("a", {}, "fleet", "op", {key: '{"s":"Profiled"}'})
    bare = build_node_feature("b", {}, "fleet", "op")
    nameless = {"metadata": {"labels": {}}}
    fake.payloads[("GET", path)] = {"items": [recorded, bare, nameless]}
    found = await list_node_features(client, "op", "fleet")
    assert [(f.name, f.node, f.carrier.records) for f in found] == [
        (node_feature_name("fleet", "a"), "a", {key: '{"s":"Profiled"}'}),
        (node_feature_name("fleet", "b"), "b", {}),
    ]
    assert fake.queries[-1]["labelSelector"] == profile_selector("fleet")


@pytest.mark.asyncio
async def test_rewriting_a_node_feature_leaves_exactly_the_intended_labels_and_annotations(
    api: tuple[FakeApi, KubeClient],
) -> None:
    """A merge patch of a smaller ``spec.labels`` removed nothing: the labels a profile stopped
    owning (``labelNodes: false``, another profile taking the node) stayed, through nfd-master,
    on the node. The patch sent on a conflict leaves the stored object equal to the new one."""
    fake, client = api
    path = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/op/nodefeatures"
    key = record_annotation_key("fleet")
    labels = {"roofline.dev/min-batch": "128", "roofline.dev/profile": "fleet"}
    stored = build_node_feature("a", labels, "fleet", "op", {key: '{"old":1}'})
    fake.answer[("POST", path)] = 409
    wanted = build_node_feature("a", {}, "fleet", "op")
    await client.write_node_feature(wanted)
    method, sent_path, content_type, patch = fake.requests[-1]
    assert (method, sent_path) == ("PATCH", f"{path}/{node_feature_name('fleet', 'a')}")
    written = apply_patch(content_type, stored, patch)
    assert written["spec"] == {"labels": {}}
    assert written["metadata"]["labels"] == wanted["metadata"]["labels"]
    assert written["metadata"].get("annotations") == {}
