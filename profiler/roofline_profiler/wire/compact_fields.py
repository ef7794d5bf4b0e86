"""The compact result's fields: the units and digits a number travels in, and one checked reader
per kind of field.

Every reader raises :class:`CompactDecodeError` naming the field and where it sits, and checks a
number against the one table of physical plausibility (``plausibility.py``), so the decoders of
the GPU arrays (``compact_decode.py``) and of the model plans (``compact_models.py``) reject the
same defects with the same words.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.core.units import round_significant

#: Significant digits kept for every measured number.
SIGNIFICANT_DIGITS = 4
#: Units on the wire, so that four significant digits stay short: GB/s, TFLOP/s, microseconds.
BANDWIDTH_UNIT = 1e9
PEAK_UNIT = 1e12
STEP_UNIT = 1e-6
#: An ITL model's per-sequence-and-context-token term: nanoseconds (tens on a GPU, about a
#: thousand on a CPU).
ITL_CONTEXT_TERM_UNIT = 1e-9


class CompactDecodeError(ValueError):
    """A termination message that is not a valid compact result; ``str()`` is a one-line reason."""


def in_unit(value: float, unit: float, digits: int = SIGNIFICANT_DIGITS) -> float | int:
    """``value`` in the wire's ``unit``, rounded to ``digits`` significant digits."""
    return round_significant(value / unit, digits=digits)


def steps_to_wire(step_seconds: Sequence[float]) -> list[float | int]:
    """Step times as the wire carries them: microseconds, four significant digits."""
    return [in_unit(s, STEP_UNIT) for s in step_seconds]


def _check(value: Any, kind: type | tuple[type, ...], name: str, where: str) -> Any:
    # bool is an int subclass; a boolean is never a valid number here.
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CompactDecodeError(f"{where}: field {name!r} has the wrong type")
    return value


def field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise CompactDecodeError(f"{where}: missing field {key!r}")
    return _check(obj[key], kind, key, where)


def measured(value: Any, quantity: str, name: str, where: str, unit: float = 1.0) -> float:
    """A measured number in base units, inside the plausibility table's range of ``quantity``."""
    try:
        return plausibility.number(value, quantity, name, unit)
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"{where}: {exc}") from None


def whole(value: Any, quantity: str, name: str, where: str) -> int:
    """An integer inside the plausibility table's range of ``quantity``."""
    try:
        return plausibility.integer(value, quantity, name)
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"{where}: {exc}") from None


def string(value: Any, pattern: re.Pattern[str], name: str, where: str) -> str:
    try:
        return plausibility.text(value, pattern, name)
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"{where}: {exc}") from None


def bounded_list(value: Any, name: str, where: str, most: int) -> list[Any]:
    items: list[Any] = _check(value, list, name, where)
    if len(items) > most:
        raise CompactDecodeError(f"{where}: field {name!r} has more than {most} entries")
    return items
