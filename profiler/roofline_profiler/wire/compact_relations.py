"""Relations between a compact result's fields, which no field's own range can see.

The decoder (``compact_decode.py``) checks every field against the plausibility table on its
own; a result whose fields each look plausible can still contradict itself. Here:

* **Each interval holds its value.** The profiler widens every interval to include its value
  (``ceilings.widen_to_include``) and the wire rounds the widths outward
  (``compact._width_up``), so only the rounding of the value itself to
  :data:`~roofline_profiler.wire.compact_fields.SIGNIFICANT_DIGITS` digits can put it a hair
  outside: :data:`WIRE_ROUNDING` of it. A whole number's interval travels exactly.
* **The ridge point is peak over bandwidth** (Williams, Waterman, Patterson 2009; the profiler
  computes it so, ``ceilings.py``). Whatever the true peak and bandwidth are inside their 95%
  intervals, their ratio lies between ``peak_low / bandwidth_high`` and
  ``peak_high / bandwidth_low``; the ridge point must lie there too, give or take the rounding
  of the three numbers on the wire (3 × :data:`WIRE_ROUNDING`). A result without intervals
  gets the rounding alone.
* **A result is no older than its pod**, give or take the clock skew between a node and the
  API server (``plausibility.MAX_CLOCK_SKEW_SECONDS``): the profiler stamps the start of its
  measurement, which a pod cannot begin before it exists.

Each contradiction is a :class:`CompactDecodeError` naming the fields, like any other defect.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from roofline_profiler.core import plausibility
from roofline_profiler.wire import fields
from roofline_profiler.wire.compact import CompactDevice, CompactProfile
from roofline_profiler.wire.compact_fields import SIGNIFICANT_DIGITS, CompactDecodeError

#: Relative error of a number rounded to the wire's significant digits: half a unit in the
#: last digit kept.
WIRE_ROUNDING = 0.5 * 10.0 ** (1 - SIGNIFICANT_DIGITS)
#: Slack for the floating-point arithmetic of the checks themselves.
_FLOAT_SLACK = 1e-9


def _check_intervals(device: CompactDevice, where: str) -> None:
    for f in fields.DEVICE_HEADLINE:
        number = f.estimate_of(device)
        if number.interval is None:
            continue
        low, high = number.interval
        slack = 0.0 if f.is_whole else (WIRE_ROUNDING + _FLOAT_SLACK) * abs(number.value)
        if not low - slack <= number.value <= high + slack:
            raise CompactDecodeError(
                f"{where}: the {f.quantity} interval [{low:.4g}, {high:.4g}] excludes its value "
                f"{number.value:.4g}"
            )


def _ratio_range(device: CompactDevice) -> tuple[float, float]:
    """Where peak ÷ bandwidth may lie, by the two numbers' intervals (or values alone)."""
    bandwidth = device.numbers["bandwidth_bytes_per_second"]
    peak = device.numbers["peak_flops_per_second"]
    bw_low, bw_high = bandwidth.interval or (bandwidth.value, bandwidth.value)
    peak_low, peak_high = peak.interval or (peak.value, peak.value)
    lowest = peak_low / bw_high
    highest = peak_high / bw_low if bw_low > 0 else float("inf")
    return lowest, highest


def _check_ridge(device: CompactDevice, where: str) -> None:
    lowest, highest = _ratio_range(device)
    slack = 3 * WIRE_ROUNDING + _FLOAT_SLACK
    ridge = device.ridge_point
    if not lowest * (1 - slack) <= ridge <= highest * (1 + slack):
        raise CompactDecodeError(
            f"{where}: the ridge point {ridge:.4g} is not peak over bandwidth (between "
            f"{lowest:.4g} and {highest:.4g} by their intervals)"
        )


def check_relations(profile: CompactProfile, *, not_before: float | None = None) -> None:
    """Raise :class:`CompactDecodeError` when ``profile`` contradicts itself, or (given
    ``not_before``, when its pod was created) when it was measured before its pod existed."""
    for position, device in enumerate(profile.devices):
        where = f"device #{position}"
        _check_intervals(device, where)
        _check_ridge(device, where)
    if not_before is not None:
        earliest = not_before - plausibility.MAX_CLOCK_SKEW_SECONDS
        if profile.created_at < earliest:
            raise CompactDecodeError(
                f"result: field 't' lies {not_before - profile.created_at:.0f} s before its pod "
                "was created"
            )
