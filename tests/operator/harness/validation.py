"""Metadata validation the API server applies to every object.

The operator writes node labels computed from measurements; a value with a ``+`` or over 63
characters would be rejected by a real cluster with 422. The emulator rejects it the same way, so
the integration tests catch such a label long before a cluster does.
"""

from __future__ import annotations

import re
from typing import Any

from .resources import ApiError, ResourceType

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_LABEL_CHARS = 63
MAX_PREFIX_CHARS = 253


def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > MAX_PREFIX_CHARS or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix part of {key!r} must be a DNS subdomain"
    if len(name) > MAX_LABEL_CHARS or not _LABEL_NAME.match(name):
        return f"name part of {key!r} must be a valid label name"
    return None


def label_value_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"label value {value!r} must be a string"
    if len(value) > MAX_LABEL_CHARS or not _LABEL_VALUE.fullmatch(value):
        return f"label value {value!r} must be 63 characters or less, alphanumeric, '-', '_' or '.'"
    return None


def validate_metadata(rtype: ResourceType, obj: dict[str, Any]) -> None:
    meta = obj.get("metadata", {})
    name = meta.get("name", "")
    problems: list[str] = []
    if rtype.plural != "events" and not _DNS_SUBDOMAIN.match(str(name)):
        problems.append(f"metadata.name: Invalid value: {name!r}: must be a DNS subdomain")
    for key, value in (meta.get("labels") or {}).items():
        for problem in (label_key_problem(key), label_value_problem(value)):
            if problem:
                problems.append(f"metadata.labels: Invalid value: {problem}")
    for key, value in (meta.get("annotations") or {}).items():
        if label_key_problem(key) or not isinstance(value, str):
            problems.append(f"metadata.annotations: Invalid value: {key!r}")
    if problems:
        raise ApiError(422, "Invalid", f'{rtype.kind} "{name}" is invalid: ' + "; ".join(problems))
