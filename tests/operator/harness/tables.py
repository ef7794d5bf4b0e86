"""Server-side printing: the ``meta.k8s.io/v1`` Table that ``kubectl get`` asks for.

``kubectl get rooflineprofiles`` shows the CRD's ``additionalPrinterColumns`` only because the
server renders them; kubectl itself knows nothing about the columns. Rendering them here from the
CRD is what lets a test assert on the very text a user reads.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from typing import Any

from .resources import ResourceType

_FILTER = re.compile(r"^\[\?\(@\.([\w.]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")
_INDEX = re.compile(r"^\[(\d+)\]")
_FIELD = re.compile(r"^\.([\w-]+)")


def evaluate_jsonpath(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: fields, indexes and ``[?(@.k=="v")]``."""
    rest = path.strip()
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    value = obj
    while rest and value is not None:
        if match := _FIELD.match(rest):
            value = value.get(match.group(1)) if isinstance(value, Mapping) else None
        elif match := _INDEX.match(rest):
            index = int(match.group(1))
            value = value[index] if isinstance(value, list) and index < len(value) else None
        elif match := _FILTER.match(rest):
            key, wanted = match.groups()
            items = value if isinstance(value, list) else []
            value = next((i for i in items if str(evaluate_jsonpath(i, "." + key)) == wanted), None)
        else:
            raise ValueError(f"unsupported JSONPath {path!r}")
        rest = rest[match.end() :]
    return value


def human_age(timestamp: str | None) -> str:
    """The short age kubectl prints (``5s``, ``3m``, ``2h``, ``4d``)."""
    if not timestamp:
        return "<unknown>"
    created = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC
    )
    seconds = max(0, int((datetime.datetime.now(tz=datetime.UTC) - created).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cell(value: Any, column_type: str) -> Any:
    if value is None:
        return None
    if column_type == "date":
        return human_age(str(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def _node_row(obj: Mapping[str, Any]) -> list[Any]:
    conditions = obj.get("status", {}).get("conditions", [])
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    status = "Ready" if ready.get("status") == "True" else "NotReady"
    if obj.get("spec", {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = obj["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    version = obj.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
    created = obj["metadata"].get("creationTimestamp")
    return [
        obj["metadata"]["name"],
        status,
        ",".join(roles) or "<none>",
        human_age(created),
        version,
    ]


def _pod_row(obj: Mapping[str, Any]) -> list[Any]:
    statuses = obj.get("status", {}).get("containerStatuses", [])
    containers = obj.get("spec", {}).get("containers", [])
    ready = sum(1 for s in statuses if s.get("ready"))
    status = obj.get("status", {}).get("phase", "Pending")
    for container_status in statuses:
        terminated = container_status.get("state", {}).get("terminated")
        if terminated and terminated.get("reason"):
            status = terminated["reason"]
    if obj["metadata"].get("deletionTimestamp"):
        status = "Terminating"
    created = obj["metadata"].get("creationTimestamp")
    return [obj["metadata"]["name"], f"{ready}/{len(containers)}", status, 0, human_age(created)]


def _columns(rtype: ResourceType) -> list[dict[str, Any]]:
    name = {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name",
        "priority": 0,
    }
    if rtype.kind == "Node" and rtype.builtin:
        extra = [
            ("Status", "string"),
            ("Roles", "string"),
            ("Age", "string"),
            ("Version", "string"),
        ]
    elif rtype.kind == "Pod" and rtype.builtin:
        extra = [
            ("Ready", "string"),
            ("Status", "string"),
            ("Restarts", "integer"),
            ("Age", "string"),
        ]
    elif rtype.printer_columns:
        return [name] + [
            {
                "name": c["name"],
                "type": c.get("type", "string"),
                "format": c.get("format", ""),
                "description": c.get("description", ""),
                "priority": c.get("priority", 0),
            }
            for c in rtype.printer_columns
        ]
    else:
        extra = [("Age", "date")]
    return [name] + [
        {"name": n, "type": t, "format": "", "description": n, "priority": 0} for n, t in extra
    ]


def _row(rtype: ResourceType, obj: Mapping[str, Any]) -> list[Any]:
    if rtype.kind == "Node" and rtype.builtin:
        return _node_row(obj)
    if rtype.kind == "Pod" and rtype.builtin:
        return _pod_row(obj)
    if rtype.printer_columns:
        return [obj["metadata"]["name"]] + [
            _cell(evaluate_jsonpath(obj, c["jsonPath"]), c.get("type", "string"))
            for c in rtype.printer_columns
        ]
    return [obj["metadata"]["name"], human_age(obj["metadata"].get("creationTimestamp"))]


def _embedded(obj: Mapping[str, Any], include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return dict(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


def to_table(
    rtype: ResourceType,
    items: list[dict[str, Any]],
    resource_version: str,
    include_object: str = "Metadata",
) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": _columns(rtype),
        "rows": [
            {"cells": _row(rtype, obj), "object": _embedded(obj, include_object)} for obj in items
        ],
    }
