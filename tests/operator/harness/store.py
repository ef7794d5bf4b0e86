"""The object store behind the emulated API server: etcd plus the API server's write rules.

Every write goes through one function that enforces what Kopf and kubectl depend on: a global,
monotonically increasing ``resourceVersion``; optimistic concurrency (a stale ``resourceVersion``
is a 409); ``generation`` that moves only when the spec does; the status subresource splitting
spec writes from status writes; finalizers that turn a delete into a ``deletionTimestamp``;
graceful deletion of running pods; garbage collection of dependents by owner reference; CRDs
that make their resources served. Methods are synchronous and run on the server's event loop,
so each write and its watch events are atomic without locks.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from . import structural
from .defaulting import accept_crd, default_pod, now_rfc3339, pod_is_running
from .patching import PatchError, apply_patch
from .resources import (
    BUILTIN_TYPES,
    CRD_TYPE,
    ApiError,
    ResourceType,
    conflict,
    not_found,
    types_from_crd,
)
from .validation import validate_metadata
from .watching import EventLog, Subscription, WatchEvent

ObjectKey = tuple[str, str, str, str]  # group, plural, namespace ("" if cluster-scoped), name
Predicate = Callable[[Mapping[str, Any]], bool]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What ``generation`` tracks: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


class ObjectStore:
    def __init__(self) -> None:
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        #: Owner uid to the keys of the objects whose ownerReferences name it, so that a delete
        #: finds its dependents without scanning every object (10,000 pods deleted by collection).
        self.dependents: dict[str, set[ObjectKey]] = {}
        self.events = EventLog()
        for rtype in BUILTIN_TYPES:
            self.types[(rtype.group, rtype.version, rtype.plural)] = rtype
        for namespace in DEFAULT_NAMESPACES:
            self.create(self.type_of("", "v1", "namespaces"), "", {"metadata": {"name": namespace}})

    # ---------------------------------------------------------------- resource types
    def type_of(self, group: str, version: str, plural: str) -> ResourceType:
        try:
            return self.types[(group, version, plural)]
        except KeyError:
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            ) from None

    def find_type(self, plural: str, group: str = "") -> ResourceType:
        for rtype in self.types.values():
            if rtype.plural == plural and rtype.group == group:
                return rtype
        raise ApiError(404, "NotFound", f"the server doesn't have a resource type {plural!r}")

    def _register_crd(self, crd: dict[str, Any]) -> None:
        for rtype in types_from_crd(crd):
            self.types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def _unregister_crd(self, crd: dict[str, Any]) -> None:
        for rtype in types_from_crd(crd):
            self.types.pop((rtype.group, rtype.version, rtype.plural), None)
            for key in [k for k in self.objects if k[:2] == (rtype.group, rtype.plural)]:
                self._commit(rtype, key, None)

    # ---------------------------------------------------------------- reading
    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> ObjectKey:
        return (rtype.group, rtype.plural, namespace or "" if rtype.namespaced else "", name)

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.objects.get(self._key(rtype, namespace, name))
        if obj is None:
            raise not_found(rtype.group_resource, name)
        return obj

    def list(
        self, rtype: ResourceType, namespace: str | None, predicate: Predicate | None = None
    ) -> list[dict[str, Any]]:
        items = [
            obj
            for (group, plural, ns, _), obj in self.objects.items()
            if (group, plural) == (rtype.group, rtype.plural)
            and (not namespace or ns == namespace)
            and (predicate is None or predicate(obj))
        ]
        return sorted(
            items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
        )

    @property
    def resource_version(self) -> str:
        return str(self.events.revision)

    def subscribe(
        self,
        rtype: ResourceType,
        namespace: str | None,
        predicate: Predicate | None,
        since: str | None,
    ) -> Subscription:
        """A watch from ``since`` (exclusive); without it, current objects come first as ADDED."""
        subscription = Subscription(rtype.group, rtype.plural, namespace or None, predicate)
        if since in (None, "", "0"):
            for obj in self.list(rtype, namespace, predicate):
                subscription.queue.put_nowait(WatchEvent(self.events.revision, "ADDED", obj, None))
            self.events.subscribe(subscription, None)
        else:
            self.events.subscribe(subscription, int(str(since)))
        return subscription

    # ---------------------------------------------------------------- writing
    def _commit(
        self, rtype: ResourceType, key: ObjectKey, new: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        old = self.objects.get(key)
        self._index_owners(key, old, new)
        if new is None:
            if old is None:
                return None
            del self.objects[key]
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self.events.revision + 1)
            self.events.publish(rtype.group, rtype.plural, "DELETED", gone, old)
            self._after_delete(rtype, gone)
            return gone
        new["metadata"]["resourceVersion"] = str(self.events.revision + 1)
        self.objects[key] = new
        self.events.publish(
            rtype.group, rtype.plural, "ADDED" if old is None else "MODIFIED", new, old
        )
        if rtype == CRD_TYPE:
            self._register_crd(new)
        return new

    def _index_owners(
        self, key: ObjectKey, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        for obj, add in ((old, False), (new, True)):
            for ref in (obj or {}).get("metadata", {}).get("ownerReferences") or []:
                keys = self.dependents.setdefault(str(ref.get("uid")), set())
                if add:
                    keys.add(key)
                else:
                    keys.discard(key)
                    if not keys:
                        del self.dependents[str(ref.get("uid"))]

    def _after_delete(self, rtype: ResourceType, gone: dict[str, Any]) -> None:
        if rtype == CRD_TYPE:
            self._unregister_crd(gone)
        uid = str(gone["metadata"].get("uid"))
        dependents = sorted(self.dependents.get(uid, ()))
        for group, plural, namespace, name in dependents:
            dependent_type = self.find_type(plural, group)
            try:
                self.delete(dependent_type, namespace, name, {"propagationPolicy": "Background"})
            except ApiError:
                continue

    def _admit(self, rtype: ResourceType, obj: dict[str, Any], strict: bool) -> dict[str, Any]:
        """Defaulting, pruning and validation, in the order of the API server's handlers."""
        validate_metadata(rtype, obj)
        if rtype.schema is None:
            return obj
        pruned: list[str] = []
        defaulted = structural.apply_defaults(obj, rtype.schema)
        cleaned = structural.prune_unknown(
            {k: v for k, v in defaulted.items() if k not in ("metadata", "apiVersion", "kind")},
            rtype.schema,
            "",
            pruned,
        )
        if strict and pruned:
            raise ApiError(
                422,
                "Invalid",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled: '
                + ", ".join(f'strict decoding error: unknown field "{p}"' for p in pruned),
            )
        result = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"]}
        result.update(cleaned)
        errors = structural.validation_errors(result, rtype.schema)
        if errors:
            name = obj["metadata"].get("name", "")
            raise ApiError(
                422, "Invalid", f'{rtype.kind} "{name}" is invalid: ' + "; ".join(errors)
            )
        return result

    def create(
        self, rtype: ResourceType, namespace: str | None, body: dict[str, Any], strict: bool = False
    ) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", f"{rtype.kind}: metadata.name: Required value")
        if rtype.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(
                    400, "BadRequest", "the namespace of the object does not match the URL"
                )
            if self._key(self.type_of("", "v1", "namespaces"), None, namespace) not in self.objects:
                raise not_found("namespaces", namespace)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        key = self._key(rtype, namespace, name)
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{rtype.group_resource} "{name}" already exists')
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
        meta.update(
            uid=str(uuid.uuid4()),
            creationTimestamp=now_rfc3339(),
            generation=1,
        )
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        if "status" in rtype.subresources and rtype.schema is not None:
            obj.pop("status", None)
        obj = self._admit(rtype, obj, strict)
        if rtype.plural == "pods" and not rtype.group:
            default_pod(obj)
        if rtype == CRD_TYPE:
            accept_crd(obj)
        committed = self._commit(rtype, key, obj)
        assert committed is not None
        return committed

    def replace(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        subresource: str | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        old = self.get(rtype, namespace, name)
        wanted = body.get("metadata", {}).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise conflict(rtype.group_resource, name)
        if body.get("metadata", {}).get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
        return self._write(rtype, old, copy.deepcopy(body), subresource, strict)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        patch: Any,
        subresource: str | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        old = self.get(rtype, namespace, name)
        if "strategic" in content_type and not rtype.builtin:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - "
                "accepted media types include: application/json-patch+json, "
                "application/merge-patch+json, application/apply-patch+yaml",
            )
        try:
            new = apply_patch(content_type, copy.deepcopy(old), patch)
        except PatchError as exc:
            reason = {400: "BadRequest", 415: "UnsupportedMediaType"}.get(exc.status, "Invalid")
            raise ApiError(exc.status, reason, str(exc)) from None
        if new.get("metadata", {}).get("resourceVersion") != old["metadata"]["resourceVersion"]:
            raise conflict(rtype.group_resource, name)
        return self._write(rtype, old, new, subresource, strict)

    def _write(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        strict: bool,
    ) -> dict[str, Any]:
        name = old["metadata"]["name"]
        if subresource == "status":
            candidate = copy.deepcopy(old)
            if "status" in new:
                candidate["status"] = new["status"]
            else:
                candidate.pop("status", None)
        else:
            candidate = new
            candidate.setdefault("metadata", {})
            if "status" in rtype.subresources:
                if "status" in old:
                    candidate["status"] = copy.deepcopy(old["status"])
                else:
                    candidate.pop("status", None)
        meta = candidate["metadata"]
        for immutable in (
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if immutable in old["metadata"]:
                meta[immutable] = old["metadata"][immutable]
            else:
                meta.pop(immutable, None)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        candidate["apiVersion"], candidate["kind"] = rtype.api_version, rtype.kind
        if old["metadata"].get("deletionTimestamp"):
            added = set(meta.get("finalizers", [])) - set(old["metadata"].get("finalizers", []))
            if added:
                raise ApiError(
                    422,
                    "Forbidden",
                    f"no new finalizers can be added if the object is "
                    f"being deleted, found new finalizers {sorted(added)}",
                )
        candidate = self._admit(rtype, candidate, strict)
        if _content(candidate) != _content(old):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if candidate == old:
            return old  # a no-op write keeps its resourceVersion and wakes no watcher
        key = self._key(rtype, old["metadata"].get("namespace"), name)
        committed = self._commit(rtype, key, candidate)
        assert committed is not None
        released = meta.get("deletionTimestamp") and not meta.get("finalizers")
        if released and not (rtype.plural == "pods" and pod_is_running(candidate)):
            return self._commit(rtype, key, None) or committed
        return committed

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        options = options or {}
        old = self.get(rtype, namespace, name)
        preconditions = options.get("preconditions") or {}
        for field in ("uid", "resourceVersion"):
            if preconditions.get(field) and preconditions[field] != old["metadata"].get(field):
                raise conflict(rtype.group_resource, name)
        key = self._key(rtype, old["metadata"].get("namespace"), name)
        grace = options.get("gracePeriodSeconds")
        graceful = rtype.plural == "pods" and pod_is_running(old) and grace != 0
        if not old["metadata"].get("finalizers") and not graceful:
            gone = self._commit(rtype, key, None)
            assert gone is not None
            return gone
        if old["metadata"].get("deletionTimestamp"):
            return old  # already terminating: a second delete changes nothing
        marked = copy.deepcopy(old)
        marked["metadata"]["deletionTimestamp"] = now_rfc3339()
        if graceful:
            default = old["spec"].get("terminationGracePeriodSeconds", 30)
            marked["metadata"]["deletionGracePeriodSeconds"] = int(
                grace if grace is not None else default
            )
        committed = self._commit(rtype, key, marked)
        assert committed is not None
        return committed

    def remove_now(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        """What the kubelet does once a terminating pod's containers are gone."""
        key = self._key(rtype, namespace, name)
        if key in self.objects and not self.objects[key]["metadata"].get("finalizers"):
            self._commit(rtype, key, None)
