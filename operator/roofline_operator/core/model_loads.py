"""Each model's largest request rate per replica on a node, in the status:
``status.nodes[].models[].maxRequestRate``.

The profiler plans it for the profile's workload (``spec.workload``) under its TTFT and ITL
targets (``spec.slo``) and sends it per node under the compact result's ``l``
(``compact_loads.py``). The status keeps it beside the model's plan as
``{requestsPerSecond, limitedBy, promptTokens, outputTokens}``, so a reader (``roofline export``,
a person) sees the workload the rate holds for; a restarted operator reads it back through the
same checks as the wire's.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.load_plan import LIMITS
from roofline_profiler.wire.compact_loads import CompactLoad, plausible_rate, rate_down

#: The key of a ``status.nodes[].models[]`` entry (and of a class's) that holds the rate.
MAX_REQUEST_RATE_KEY = "maxRequestRate"


def load_to_status(load: CompactLoad) -> dict[str, Any]:
    """The rate as the status keeps it: rounded down like on the wire, so a bound stays one."""
    return {
        "requestsPerSecond": rate_down(load.requests_per_second),
        "limitedBy": load.limited_by,
        "promptTokens": load.prompt_tokens,
        "outputTokens": load.output_tokens,
    }


def with_rates(
    entries: Sequence[dict[str, Any]], loads: Sequence[CompactLoad]
) -> list[dict[str, Any]]:
    """The model entries, each planned one with its model's rate where the node has one."""
    by_name = {load.name: load for load in loads}
    out = []
    for entry in entries:
        load = by_name.get(entry.get("name", ""))
        if load is not None and "reason" not in entry:
            entry = {**entry, MAX_REQUEST_RATE_KEY: load_to_status(load)}
        out.append(entry)
    return out


def load_from_status(name: str, raw: Any) -> CompactLoad:
    """A ``maxRequestRate`` read back, checked against the plausibility table; ``ValueError``
    (``ImplausibleValue``) or ``TypeError`` when it is damaged."""
    if not isinstance(raw, Mapping):
        raise TypeError(f"{MAX_REQUEST_RATE_KEY} is not an object")
    limited_by = raw.get("limitedBy")
    if limited_by not in LIMITS:
        raise plausibility.ImplausibleValue(f"field 'limitedBy' is not one of {', '.join(LIMITS)}")
    return CompactLoad(
        name=name,
        requests_per_second=plausible_rate(raw.get("requestsPerSecond"), "requestsPerSecond"),
        limited_by=str(limited_by),
        prompt_tokens=plausibility.integer(raw.get("promptTokens"), "context", "promptTokens"),
        output_tokens=plausibility.integer(raw.get("outputTokens"), "context", "outputTokens"),
    )


def loads_from_status(raw: Any) -> tuple[CompactLoad, ...]:
    """The rates of a ``status.nodes[].models`` list; a damaged rate is skipped (the plan it
    sits beside is read on its own)."""
    if not isinstance(raw, list):
        return ()
    loads = []
    for entry in raw[: limits.MAX_MODELS]:
        if not isinstance(entry, Mapping) or MAX_REQUEST_RATE_KEY not in entry:
            continue
        try:
            name = plausibility.text(entry.get("name"), plausibility.LABEL_VALUE, "name")
            loads.append(load_from_status(name, entry[MAX_REQUEST_RATE_KEY]))
        except (TypeError, ValueError):
            continue
    return tuple(loads)


def slowest_rate(rates: Sequence[Any]) -> dict[str, Any] | None:
    """A class's rate: the smallest of its nodes' (a per-replica threshold must hold on every
    node of the class), with that node's ``limitedBy`` and workload; ``None`` unless every node
    has one (a node profiled without the workload, or before it existed, leaves it unknown)."""
    known: list[Mapping[str, Any]] = [r for r in rates if isinstance(r, Mapping)]
    if not known or len(known) != len(rates):
        return None
    slowest = min(known, key=_requests_per_second)
    return dict(slowest)


def _requests_per_second(rate: Mapping[str, Any]) -> float:
    value = rate.get("requestsPerSecond")
    return float(value) if isinstance(value, (int, float)) else 0.0
