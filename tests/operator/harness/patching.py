"""The three patch formats of the Kubernetes API, with the semantics the server gives them.

Kopf sends JSON merge patches (RFC 7386) and JSON patches (RFC 6902, guarded by a ``test`` of the
resourceVersion); the Kubernetes Python client sends strategic merge patches for dicts; ``kubectl
apply`` sends merge patches for custom resources and strategic merge patches for built-in ones.
Strategic merge differs from merge patch only in lists: lists of named things are merged by their
key instead of being replaced, and ``$patch``/``$setElementOrder``/``$retainKeys`` directives may
appear. Only the keys of the objects this product touches are listed; other lists are replaced,
which is what the server does for lists without a patch strategy.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

#: List fields merged by key under strategic merge (field name → merge key; None: set of scalars).
STRATEGIC_MERGE_KEYS: dict[str, str | None] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "finalizers": None,
    "containerStatuses": "name",
    "addresses": "type",
    "taints": "key",
}


class PatchError(ValueError):
    """A patch the server rejects: 422 for failed tests, 400 for malformed documents."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strategic_list(field: str, target: Any, patch: list[Any]) -> list[Any]:
    if field not in STRATEGIC_MERGE_KEYS or not isinstance(target, list):
        return [_strip_directives(item) for item in patch]
    key = STRATEGIC_MERGE_KEYS[field]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip_directives(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    result = copy.deepcopy(target)
    if key is None:
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map in list field {field!r} lacks the merge key {key!r}", 400)
        index = next((i for i, old in enumerate(result) if old.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge patch with keyed list merging and the directives ``kubectl`` emits."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field, []) if item not in value]
        elif key.startswith("$"):
            continue  # $setElementOrder, $retainKeys: ordering and pruning hints only.
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _strategic_list(key, result.get(key), value)
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} does not start with '/'", 400)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError(f"path {path!r} does not exist")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    value = _get(doc, path)
    if isinstance(parent, dict):
        del parent[parts[-1]]
    else:
        del parent[int(parts[-1])]
    return value


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    if replace:
        _get(doc, path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise PatchError(f"index {last!r} is out of range in {path!r}")
    else:
        raise PatchError(f"path {path!r} does not point into an object or a list")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902. A failed ``test`` raises :class:`PatchError` (the server answers 422)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations", 400)
    doc = copy.deepcopy(target)
    for operation in operations:
        op, path = operation.get("op"), operation.get("path", "")
        if op == "test":
            if _get(doc, path) != operation.get("value"):
                raise PatchError(f"test operation failed at {path!r}")
        elif op == "add":
            doc = _add(doc, path, operation.get("value"))
        elif op == "replace":
            doc = _add(doc, path, operation.get("value"), replace=True)
        elif op == "remove":
            _remove(doc, path)
        elif op == "move":
            doc = _add(doc, path, _remove(doc, operation["from"]))
        elif op == "copy":
            doc = _add(doc, path, _get(doc, operation["from"]))
        else:
            raise PatchError(f"unknown JSON patch operation {op!r}", 400)
    return doc


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    media_type = content_type.split(";")[0].strip()
    if media_type == MERGE_PATCH:
        result = merge_patch(target, patch)
    elif media_type == STRATEGIC_MERGE_PATCH:
        result = strategic_merge_patch(target, patch)
    elif media_type == JSON_PATCH:
        result = json_patch(target, patch)
    else:
        raise PatchError(f"the patch type {media_type!r} is not supported", 415)
    if not isinstance(result, dict):
        raise PatchError("the patched object is not a JSON object", 400)
    return result
