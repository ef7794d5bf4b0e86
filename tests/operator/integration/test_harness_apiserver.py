"""The emulated API server behaves like kube-apiserver where Kopf and kubectl can tell."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.operator.harness import Cluster, FaultMode, Kubectl
from tests.operator.harness.samples import WIDGET_CRD, widget


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("api"), FaultMode.SUCCEED_INSTANTLY) as cluster:
        cluster.create("customresourcedefinitions", WIDGET_CRD, group="apiextensions.k8s.io")
        yield cluster
        assert not cluster.internal_errors()


@pytest.fixture
def ctl(api: Cluster, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path)


def http(
    cluster: Cluster,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/merge-patch+json",
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        cluster.url + path, data=data, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, _decode(response.read())
    except urllib.error.HTTPError as error:
        return error.code, _decode(error.read())


def _decode(raw: bytes) -> Any:
    text = raw.decode()
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        return [json.loads(line) for line in lines]
    return json.loads(text) if text.strip() else None


WIDGETS = "/apis/example.test/v1/widgets"


def test_kubectl_apply_creates_a_custom_resource_with_schema_defaults(
    ctl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "w.yaml"
    manifest.write_text(yaml.safe_dump(widget("applied", color="red")))
    assert "created" in ctl("apply", "-f", str(manifest)).stdout
    assert ctl.json("get", "widget", "applied")["spec"] == {"color": "red", "size": 3}


def test_kubectl_get_prints_the_crd_printer_columns(api: Cluster, ctl: Kubectl) -> None:
    api.create("widgets", widget("printed", size=7), group="example.test")
    api.patch(
        "widgets",
        "printed",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        group="example.test",
        subresource="status",
    )
    rows = {row["NAME"]: row for row in ctl.table("wd")}
    assert rows["printed"]["SIZE"] == "7"
    assert rows["printed"]["READY"] == "True"
    assert rows["printed"]["AGE"].endswith("s")


def test_kubectl_reapply_of_a_changed_spec_bumps_generation(ctl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "w.yaml"
    manifest.write_text(yaml.safe_dump(widget("reapplied", size=1)))
    ctl("apply", "-f", str(manifest))
    assert "unchanged" in ctl("apply", "-f", str(manifest)).stdout
    manifest.write_text(yaml.safe_dump(widget("reapplied", size=2)))
    assert "configured" in ctl("apply", "-f", str(manifest)).stdout
    applied = ctl.json("get", "widget", "reapplied")
    assert (applied["spec"]["size"], applied["metadata"]["generation"]) == (2, 2)


def test_kubectl_apply_rejects_unknown_fields_strictly(ctl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "w.yaml"
    manifest.write_text(yaml.safe_dump(widget("strict", colour="red")))
    result = ctl("apply", "-f", str(manifest), check=False)
    assert result.returncode != 0
    assert 'unknown field "spec.colour"' in result.stderr


def test_schema_violations_are_rejected_with_422(api: Cluster) -> None:
    status, body = http(api, "POST", WIDGETS, widget("too-small", size=0), "application/json")
    assert status == 422
    assert "spec.size" in body["message"]


def test_status_writes_change_only_status_and_spec_writes_ignore_status(api: Cluster) -> None:
    created = api.create("widgets", widget("split", size=1), group="example.test")
    _, after_status = http(
        api, "PATCH", f"{WIDGETS}/split/status", {"spec": {"size": 5}, "status": {"phase": "Done"}}
    )
    assert after_status["spec"]["size"] == 1
    assert after_status["status"] == {"phase": "Done"}
    assert after_status["metadata"]["generation"] == created["metadata"]["generation"]
    _, after_spec = http(
        api, "PATCH", f"{WIDGETS}/split", {"spec": {"size": 2}, "status": {"phase": "X"}}
    )
    assert after_spec["status"] == {"phase": "Done"}
    assert after_spec["metadata"]["generation"] == created["metadata"]["generation"] + 1


def test_a_write_with_a_stale_resource_version_is_a_conflict(api: Cluster) -> None:
    created = api.create("widgets", widget("contended", size=1), group="example.test")
    api.patch("widgets", "contended", {"spec": {"size": 2}}, group="example.test")
    stale = {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"size": 3},
    }
    status, body = http(api, "PATCH", f"{WIDGETS}/contended", stale)
    assert (status, body["reason"]) == (409, "Conflict")


def test_a_json_patch_whose_test_fails_is_unprocessable(api: Cluster) -> None:
    api.create("widgets", widget("tested", size=1), group="example.test")
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.test/x"]},
    ]
    status, _ = http(api, "PATCH", f"{WIDGETS}/tested", ops, "application/json-patch+json")
    assert status == 422


def test_strategic_merge_is_refused_for_custom_resources(api: Cluster) -> None:
    api.create("widgets", widget("smp", size=1), group="example.test")
    status, _ = http(
        api,
        "PATCH",
        f"{WIDGETS}/smp",
        {"spec": {"size": 2}},
        "application/strategic-merge-patch+json",
    )
    assert status == 415


def test_finalizers_hold_a_deleted_object_until_they_are_removed(api: Cluster) -> None:
    api.create(
        "widgets",
        {**widget("held"), "metadata": {"name": "held", "finalizers": ["x/y"]}},
        group="example.test",
    )
    status, body = http(api, "DELETE", f"{WIDGETS}/held")
    assert status == 200
    assert body["metadata"]["deletionTimestamp"]
    assert api.get("widgets", "held", group="example.test") is not None
    api.patch("widgets", "held", {"metadata": {"finalizers": None}}, group="example.test")
    assert api.get("widgets", "held", group="example.test") is None


def test_deleting_an_owner_garbage_collects_its_pods(api: Cluster) -> None:
    owner = api.create("widgets", widget("owner"), group="example.test")
    reference = {
        "apiVersion": "example.test/v1",
        "kind": "Widget",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    pod = {
        "metadata": {"name": "owned", "ownerReferences": [reference]},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": ""},
    }
    api.create("pods", pod, namespace="default")
    api.delete("widgets", "owner", group="example.test")
    assert api.get("pods", "owned", namespace="default") is None


def test_label_and_field_selectors_filter_lists(api: Cluster) -> None:
    for name, labels, node in (
        ("sel-a", {"tier": "gpu", "zone": "a"}, "n1"),
        ("sel-b", {"tier": "gpu", "zone": "b"}, "n2"),
        ("sel-c", {"tier": "cpu"}, "n1"),
    ):
        api.create(
            "pods",
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": node},
            },
            namespace="kube-public",
        )
    query = "labelSelector=tier%3Dgpu,zone%20notin%20(b)"
    _, by_labels = http(api, "GET", f"/api/v1/namespaces/kube-public/pods?{query}")
    _, by_field = http(
        api, "GET", "/api/v1/namespaces/kube-public/pods?fieldSelector=spec.nodeName%3Dn1"
    )
    assert [p["metadata"]["name"] for p in by_labels["items"]] == ["sel-a"]
    assert [p["metadata"]["name"] for p in by_field["items"]] == ["sel-a", "sel-c"]
    assert by_labels["kind"] == "PodList"


def test_invalid_label_values_are_rejected(api: Cluster) -> None:
    api.create("nodes", {"metadata": {"name": "labelled"}})
    status, body = http(
        api,
        "PATCH",
        "/api/v1/nodes/labelled",
        {"metadata": {"labels": {"roofline.dev/ridge-point": "2.5e+02"}}},
    )
    assert status == 422
    assert "label value" in body["message"]


def test_a_watch_resumes_from_a_resource_version(api: Cluster) -> None:
    first = api.create("widgets", widget("watched-1"), group="example.test")
    api.create("widgets", widget("watched-2"), group="example.test")
    since = first["metadata"]["resourceVersion"]
    _, events = http(api, "GET", f"{WIDGETS}?watch=true&timeoutSeconds=1&resourceVersion={since}")
    events = events if isinstance(events, list) else [events]
    names = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert names[:1] == ["watched-2"]
    assert "watched-1" not in names


def test_a_watch_from_a_compacted_resource_version_reports_410_gone(api: Cluster) -> None:
    api.call(api.store.events.history.clear)
    api.create("widgets", widget("after-compaction"), group="example.test")
    _, event = http(api, "GET", f"{WIDGETS}?watch=true&timeoutSeconds=1&resourceVersion=1")
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410


def test_injected_faults_answer_the_next_matching_requests_only(api: Cluster) -> None:
    api.create("widgets", widget("flaky"), group="example.test")
    fault = api.inject("patch", "widgets/status", 503, count=1)
    failed, _ = http(api, "PATCH", f"{WIDGETS}/flaky/status", {"status": {"a": 1}})
    passed, _ = http(api, "PATCH", f"{WIDGETS}/flaky/status", {"status": {"a": 1}})
    assert (failed, passed, api.remaining_faults(fault)) == (503, 200, 0)


def test_requests_are_counted_by_verb_and_resource(api: Cluster) -> None:
    api.reset_request_counts()
    http(api, "GET", WIDGETS)
    http(api, "GET", WIDGETS)
    assert api.request_counts()[("list", "widgets")] == 2


def test_lists_are_served_in_chunks_with_continue_tokens(api: Cluster, ctl: Kubectl) -> None:
    for i in range(5):
        api.create("configmaps", {"metadata": {"name": f"chunk-{i}"}}, namespace="kube-node-lease")
    _, first = http(api, "GET", "/api/v1/namespaces/kube-node-lease/configmaps?limit=2")
    token = first["metadata"]["continue"]
    _, second = http(
        api, "GET", f"/api/v1/namespaces/kube-node-lease/configmaps?limit=2&continue={token}"
    )
    assert [c["metadata"]["name"] for c in first["items"] + second["items"]] == [
        f"chunk-{i}" for i in range(4)
    ]
    names = ctl("get", "configmaps", "-n", "kube-node-lease", "--chunk-size=2", "-o", "name").stdout
    assert names.split() == [f"configmap/chunk-{i}" for i in range(5)]


def test_a_list_declared_as_a_set_refuses_duplicates(api: Cluster) -> None:
    crd = {**WIDGET_CRD, "metadata": {"name": "gadgets.example.test"}}
    crd["spec"] = {**WIDGET_CRD["spec"], "names": {"plural": "gadgets", "kind": "Gadget"}}
    version = dict(crd["spec"]["versions"][0])
    version["schema"] = {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "sizes": {
                            "type": "array",
                            "x-kubernetes-list-type": "set",
                            "items": {"type": "integer"},
                        }
                    },
                }
            },
        }
    }
    crd["spec"]["versions"] = [version]
    api.create("customresourcedefinitions", crd, group="apiextensions.k8s.io")
    body = {
        "apiVersion": "example.test/v1",
        "kind": "Gadget",
        "metadata": {"name": "dup"},
        "spec": {"sizes": [1, 1]},
    }
    status, _ = http(api, "POST", "/apis/example.test/v1/gadgets", body, "application/json")
    assert status == 422


def test_kubectl_shows_node_status_and_labels(api: Cluster, ctl: Kubectl) -> None:
    api.add_gpu_node("shown-ready", labels={"pool": "shown"})
    api.add_gpu_node("shown-cordoned", labels={"pool": "shown"}, unschedulable=True)
    rows = {r["NAME"]: r for r in ctl.table("nodes", "-l", "pool=shown", "--show-labels")}
    assert rows["shown-ready"]["STATUS"] == "Ready"
    assert rows["shown-cordoned"]["STATUS"] == "Ready,SchedulingDisabled"
    assert "pool=shown" in rows["shown-ready"]["LABELS"]


def test_kubectl_reapply_of_a_builtin_object_sends_a_strategic_merge_patch(
    api: Cluster, ctl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "cm.yaml"
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied-cm", "namespace": "default", "labels": {"a": "1"}},
        "data": {"k": "v1"},
    }
    manifest.write_text(yaml.safe_dump(doc))
    ctl("apply", "-f", str(manifest))
    api.reset_request_counts()
    doc["data"] = {"k": "v2"}
    doc["metadata"]["labels"] = {"b": "2"}
    manifest.write_text(yaml.safe_dump(doc))
    assert "configured" in ctl("apply", "-f", str(manifest)).stdout
    applied = api.read("configmaps", "applied-cm", namespace="default")
    assert (applied["data"], applied["metadata"]["labels"]) == ({"k": "v2"}, {"b": "2"})
    assert api.request_counts()[("patch", "configmaps")] == 1


def test_a_selective_watch_reports_objects_entering_and_leaving_the_selection(api: Cluster) -> None:
    since = api.create("namespaces", {"metadata": {"name": "watch-marker"}})["metadata"]
    api.create(
        "configmaps",
        {"metadata": {"name": "mover", "labels": {"watched": "yes"}}},
        namespace="default",
    )
    api.patch(
        "configmaps", "mover", {"metadata": {"labels": {"watched": "no"}}}, namespace="default"
    )
    api.patch(
        "configmaps", "mover", {"metadata": {"labels": {"watched": "yes"}}}, namespace="default"
    )
    query = "watch=true&timeoutSeconds=1&labelSelector=watched%3Dyes"
    query += f"&resourceVersion={since['resourceVersion']}"
    _, events = http(api, "GET", f"/api/v1/namespaces/default/configmaps?{query}")
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED"]
