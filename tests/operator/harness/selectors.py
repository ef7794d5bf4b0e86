"""Label and field selectors as the API server parses them.

The operator finds its profiler pods by labels after a restart, and may narrow node or pod lists
with field selectors (``spec.nodeName``). An emulator that ignored selectors would hand it every
object and hide the bugs that only show when the server filters, so both grammars are implemented
here: set-based label requirements (``in``, ``notin``, existence) and equality field requirements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_SET_REQUIREMENT = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQUALITY_REQUIREMENT = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s,()]*)\s*$")
_EXISTENCE_REQUIREMENT = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


class SelectorError(ValueError):
    """A selector the API server would answer with 400 Bad Request."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" match objects that lack the key, as in Kubernetes.
        return not present or value not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` value lists."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    if not text:
        return ()
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        if match := _SET_REQUIREMENT.match(part):
            negated, key, operator, values = match.groups()
            if negated:
                raise SelectorError(f"unable to parse requirement: {part!r}")
            items = tuple(v.strip() for v in values.split(",") if v.strip())
            requirements.append(Requirement(key, operator, items))
        elif match := _EQUALITY_REQUIREMENT.match(part):
            key, operator, value = match.groups()
            requirements.append(Requirement(key, "!=" if operator == "!=" else "=", (value,)))
        elif match := _EXISTENCE_REQUIREMENT.match(part):
            negated, key = match.groups()
            requirements.append(Requirement(key, "!exists" if negated else "exists", ()))
        else:
            raise SelectorError(f"unable to parse requirement: {part!r}")
    return tuple(requirements)


def label_selector_matches(requirements: tuple[Requirement, ...], obj: Mapping[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(requirement.matches(labels) for requirement in requirements)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text: str | None) -> tuple[Requirement, ...]:
    if not text:
        return ()
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        match = _EQUALITY_REQUIREMENT.match(part)
        if match is None:
            raise SelectorError(f"invalid field selector: {part!r}")
        key, operator, value = match.groups()
        requirements.append(Requirement(key, "!=" if operator == "!=" else "=", (value,)))
    return tuple(requirements)


def field_selector_matches(requirements: tuple[Requirement, ...], obj: Mapping[str, Any]) -> bool:
    for requirement in requirements:
        equal = _field_value(obj, requirement.key) == requirement.values[0]
        if equal != (requirement.operator == "="):
            return False
    return True


def compile_selectors(
    label_selector: str | None, field_selector: str | None
) -> Callable[[Mapping[str, Any]], bool]:
    """One predicate for both selectors; raises :class:`SelectorError` on bad syntax."""
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector)

    def predicate(obj: Mapping[str, Any]) -> bool:
        return label_selector_matches(labels, obj) and field_selector_matches(fields, obj)

    return predicate
