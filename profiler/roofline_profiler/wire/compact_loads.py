"""The largest request rate per replica in the compact result: each model's ``loads[]``
``maxRequestRate`` (``core/load_plan.py``) with what limits it and the workload it holds for.

It travels under its own top-level key, ``l``, one entry per model of ``m`` (``null`` where the
model has none), as ``[requests/s, limited by, prompt tokens, output tokens]``: a reader that
does not know the key reads the rest unchanged, and a result without it (a profile without a
workload, or an older profiler) has no rates, so the compact version stays. Eight models add
under 300 bytes, so the rates are never dropped to fit.

A rate is rounded *down* to its significant digits: a bound the plan promised stays one.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.core.limits import MAX_MODELS
from roofline_profiler.core.load_plan import LIMITS, LoadPlan
from roofline_profiler.wire.compact_fields import (
    SIGNIFICANT_DIGITS,
    CompactDecodeError,
    bounded_list,
    measured,
    whole,
)

#: The positions of a model's entry under ``l``, as the reader's messages name them.
LOAD_FIELDS = ("requests per second", "limited by", "prompt tokens", "output tokens")
REQUEST_RATE = "request rate"


@dataclass(frozen=True)
class CompactLoad:
    """One model's largest sustainable request rate per replica and the workload it is for."""

    name: str
    requests_per_second: float
    #: One of ``load_plan.LIMITS``.
    limited_by: str
    prompt_tokens: int
    output_tokens: int


def compact_loads(per_device: Iterable[Sequence[LoadPlan]]) -> tuple[CompactLoad, ...]:
    """The node's rates from each device's ``loads``: per model, the slowest device's (a rate
    per replica must hold on whichever GPU serves it), in order of first appearance; a model's
    first load plan on a device counts (as for plans), and none without a rate (a plan without
    a workload has only its TTFT ladder)."""
    slowest: dict[str, CompactLoad] = {}
    for loads in per_device:
        seen: set[str] = set()
        for load in loads:
            if load.name in seen or load.max_rate is None or load.workload is None:
                continue
            seen.add(load.name)
            rate = CompactLoad(
                name=load.name,
                requests_per_second=load.max_rate.requests_per_second,
                limited_by=load.max_rate.limited_by,
                prompt_tokens=load.workload.prompt_tokens,
                output_tokens=load.workload.output_tokens,
            )
            known = slowest.get(load.name)
            if known is None or rate.requests_per_second < known.requests_per_second:
                slowest[load.name] = rate
    return tuple(slowest.values())


def rate_down(value: float, digits: int = SIGNIFICANT_DIGITS) -> float | int:
    """``value`` rounded toward zero to ``digits`` significant digits (``12.345678`` is
    ``12.34``), written as an ``int`` when whole. The nearest such number when it is not above
    ``value``, so that a rate rounded once (the float 12.34, just under the decimal) reads back
    unchanged; else the floor in exact decimals (the float nearest a decimal at or below a float
    is at or below it too)."""
    if value <= 0 or not math.isfinite(value):
        return 0
    rounded = float(f"{value:.{digits}g}")
    if rounded > value:
        exact = Decimal(value)
        step = Decimal(1).scaleb(exact.adjusted() - digits + 1)
        rounded = float(exact.quantize(step, rounding=ROUND_FLOOR))
    return int(rounded) if rounded.is_integer() else rounded


def loads_to_wire(loads: Sequence[CompactLoad], models: list[list[Any]]) -> list[Any] | None:
    """``l``: one entry per model of ``m``, ``null`` where it has no rate; ``None`` (no key)
    when no model has one."""
    by_name = {load.name: load for load in loads}
    wire: list[Any] = []
    for model in models:
        load = by_name.get(model[0])
        wire.append(
            None
            if load is None
            else [
                rate_down(load.requests_per_second),
                load.limited_by,
                load.prompt_tokens,
                load.output_tokens,
            ]
        )
    return wire if any(entry is not None for entry in wire) else None


def _decode_load(raw: Any, name: str, where: str) -> CompactLoad:
    if not isinstance(raw, list) or len(raw) != len(LOAD_FIELDS):
        raise CompactDecodeError(f"{where}: not an array of {len(LOAD_FIELDS)} fields")
    rate, limited_by, prompt, output = raw
    if not isinstance(limited_by, str) or limited_by not in LIMITS:
        raise CompactDecodeError(f"{where}: field 'limited by' is not one of {', '.join(LIMITS)}")
    return CompactLoad(
        name=name,
        requests_per_second=measured(rate, REQUEST_RATE, "requests per second", where),
        limited_by=limited_by,
        prompt_tokens=whole(prompt, "context", "prompt tokens", where),
        output_tokens=whole(output, "context", "output tokens", where),
    )


def decode_loads(raw: dict[str, Any], model_names: Sequence[str]) -> tuple[CompactLoad, ...]:
    """``l`` of a result whose ``m`` names ``model_names``; none when the key is absent."""
    if "l" not in raw:
        return ()
    entries = bounded_list(raw["l"], "l", "result", MAX_MODELS)
    if len(entries) != len(model_names):
        raise CompactDecodeError("result: request rates and models differ in count")
    return tuple(
        _decode_load(entry, name, f"model #{i} request rate")
        for i, (entry, name) in enumerate(zip(entries, model_names, strict=True))
        if entry is not None
    )


def plausible_rate(value: Any, name: str) -> float:
    """A rate read back from a status entry, checked likewise (``ImplausibleValue``)."""
    return plausibility.number(value, REQUEST_RATE, name)
