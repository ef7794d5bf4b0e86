"""The one table of physical plausibility, and a bounded JSON reader, for every untrusted input.

What a profiler pod reports (its termination message, ``compact.py``) and what a Node carries
(the record annotation any writer of that Node may edit) reach node labels that steer schedulers,
a status the API server must accept and metrics every scrape renders. So every number crossing
those boundaries is read here: of the right type, finite, and inside a range no real device can
leave, one table for all readers. A value outside fails with a one-line message that names the
field, and the caller fails that one node (``InvalidResult``), never the round.

The ranges are generous on purpose: they keep out overflow, NaN, negative and absurd values, not
a slow GPU. Bandwidth stops at 100 TB/s (an H200 moves 4.8 TB/s), peak at 100 PFLOP/s (≈ 1 dense
PFLOP/s today), a step at one hour.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core.limits import (
    DTYPE_NAMES,
    MAX_BATCH,
    MAX_CONTEXT_TOKENS,
    MAX_DIMENSION,
    MAX_GPUS_PER_POD,
    MAX_REQUEST_RATE,
    MAX_TENSOR_PARALLEL,
)
from roofline_profiler.core.units import SECONDS_PER_DAY


class ImplausibleValue(ValueError):
    """A value no real profile can hold; ``str()`` is a one-line reason naming the field."""


@dataclass(frozen=True)
class Range:
    """Closed range ``[low, high]`` of one quantity in base units; ``positive`` excludes 0."""

    low: float
    high: float
    unit: str
    positive: bool = False

    def describe(self) -> str:
        low = "0 < x" if self.positive else f"{self.low:g} ≤ x"
        return f"{low} ≤ {self.high:g} {self.unit}".strip()


DAY_SECONDS = float(SECONDS_PER_DAY)
#: Most allocatable units of a GPU resource a node may advertise and be profiled with.
MAX_GPU_UNITS = 1 << 16
#: The table every reader checks against, keyed by quantity.
RANGES: dict[str, Range] = {
    "bandwidth": Range(0.0, 100e12, "B/s", positive=True),
    "peak": Range(0.0, 100e15, "FLOP/s", positive=True),
    # FLOP per byte: peak over bandwidth, a few hundred on today's GPUs.
    "ridge point": Range(0.0, 1e6, "FLOP/B", positive=True),
    "min batch": Range(1, MAX_BATCH, ""),
    "batch": Range(1, MAX_BATCH, ""),
    # Batches a model's memory or latency bound allows; 0 when none fits.
    "batch bound": Range(0, 1 << 24, ""),
    "step": Range(0.0, 3600.0, "s", positive=True),
    # A model plan's decode step: no device reads a model's weights in under a nanosecond, and
    # a step shorter than that would make its tokens/s (batch over step) overflow to infinity.
    "model step": Range(1e-9, 3600.0, "s"),
    # A term of a plan's ITL model (seconds per step, per sequence, per sequence and context
    # token); a non-negative fit may set one to exactly 0.
    "itl term": Range(0.0, 3600.0, "s"),
    # A fit's worst relative error (1 is 100%).
    "relative error": Range(0.0, 100.0, ""),
    "duration": Range(0.0, 7 * DAY_SECONDS, "s"),
    # The largest request rate one replica sustains (``load_plan.MaxRate``): 0 when no rate
    # meets the targets; a million requests a second is far past any replica's prefill.
    "request rate": Range(0.0, MAX_REQUEST_RATE, "requests/s"),
    "dimension": Range(1, MAX_DIMENSION, ""),
    "context": Range(1, MAX_CONTEXT_TOKENS, "tokens"),
    "tensor parallel": Range(1, MAX_TENSOR_PARALLEL, ""),
    "device index": Range(0, MAX_GPUS_PER_POD - 1, ""),
    # An interval's width, in percent of its value below and above it; rounding can make one
    # side slightly negative (an interval just beside its value), never both together.
    "width below": Range(-100.0, 100.0, "%"),
    "width above": Range(-100.0, 10_000.0, "%"),
    "attempts": Range(0, 1_000, ""),
    "gpus": Range(0, MAX_GPUS_PER_POD, ""),
    # Allocatable units of a node's GPU resource: time-slicing and MPS advertise each GPU
    # several times over (replicas), so a node of 8 GPUs may show hundreds.
    "gpu units": Range(0, MAX_GPU_UNITS, ""),
    # A device's memory: 1 PiB, thousands of times today's largest GPU (141 GiB).
    "memory": Range(0, 1 << 50, "B"),
    # Unix seconds up to the year 2286, whatever ``now`` is; :func:`timestamp` narrows it.
    "time": Range(0.0, 1e10, "s"),
}
#: Most devices one result may list: a node's GPUs a pod may request.
MAX_DEVICES = MAX_GPUS_PER_POD
MAX_BATCHES = 64
#: How far in the future a result's or record's time may lie: clocks of nodes drift a little.
MAX_CLOCK_SKEW_SECONDS = 600.0
#: How old a fresh result may be: a profiler pod lives at most a day (``timeoutSeconds``), plus
#: the pending time before it.
MAX_RESULT_AGE_SECONDS = 2 * DAY_SECONDS
#: Deepest nesting of any document read here: the compact result nests five levels, a record
#: four. ``json.loads`` recurses per level, 4096 bytes of ``[`` would exhaust the stack.
MAX_JSON_DEPTH = 8
#: Longest integer literal parsed at all (Python refuses more than 4300 digits with a bare
#: ``ValueError``); shorter absurd integers (10**400) reach the field checks, which name them.
MAX_INT_DIGITS = 1000

# The patterns below are matched whole (``text`` uses ``fullmatch``).
#: A device name (``NVIDIA H200``): printable ASCII only.
DEVICE_NAME = re.compile(r"[ -~]{1,64}")
#: A warning code (``CpuContention``).
WARNING_CODE = re.compile(r"[A-Za-z][A-Za-z0-9]{0,39}")
#: A Kubernetes label value of at least one character (model names become label values).
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
#: A spec digest and similar tokens.
TOKEN = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ImplausibleValue(f"an integer of {len(text)} digits is too long")
    return int(text)


def nesting_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The deepest nesting of arrays and objects in JSON ``text``, counting up to ``limit + 1``.

    Scans the characters once without recursion, so it is safe on any input.
    """
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def load_json(text: str, max_bytes: int, what: str) -> Any:
    """Parse ``text`` bounded in size, depth and integer length.

    ``NaN``, ``Infinity`` and overflowing numbers parse (to non-finite floats, or huge ints) so
    that the field checks below reject them by name. Raises :class:`ImplausibleValue` (a
    ``ValueError``) for anything else, malformed JSON included; never ``RecursionError``.
    """
    if len(text.encode("utf-8", errors="replace")) > max_bytes:
        raise ImplausibleValue(f"{what} is longer than {max_bytes} bytes")
    if nesting_depth(text) > MAX_JSON_DEPTH:
        raise ImplausibleValue(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise ImplausibleValue(f"not a JSON {what} ({exc.msg})") from None
    except ImplausibleValue as exc:
        raise ImplausibleValue(f"{what}: {exc}") from None


def _is_number(value: Any) -> bool:
    # bool is an int subclass; a boolean is never a valid number here.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number(value: Any, quantity: str, field: str, scale: float = 1.0) -> float:
    """``value × scale`` as a float inside :data:`RANGES` ``[quantity]``."""
    scaled = _finite(value, field, scale)
    bound = RANGES[quantity]
    if not bound.low <= scaled <= bound.high or (bound.positive and scaled <= 0):
        raise ImplausibleValue(f"field {field!r} = {scaled:.4g} is outside {bound.describe()}")
    return scaled


def interval_end(value: Any, quantity: str, field: str) -> float:
    """One end of a 95% interval around a ``quantity``: from 0 (a width of 100% below) to the
    widest width above (:data:`RANGES` ``["width above"]``) past the quantity's own range."""
    end = _finite(value, field, 1.0)
    high = RANGES[quantity].high * (1 + RANGES["width above"].high / 100)
    if not 0 <= end <= high:
        raise ImplausibleValue(f"field {field!r} = {end:.4g} is outside 0 ≤ x ≤ {high:g}")
    return end


def _finite(value: Any, field: str, scale: float) -> float:
    if not _is_number(value):
        raise ImplausibleValue(f"field {field!r} is not a number")
    try:
        scaled = float(value) * scale
    except OverflowError:
        scaled = math.inf
    if not math.isfinite(scaled):
        raise ImplausibleValue(f"field {field!r} is not a finite number")
    return scaled


def integer(value: Any, quantity: str, field: str) -> int:
    """``value`` as an int inside :data:`RANGES` ``[quantity]``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ImplausibleValue(f"field {field!r} is not an integer")
    bound = RANGES[quantity]
    if not bound.low <= value <= bound.high:
        shown = str(value) if abs(value) < 10**12 else f"an integer of {len(str(value))} digits"
        raise ImplausibleValue(f"field {field!r} = {shown} is outside {bound.describe()}")
    return value


def timestamp(value: Any, field: str, now: float | None, max_age: float | None = None) -> float:
    """Unix seconds inside the table's ``time`` range and, given ``now``, no later than
    ``now`` plus the clock skew and (given ``max_age`` too) no older than ``max_age``."""
    seconds = number(value, "time", field)
    if now is not None and seconds > now + MAX_CLOCK_SKEW_SECONDS:
        raise ImplausibleValue(f"field {field!r} lies {seconds - now:.0f} s in the future")
    if now is not None and max_age is not None and seconds < now - max_age:
        raise ImplausibleValue(f"field {field!r} is {now - seconds:.0f} s old")
    return seconds


def text(value: Any, pattern: re.Pattern[str], field: str) -> str:
    """``value`` as a string ``pattern`` matches whole (which bounds its length): with
    ``match``, a pattern ending in ``$`` accepted a trailing newline (``"CpuContention\n"``)."""
    if not isinstance(value, str):
        raise ImplausibleValue(f"field {field!r} is not a string")
    if not pattern.fullmatch(value):
        raise ImplausibleValue(f"field {field!r} = {value[:40]!r} is not an allowed string")
    return value


def optional_text(value: Any, field: str, max_chars: int) -> str | None:
    """``None``, or a string of at most ``max_chars`` characters (a message, a pod's name)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_chars:
        raise ImplausibleValue(f"field {field!r} is not a string of at most {max_chars} chars")
    return value


def dtype(value: Any, field: str = "dtype") -> str:
    if value not in DTYPE_NAMES:
        raise ImplausibleValue(f"field {field!r} is not one of {', '.join(DTYPE_NAMES)}")
    return str(value)
