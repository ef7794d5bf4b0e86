"""An in-memory stand-in for the operator's API client, for the reconcile loop's tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline_operator.run.kubeapi import ApiError


class RecordingClient:
    """Answers like the API server and remembers every request."""

    def __init__(
        self,
        refuse_pods: bool = False,
        failing_label_patches: int = 0,
        refuse_collections: bool = False,
    ) -> None:
        self.refuse_pods = refuse_pods
        self.failing_label_patches = failing_label_patches
        self.refuse_collections = refuse_collections
        #: Every request in the order it was sent: ``create``, ``delete``, ``collect``, ...
        self.calls: list[str] = []
        self.created: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str]] = []
        self.collections: list[tuple[str, str, str]] = []
        self.labelled: list[tuple[str, Mapping[str, str | None]]] = []
        #: Node annotation patches, sent in the same requests as ``labelled`` (or alone).
        self.annotated: list[tuple[str, Mapping[str, str | None]]] = []
        self.statuses: list[Mapping[str, Any]] = []
        #: Pods a GET finds (by name); every other GET answers 404.
        self.existing_pods: set[str] = set()
        self.pod_gets: list[str] = []

    async def create_pod(self, pod: dict[str, Any]) -> bool:
        self.calls.append("create")
        if self.refuse_pods:
            raise ApiError(403, 'pods is forbidden: namespace "nope" not allowed')
        self.created.append(pod)
        return True

    async def delete_pod(self, namespace: str, name: str) -> None:
        self.calls.append("delete")
        self.deleted.append((namespace, name))

    async def delete_pods(self, namespace: str, label_selector: str, field_selector: str) -> int:
        self.calls.append("collect")
        if self.refuse_collections:
            raise ApiError(403, "pods is forbidden: cannot deletecollection")
        self.collections.append((namespace, label_selector, field_selector))
        return 1

    async def patch_node_labels(
        self,
        name: str,
        labels: Mapping[str, str | None],
        annotations: Mapping[str, str | None] | None = None,
    ) -> bool:
        self.calls.append("patch node")
        if self.failing_label_patches:
            self.failing_label_patches -= 1
            raise ApiError(500, "etcdserver: request timed out")
        if labels:
            self.labelled.append((name, labels))
        if annotations:
            self.annotated.append((name, annotations))
        return True

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.pod_gets.append(name)
        return {"metadata": {"name": name}} if name in self.existing_pods else None

    async def patch_profile_status(self, name: str, status: Mapping[str, Any]) -> None:
        self.statuses.append(status)
