"""``spec.resources``: the profiler container's requests and limits, checked as the API server
would check the pod they end up in.

The CRD's pattern admits any Kubernetes quantity; what it cannot see is a memory request above
its limit, which the API server refuses only when the pod is created (every attempt of every
node failing ``PodRejected``), nor how a memory the profile sets meets the default the operator
adds (``decide.pod_resources``). Parsed here, a mistake is one ``InvalidSpec`` line.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from roofline_operator.core.spec_fields import SpecError

#: A Kubernetes quantity (``resource.Quantity``): a decimal number with a binary (``Ki``…``Ei``),
#: decimal (``n``…``E``) or exponent (``e3``) suffix.
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
#: The longest quantity string read. Kubernetes' own quantities are a few characters; reading a
#: 150,000-digit one cost about 0.6 s of the event loop per pod (``Decimal`` of it, growing
#: quadratically), so the length is checked before anything else. The CRD's ``maxLength``.
MAX_QUANTITY_CHARS = 64
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: Any, where: str) -> Decimal:
    """A quantity (string or integer, as the CRD allows) as a number of base units."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SpecError(f"{where} must be a quantity such as 4Gi, got {value!r}")
    if isinstance(value, int) and abs(value) >= 10**MAX_QUANTITY_CHARS:
        raise SpecError(f"{where} must have at most {MAX_QUANTITY_CHARS} digits")
    text = str(value)
    if len(text) > MAX_QUANTITY_CHARS:
        raise SpecError(
            f"{where} must be a quantity of at most {MAX_QUANTITY_CHARS} characters, "
            f"got {len(text)}"
        )
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise SpecError(f"{where} must be a quantity such as 4Gi, got {value!r}")
    try:
        number = Decimal(match["number"])
    except InvalidOperation:
        raise SpecError(f"{where} must be a quantity such as 4Gi, got {value!r}") from None
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    if suffix:
        exponent = int(suffix[1:])
        if abs(exponent) > 30:
            raise SpecError(f"{where} is out of range, got {value!r}")
        return number.scaleb(exponent)
    return number


def _section(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    section = raw.get(key) or {}
    if not isinstance(section, Mapping):
        raise SpecError(f"spec.resources.{key} must be a map of quantities")
    for name, value in section.items():
        where = f"spec.resources.{key}.{name}"
        if parse_quantity(value, where) < 0:
            raise SpecError(f"{where} must not be negative, got {value!r}")
    return dict(section)


def parse_resources(raw: Any) -> dict[str, Any]:
    """``spec.resources`` checked: quantities well formed and not negative, and a memory or CPU
    request at most its limit, as the API server demands of the pod."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError("spec.resources must be an object")
    requests, limits = _section(raw, "requests"), _section(raw, "limits")
    for name in set(requests) & set(limits):
        request = parse_quantity(requests[name], f"spec.resources.requests.{name}")
        limit = parse_quantity(limits[name], f"spec.resources.limits.{name}")
        if request > limit:
            raise SpecError(
                f"spec.resources.requests.{name} ({requests[name]}) must be at most "
                f"spec.resources.limits.{name} ({limits[name]})"
            )
    parsed: dict[str, Any] = {}
    if requests:
        parsed["requests"] = requests
    if limits:
        parsed["limits"] = limits
    return parsed
