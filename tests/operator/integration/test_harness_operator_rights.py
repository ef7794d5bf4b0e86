"""The real-server suite's audit check: requests are matched to the declared table exactly."""

from __future__ import annotations

from typing import Any

from tests.operator.harness.operator_rights import undeclared


def audited(verb: str, resource: str, namespace: str = "", group: str = "") -> dict[str, Any]:
    resource, _, subresource = resource.partition("/")
    ref = {"resource": resource, "apiGroup": group, "namespace": namespace}
    if subresource:
        ref["subresource"] = subresource
    return {"verb": verb, "objectRef": {k: v for k, v in ref.items() if v}}


def test_declared_requests_in_their_scope_pass() -> None:
    events = [
        audited("create", "pods", "profilers"),
        audited("deletecollection", "pods", "profilers"),
        audited("patch", "rooflineprofiles/status", group="roofline.dev"),
        audited("watch", "pods", "profilers"),
        audited("watch", "nodes"),
        audited("create", "events", "operator"),
        {"verb": "get"},  # discovery: no objectRef
    ]
    assert undeclared(events, "operator", "profilers") == []


def test_a_request_in_another_namespace_or_with_another_verb_is_undeclared() -> None:
    events = [
        audited("create", "events", "default"),
        audited("get", "secrets", "profilers"),
        audited("update", "nodes"),
    ]
    assert undeclared(events, "operator", "profilers") == [
        "create - events default",
        "get - secrets profilers",
        "update - nodes -",
    ]
