"""The resource types the emulated API server serves, and the errors it answers with.

Built-in types are declared once here with the discovery facts clients rely on (scope, kind,
short names, subresources); custom types come from CustomResourceDefinitions when they are
created, exactly as a CRD makes a resource served in a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .structural import version_schema


class ApiError(Exception):
    """An error answered as a ``kind: Status`` document with the HTTP code of the real server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message

    def as_status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }


def not_found(resource: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{resource} "{name}" not found')


def conflict(resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[dict[str, Any], ...] = ()
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``pods`` or ``rooflineprofiles.roofline.dev``, as error messages name resources."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def builtin(self) -> bool:
        return self.schema is None

    def discovery_entries(self) -> list[dict[str, Any]]:
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        entries: list[dict[str, Any]] = [
            {
                "name": self.plural,
                "singularName": self.singular or self.kind.lower(),
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": verbs,
                "shortNames": list(self.short_names),
                "categories": list(self.categories),
            }
        ]
        for sub in sorted(self.subresources):
            sub_verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
            if sub == "binding":
                sub_verbs = ["create"]
            entries.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": "Binding" if sub == "binding" else self.kind,
                    "verbs": sub_verbs,
                }
            )
        return entries


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "", "v1", "namespaces", "Namespace", False, "namespace", ("ns",), frozenset({"status"})
    ),
    ResourceType("", "v1", "nodes", "Node", False, "node", ("no",), frozenset({"status"})),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        "pod",
        ("po",),
        frozenset({"status", "log", "binding"}),
        ("all",),
    ),
    ResourceType("", "v1", "events", "Event", True, "event", ("ev",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",)),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, "event", ("ev",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease"),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        "customresourcedefinition",
        ("crd", "crds"),
        frozenset({"status"}),
    ),
)

CRD_TYPE = BUILTIN_TYPES[-1]


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """One resource type per served version of a CRD."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    result: list[ResourceType] = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subresources = frozenset(version.get("subresources", {}) or {})
        result.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", names["kind"].lower()),
                short_names=tuple(names.get("shortNames", [])),
                subresources=subresources,
                categories=tuple(names.get("categories", [])),
                printer_columns=tuple(version.get("additionalPrinterColumns", [])),
                schema=version_schema(crd, version["name"]),
            )
        )
    return result
