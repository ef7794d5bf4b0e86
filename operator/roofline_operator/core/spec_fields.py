"""The checked readers of a RooflineProfile spec's fields, and the one error they raise.

Each reader turns a field the CRD's schema should have checked into a typed value, or into a
:class:`SpecError` naming the field: an API server without the schema (an old cluster, a
schema-less emulator) hands over anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline_profiler.core import limits

#: ``(minimum, maximum)`` of the spec's integer fields that only the operator reads, as the CRD
#: declares them (a test keeps the two equal); the profiler's own are in ``limits``.
INTEGER_FIELD_BOUNDS: dict[str, tuple[int, int]] = {
    "gpusPerNode": (0, limits.MAX_GPUS_PER_POD),
    "maxParallel": (1, 10000),
    "timeoutSeconds": (5, 86400),
    "pendingTimeoutSeconds": (1, 86400),
    "maxAttempts": (1, 20),
    "retryBackoffSeconds": (0, 3600),
    "changeThresholdPercent": (1, 100),
    "outlierThresholdPercent": (1, 100),
}


class SpecError(ValueError):
    """An invalid spec; ``str()`` is the message of the ``InvalidSpec`` condition."""


def integer_field(
    spec: Mapping[str, Any], key: str, default: int | None, lo: int, hi: int
) -> int | None:
    """``spec[key]`` as an integer in ``lo..hi``; ``default`` when absent, ``None`` when null."""
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"spec.{key} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise SpecError(f"spec.{key} must be between {lo} and {hi}, got {value}")
    return value


def bounded_field(spec: Mapping[str, Any], key: str, default: int) -> int:
    """An integer field of :data:`INTEGER_FIELD_BOUNDS`, ``default`` when absent or null."""
    value = integer_field(spec, key, default, *INTEGER_FIELD_BOUNDS[key])
    return default if value is None else value


def optional_str(spec: Mapping[str, Any], key: str) -> str | None:
    """``spec[key]`` as a string; ``None`` when absent, null or empty."""
    value = spec.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise SpecError(f"spec.{key} must be a string")
    return value
