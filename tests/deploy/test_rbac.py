"""Least privilege: the RBAC the chart grants is exactly what the code uses.

What the code uses is derived from the code: every request
:class:`~roofline_operator.run.kubeapi.KubeClient` can send (each of its methods, called against a
recording session, through the operator's own callers where the path depends on them) and what
Kopf needs for the registered handlers (a watch per handled resource, in the profiler namespaces
for namespaced ones; the finalizer's patch; Events). That set must equal the declared table
(``roofline_operator.run.permissions``), which must equal the rendered ClusterRole and Roles for
each label backend and the committed ``manifests/``, and generates the table in
``docs/operator.md``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import kopf
import pytest
import yaml

from roofline_operator.core.names import GROUP, PLURAL
from roofline_operator.core.spec import parse_spec
from roofline_operator.decide.node_features import build_node_feature
from roofline_operator.decide.pods import ProfileRef, build_profiler_pod
from roofline_operator.run import handlers  # noqa: F401  (registers the handlers)
from roofline_operator.run.kubeapi import KubeClient, list_node_features
from roofline_operator.run.permissions import (
    NODE_BACKEND,
    NODE_FEATURE_BACKEND,
    PEERING,
    PERMISSIONS,
    Grants,
    Scope,
    markdown_table,
    required,
)
from roofline_operator.run.runtime import Caches

from .rendering import RELEASE, ROOT, objects_of_kind, render_objects

PROFILER_NS = "profiler-ns"
OPERATOR_NS = "operator-ns"
DOCS = ROOT / "docs" / "operator.md"
MANIFEST = ROOT / "manifests" / "02-roofline-operator.yaml"
#: Resources the handlers watch that are namespaced (the profiles and nodes are cluster objects).
NAMESPACED = {"pods": True, "nodes": False, PLURAL: False}

Use = tuple[Scope, str, str, str]  # scope, API group, resource, verb


class _Response:
    def __init__(self, status: int, payload: dict[str, Any]) -> None:
        self.status = status
        self.reason = "OK" if status < 400 else "Conflict"
        self._payload = payload

    async def json(self, content_type: str | None = None) -> dict[str, Any]:
        return self._payload

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class RecordingSession:
    """Stands in for aiohttp: records ``(method, path, query)``; answers 409 to creating a
    NodeFeature (so the client's patch path runs too), else 200."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    def request(self, method: str, url: str, **_: Any) -> _Response:
        parts = urlsplit(url)
        self.sent.append((method, parts.path, parts.query))
        if method == "POST" and parts.path.endswith("/nodefeatures"):
            return _Response(409, {"message": "exists"})
        return _Response(200, {"items": []} if method == "GET" else {})

    async def close(self) -> None:
        return None


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>[^/]+))?$"
)


def as_use(method: str, path: str, query: str) -> Use:
    """An HTTP request as the RBAC verb, resource and scope it needs."""
    match = _PATH.match(path)
    assert match is not None, path
    namespace, name = match["namespace"], match["name"]
    resource = match["resource"] + (f"/{match['sub']}" if match["sub"] else "")
    if method == "GET":
        verb = "get" if name else ("watch" if "watch=" in query else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update"}[method]
    scope = {None: Scope.CLUSTER, PROFILER_NS: Scope.PROFILER_NAMESPACES}.get(
        namespace, Scope.OPERATOR_NAMESPACE
    )
    return (scope, match["group"] or "", resource, verb)


async def _exercise(client: KubeClient) -> set[str]:
    """Call every request method of the client as the operator calls it; the names called."""
    feature = build_node_feature("n", {}, "p", OPERATOR_NS)
    calls = {
        "create_pod": client.create_pod({"metadata": {"namespace": PROFILER_NS}}),
        "delete_pod": client.delete_pod(PROFILER_NS, "p"),
        "delete_pods": client.delete_pods(PROFILER_NS, "a=b", "status.phase!=Running"),
        "get_pod": client.get_pod(PROFILER_NS, "p"),
        "patch_node_labels": client.patch_node_labels("n", {"roofline.dev/x": "1"}),
        "write_node_feature": client.write_node_feature(feature),
        "delete_node_feature": client.delete_node_feature(OPERATOR_NS, "f"),
        "get_config_map": client.get_config_map(PROFILER_NS, "c"),
        "get_config_map_object": client.get_config_map_object(PROFILER_NS, "c"),
        "create_config_map": client.create_config_map({"metadata": {"namespace": PROFILER_NS}}),
        "delete_config_map": client.delete_config_map(PROFILER_NS, "c", "uid"),
        "patch_profile_status": client.patch_profile_status("p", {}),
        # list_pages: through its callers, which choose the paths.
        "list_pages": Caches().prime(client, (PROFILER_NS,)),
    }
    for call in calls.values():
        await call
    await list_node_features(client, OPERATOR_NS, "p")
    return set(calls)


def operator_uses() -> set[Use]:
    session = RecordingSession()
    client = KubeClient(session, "https://cluster.invalid", 4)  # type: ignore[arg-type]
    called = asyncio.run(_exercise(client))
    methods = {
        name
        for name, member in inspect.getmembers(KubeClient)
        if not name.startswith("_")
        and (inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member))
    }
    assert methods - {"request", "close"} == called, "a KubeClient method is not exercised here"
    return {as_use(*sent) for sent in session.sent}


def kopf_uses() -> set[Use]:
    """What Kopf needs for the registered handlers."""
    registry = kopf.get_default_registry()
    uses: set[Use] = set()
    for part in (registry._watching, registry._spawning, registry._changing, registry._indexing):
        for handler in part.get_all_handlers():
            resource = handler.selector.any_name
            assert isinstance(resource, str)
            group = handler.selector.group or ""
            scope = Scope.PROFILER_NAMESPACES if NAMESPACED[resource] else Scope.CLUSTER
            uses |= {(scope, group, resource, "list"), (scope, group, resource, "watch")}
            if getattr(handler, "reason", None) == "delete":  # a finalizer, added by a patch
                uses.add((scope, group, resource, "patch"))
    # Kopf posts the Events of the cluster-scoped profiles in the operator's namespace, and
    # discovers resources and (it runs namespaced) namespaces.
    source = "".join(p.read_text() for p in (ROOT / "operator" / "roofline_operator").rglob("*.py"))
    if re.search(r"kopf\.(event|warn|info|exception)\(", source):
        uses.add((Scope.OPERATOR_NAMESPACE, "", "events", "create"))
    discovery = [("apiextensions.k8s.io", "customresourcedefinitions"), ("", "namespaces")]
    uses |= {(Scope.CLUSTER, g, r, v) for g, r in discovery for v in ("list", "watch")}
    return uses


def admission_uses() -> set[Use]:
    """An owner reference with blockOwnerDeletion needs ``update`` on the owner's finalizers."""
    pod = build_profiler_pod(
        profile=ProfileRef("p", "uid"),
        spec=parse_spec({"nodeSelector": {}}),
        node="n",
        gpus=1,
        attempt=1,
        spec_hash="h",
        namespace=PROFILER_NS,
        image="roofline:test",
    )
    owners = pod["metadata"].get("ownerReferences") or []
    if any(o.get("blockOwnerDeletion") for o in owners):
        return {(Scope.CLUSTER, GROUP, f"{PLURAL}/finalizers", "update")}
    return set()


def as_uses(grants: Grants) -> set[Use]:
    return {(s, g, r, v) for (s, g, r), verbs in grants.items() for v in verbs}


def test_the_declared_table_is_exactly_what_the_code_uses() -> None:
    declared = as_uses(required([NODE_BACKEND, NODE_FEATURE_BACKEND]))
    used = operator_uses() | kopf_uses() | admission_uses()
    assert used - declared == set(), "used, but not declared (nor granted)"
    assert declared - used == set(), "declared (and granted), but unused"


def granted(objects: list[dict[str, Any]]) -> Grants:
    grants: dict[tuple[Scope, str, str], set[str]] = {}
    for kind in ("ClusterRole", "Role"):
        for role in objects_of_kind(objects, kind):
            name = role["metadata"]["name"]
            if kind == "ClusterRole":
                scope = Scope.CLUSTER
            elif name.endswith("-profiler-pods"):
                scope = Scope.PROFILER_NAMESPACES
            else:
                assert name.startswith(RELEASE)
                scope = Scope.OPERATOR_NAMESPACE
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        grants.setdefault((scope, group, resource), set()).update(rule["verbs"])
    return {key: frozenset(verbs) for key, verbs in grants.items()}


@pytest.mark.parametrize(
    ("values", "condition"),
    [
        pytest.param({}, NODE_BACKEND, id="node-backend"),
        pytest.param({"nodeLabels": {"backend": "nodeFeature"}}, NODE_FEATURE_BACKEND, id="nfd"),
        pytest.param(
            {"rbac": {"extraProfilerNamespaces": ["team-a"]}}, NODE_BACKEND, id="extra-namespace"
        ),
    ],
)
def test_the_chart_grants_exactly_the_declared_permissions(
    values: dict[str, Any], condition: str
) -> None:
    assert granted(render_objects(values)) == required([condition])


def test_the_committed_manifests_grant_exactly_the_declared_permissions() -> None:
    objects = [o for o in yaml.safe_load_all(MANIFEST.read_text()) if o]
    assert granted(objects) == required([NODE_BACKEND])


def test_the_pods_are_granted_in_the_profiler_namespaces_and_nowhere_else() -> None:
    objects = render_objects({"rbac": {"extraProfilerNamespaces": ["team-a"]}})
    for role in objects_of_kind(objects, "ClusterRole"):
        assert all("pods" not in rule["resources"] for rule in role["rules"])
    namespaces = {
        role["metadata"]["namespace"]
        for role in objects_of_kind(objects, "Role")
        if any("pods" in rule["resources"] for rule in role["rules"])
    }
    assert namespaces == {"roofline-system", "team-a"}
    (deployment,) = objects_of_kind(objects, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--extra-namespace") + 1] == "team-a", "the operator watches it too"


def test_the_docs_tables_are_generated_from_the_declared_permissions() -> None:
    text = DOCS.read_text()
    section = text.split("## Permissions (RBAC)\n", 1)[1].split("\n## ", 1)[0]
    regenerate = "regenerate with: python scripts/generate-rbac-tables.py"
    assert markdown_table() in section, regenerate
    assert markdown_table() in (ROOT / "docs" / "deploy.md").read_text(), regenerate


def test_the_table_generator_finds_nothing_stale() -> None:
    path = ROOT / "scripts" / "generate-rbac-tables.py"
    spec = importlib.util.spec_from_file_location("generate_rbac_tables", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.stale_documents() == []
    table = markdown_table()
    header, rule, *_ = table.splitlines()
    old = f"intro\n{header}\n{rule}\n| a row of an older table |\nafter\n"
    assert module.with_table(old, table) == f"intro\n{table}after\n"


def test_peering_is_the_only_declared_permission_the_chart_never_grants() -> None:
    conditional = {p.when for p in PERMISSIONS if p.when}
    assert conditional == {NODE_BACKEND, NODE_FEATURE_BACKEND, PEERING}
    peering = required([PEERING]).keys() - required([]).keys()
    assert peering == {(Scope.CLUSTER, "kopf.dev", "clusterkopfpeerings")}


def test_the_recorded_requests_map_to_rbac_verbs() -> None:
    assert as_use("GET", f"/api/v1/namespaces/{PROFILER_NS}/pods", "watch=1") == (
        Scope.PROFILER_NAMESPACES,
        "",
        "pods",
        "watch",
    )
    assert as_use("DELETE", f"/api/v1/namespaces/{PROFILER_NS}/pods", "labelSelector=a") == (
        Scope.PROFILER_NAMESPACES,
        "",
        "pods",
        "deletecollection",
    )
    assert as_use("PATCH", f"/apis/{GROUP}/v1alpha1/{PLURAL}/p/status", "") == (
        Scope.CLUSTER,
        GROUP,
        f"{PLURAL}/status",
        "patch",
    )


def test_the_rbac_table_lives_in_one_module_the_docs_name() -> None:
    assert "roofline_operator.run.permissions" in DOCS.read_text()
    assert Path(ROOT / "operator" / "roofline_operator" / "run" / "permissions.py").exists()
