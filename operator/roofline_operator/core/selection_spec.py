"""The node selection fields of a RooflineProfile's spec: which nodes, and how many GPUs each.

``nodeSelector``, ``nodeSelectorTerms`` (node affinity's ORed terms of ANDed expressions),
``tolerations``, ``device``, ``gpuResource`` and ``gpusPerNode`` become one
:class:`NodeSelection`, the value ``nodes.select_nodes`` applies as the scheduler would to the
profiler pod.

``device`` says what the profile measures. ``gpu`` (the default): the GPUs of nodes with an
allocatable ``gpuResource``, which the pod requests and must measure (a container that sees no
GPU fails instead of measuring the CPU). ``cpu``: the CPU of every matching node (CPU serving);
the pod requests no GPU, ``gpuResource`` and ``gpusPerNode`` select nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from roofline_operator.core.spec_fields import (
    INTEGER_FIELD_BOUNDS,
    SpecError,
    integer_field,
    optional_str,
)

DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
#: One GPU per pod by default: it schedules beside serving pods that leave one GPU free, and a
#: node's GPUs are one product, so one answers what the labels describe. ``gpusPerNode: 0``
#: (every allocatable GPU) on idle nodes at bring-up measures them all and finds a degraded one.
DEFAULT_GPUS_PER_NODE = 1
#: What a profile may measure (``spec.device``), the default first.
DEVICES = ("gpu", "cpu")
DEFAULT_DEVICE = DEVICES[0]
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_RESOURCE_NAME = re.compile(
    r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


@dataclass(frozen=True)
class MatchExpression:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Toleration:
    key: str | None
    operator: str
    value: str | None
    effect: str | None


@dataclass(frozen=True)
class NodeSelection:
    """Which nodes a profile wants; everything ``nodes.select_nodes`` needs."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: ORed terms, each an ANDed tuple of expressions; empty means no extra constraint.
    terms: tuple[tuple[MatchExpression, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    #: GPUs each pod requests; ``None`` requests all of the node's allocatable GPUs.
    gpus_per_node: int | None = DEFAULT_GPUS_PER_NODE
    #: ``gpu`` or ``cpu`` (:data:`DEVICES`): a CPU profile needs and requests no GPU.
    device: str = DEFAULT_DEVICE

    @property
    def measures_cpu(self) -> bool:
        return self.device == "cpu"


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SpecError(f"{where} must be a map of strings")
    return dict(value)


def _expression(raw: Any, where: str) -> MatchExpression:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str):
        raise SpecError(f"{where} needs a key")
    operator = raw.get("operator")
    if operator not in SELECTOR_OPERATORS:
        raise SpecError(f"{where}.operator must be one of {', '.join(SELECTOR_OPERATORS)}")
    values = raw.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SpecError(f"{where}.values must be a list of strings")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SpecError(f"{where}: operator {operator} takes no values")
    if operator in ("In", "NotIn") and not values:
        raise SpecError(f"{where}: operator {operator} needs values")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"-?\d+", values[0])):
        raise SpecError(f"{where}: operator {operator} needs exactly one integer value")
    return MatchExpression(key=raw["key"], operator=operator, values=tuple(values))


def _terms(raw: Any) -> tuple[tuple[MatchExpression, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("spec.nodeSelectorTerms must be a list")
    terms = []
    for i, term in enumerate(raw):
        where = f"spec.nodeSelectorTerms[{i}]"
        expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
        if not isinstance(expressions, list) or not expressions:
            raise SpecError(f"{where}.matchExpressions must be a non-empty list")
        terms.append(
            tuple(
                _expression(e, f"{where}.matchExpressions[{j}]") for j, e in enumerate(expressions)
            )
        )
    return tuple(terms)


def parse_tolerations(raw: Any) -> tuple[tuple[Toleration, ...], tuple[Mapping[str, Any], ...]]:
    """``spec.tolerations`` parsed for selection, and as written for the profiler pod."""
    if raw is None:
        return (), ()
    if not isinstance(raw, list) or not all(isinstance(t, Mapping) for t in raw):
        raise SpecError("spec.tolerations must be a list of objects")
    parsed = []
    for i, item in enumerate(raw):
        operator = item.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise SpecError(f"spec.tolerations[{i}].operator must be Equal or Exists")
        if operator == "Equal" and not item.get("key"):
            raise SpecError(f"spec.tolerations[{i}]: operator Equal needs a key")
        parsed.append(
            Toleration(
                key=item.get("key") or None,
                operator=operator,
                value=item.get("value"),
                effect=item.get("effect") or None,
            )
        )
    return tuple(parsed), tuple(dict(t) for t in raw)


def parse_gpu_resource(spec: Mapping[str, Any]) -> str:
    """``spec.gpuResource``, the extended resource the pod requests its GPUs as."""
    gpu_resource = optional_str(spec, "gpuResource") or DEFAULT_GPU_RESOURCE
    if not _RESOURCE_NAME.fullmatch(gpu_resource):
        raise SpecError(f"spec.gpuResource {gpu_resource!r} is not a resource name")
    return gpu_resource


def parse_device(spec: Mapping[str, Any]) -> str:
    """``spec.device``: ``gpu`` (the default) or ``cpu``, said explicitly."""
    device = spec.get("device")
    if device is None:
        return DEFAULT_DEVICE
    if device not in DEVICES:
        raise SpecError(f"spec.device must be one of {', '.join(DEVICES)}, got {device!r}")
    return str(device)


def parse_node_selection(
    spec: Mapping[str, Any], gpu_resource: str, tolerations: tuple[Toleration, ...]
) -> NodeSelection:
    """The node selector, the ORed selector terms, what the pods measure and the GPUs each
    requests (``0``: all of the node's allocatable GPUs)."""
    return NodeSelection(
        device=parse_device(spec),
        node_selector=_string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        terms=_terms(spec.get("nodeSelectorTerms")),
        tolerations=tolerations,
        gpu_resource=gpu_resource,
        gpus_per_node=integer_field(
            spec, "gpusPerNode", DEFAULT_GPUS_PER_NODE, *INTEGER_FIELD_BOUNDS["gpusPerNode"]
        )
        or None,
    )
