"""Structural-schema behaviour of a CustomResourceDefinition: defaulting, pruning, validation.

A real API server applies the CRD's ``default`` values when it stores a custom resource, drops
fields the schema does not know (unless ``x-kubernetes-preserve-unknown-fields``), and rejects
objects that break types, bounds or enums. An operator tested against a server that skips this
would see different objects than in a cluster: missing defaults, or status fields that silently
vanish in production. CEL rules (``x-kubernetes-validations``) are not evaluated here; the CRD's
own tests cover them.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """Fill ``default`` values for absent properties of present objects, recursively."""
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        result = dict(value)
        for name, subschema in properties.items():
            if name not in result and "default" in subschema:
                result[name] = copy.deepcopy(subschema["default"])
            if name in result:
                result[name] = apply_defaults(result[name], subschema)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for name in result:
                if name not in properties:
                    result[name] = apply_defaults(result[name], additional)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"]) for item in value]
    return value


def prune_unknown(value: Any, schema: dict[str, Any], path: str, pruned: list[str]) -> Any:
    """Drop fields the schema does not declare; record their paths for strict validation."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            properties = schema.get("properties", {})
            return {
                k: prune_unknown(v, properties[k], f"{path}.{k}", pruned) if k in properties else v
                for k, v in value.items()
            }
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        result: dict[str, Any] = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key in properties:
                result[key] = prune_unknown(item, properties[key], child, pruned)
            elif isinstance(additional, dict):
                result[key] = prune_unknown(item, additional, child, pruned)
            elif additional is True:
                result[key] = item
            else:
                pruned.append(child)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune_unknown(item, schema["items"], f"{path}[]", pruned) for item in value]
    return value


def as_json_schema(schema: Any, *, closed: bool = False) -> Any:
    """A CRD's OpenAPI v3 schema as JSON Schema.

    int-or-string and nullable become type unions, a ``set`` list has unique items, and the
    ``x-kubernetes-*`` keywords go. ``closed`` also rejects fields an object does not declare
    (unless it preserves unknown fields), as ``kubectl``'s strict validation does; without it,
    unknown fields are left to :func:`prune_unknown`, as the API server does.
    """
    if isinstance(schema, list):
        return [as_json_schema(item, closed=closed) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {
        k: as_json_schema(v, closed=closed)
        for k, v in schema.items()
        if not k.startswith("x-kubernetes-")
    }
    if schema.get("x-kubernetes-int-or-string"):
        result.pop("type", None)
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("x-kubernetes-list-type") == "set":
        result["uniqueItems"] = True
    if schema.get("nullable") and isinstance(result.get("type"), str):
        result["type"] = [result["type"], "null"]
    result.pop("nullable", None)
    if "properties" in schema:
        properties = schema["properties"]
        result["properties"] = {k: as_json_schema(v, closed=closed) for k, v in properties.items()}
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        if closed and "additionalProperties" not in schema and not preserve:
            result["additionalProperties"] = False
    return result


def validation_errors(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Messages in the API server's style: ``spec.maxParallel: Invalid value: ...``."""
    checked = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
    properties = {k: v for k, v in schema.get("properties", {}).items() if k not in ("metadata",)}
    validator = jsonschema.Draft4Validator(
        as_json_schema({**schema, "properties": properties}),
        format_checker=None,
    )
    messages: list[str] = []
    for error in sorted(validator.iter_errors(checked), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "<root>"
        messages.append(f"{where}: Invalid value: {error.message}")
    return messages


def version_schema(crd: dict[str, Any], version: str) -> dict[str, Any]:
    for item in crd.get("spec", {}).get("versions", []):
        if item.get("name") == version:
            schema: dict[str, Any] = item.get("schema", {}).get("openAPIV3Schema", {})
            return schema
    return {}
