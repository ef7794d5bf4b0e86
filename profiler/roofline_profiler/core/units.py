"""Units: seconds, bytes and FLOP/s inside, text for people and durations read from people.

Every time the profiler and the operator compute with is in seconds, every size in bytes, every
rate in base units per second; the wire formats scale them (``compact_fields.BANDWIDTH_UNIT``)
and the measuring code converts what its APIs return (milliseconds, nanoseconds) where it reads
them.
This module holds the conversions that text needs: :func:`parse_duration` reads a duration
(``50ms``, ``1h30m``) as seconds for every field and option that takes one, and the ``format_*``
functions write numbers for people with three significant digits in engineering units, never
``1.2e+03`` — the terminal summary, the Markdown report and the plots' axis labels all format
through them, so ``1200 ms`` reads ``1.20 s`` everywhere. :func:`round_significant` is the one
rounder of what a wire or a status carries.

Pure module: no torch, no matplotlib.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from functools import lru_cache

#: Significant digits of a formatted quantity: what the measurements' own spread supports.
DIGITS = 3
_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BINARY_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))

SECONDS_PER_HOUR = 3600
SECONDS_PER_DAY = 86_400

#: Seconds per unit of a duration: Go's ``time.ParseDuration`` units, which CEL's ``duration()``
#: reads too. Each field names the units it takes.
DURATION_UNIT_SECONDS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
#: Longest duration text read at all; the CRD caps its duration fields at 32 characters.
MAX_DURATION_CHARS = 64
#: A number as Go writes a duration's (``1``, ``1.5``), and as a person may type one on a
#: command line (also ``.5`` and ``1e2``).
_GO_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_FREE_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"


class DurationError(ValueError):
    """Text that is not a duration of the syntax asked for; ``str()`` is a one-line reason."""


@lru_cache(maxsize=16)
def _duration_term(units: tuple[str, ...], free_form: bool) -> re.Pattern[str]:
    # Longest unit first, so that ``ms`` is never read as ``m`` followed by ``s``.
    suffix = "|".join(re.escape(u) for u in sorted(units, key=len, reverse=True))
    if free_form:
        return re.compile(rf"\s*({_FREE_NUMBER})\s*({suffix})\s*")
    return re.compile(rf"({_GO_NUMBER})({suffix})")


def parse_duration(
    text: str, units: Collection[str] = tuple(DURATION_UNIT_SECONDS), *, free_form: bool = False
) -> float:
    """Seconds in ``text``: one or more terms, each a decimal number and one of ``units``, that
    add up, as Go's ``time.ParseDuration`` reads them (``90s``, ``1h30m``, ``1s500ms``; no sign,
    no bare number). ``free_form`` also takes what a person types on a command line: whitespace
    around and inside terms (``" 20 ms "``), a leading point (``.5s``) and an exponent (``1e2ms``).

    Bounded: at most :data:`MAX_DURATION_CHARS` characters and a finite result, zero included
    (each caller decides whether zero means anything). Raises :class:`DurationError`.
    """
    if not isinstance(text, str) or not text:
        raise DurationError(f"duration {text!r} is empty")
    if len(text) > MAX_DURATION_CHARS:
        raise DurationError(
            f"duration of {len(text)} characters is longer than {MAX_DURATION_CHARS}"
        )
    unknown = set(units) - set(DURATION_UNIT_SECONDS)
    if unknown:
        raise ValueError(f"unknown duration units {sorted(unknown)}")
    term = _duration_term(tuple(sorted(units)), free_form)
    position, seconds = 0, 0.0
    while position < len(text):
        match = term.match(text, position)
        if match is None:
            raise DurationError(f"duration {text!r} is not a number and a unit, e.g. 50ms")
        seconds += float(match.group(1)) * DURATION_UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not math.isfinite(seconds):
        raise DurationError(f"duration {text!r} is out of range")
    return seconds


def round_significant(value: float, *, digits: int) -> float | int:
    """``value`` to ``digits`` significant digits, as ``%g`` rounds it; an integral result as an
    ``int`` (below 10^15, where a float is still exact), so JSON writes ``5``, not ``5.0``. Zero,
    infinities and NaN come back unchanged."""
    if value == 0 or not math.isfinite(value):
        return value
    rounded = float(f"{value:.{digits}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded


def significant(value: float, digits: int = DIGITS, *, trim: bool = False) -> str:
    """``value`` to ``digits`` significant digits in fixed notation; whole numbers of more
    digits keep them all, with thousands separators (``5,400``). ``trim`` drops trailing zeros
    (axis ticks: ``10 ms`` rather than ``10.0 ms``)."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    if abs(round(value, decimals)) >= 10 ** (magnitude + 1):
        decimals = max(0, decimals - 1)  # 9.996 rounds up to 10.0, not 10.00
    text = f"{value:,.{decimals}f}"
    if trim and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_si(value: float, unit: str, digits: int = DIGITS, *, trim: bool = False) -> str:
    """``4.30 TB/s``, ``412 TFLOP/s``, ``812 B/s``: a decimal SI prefix and ``digits`` digits."""
    for scale, prefix in _SI_PREFIXES:
        if abs(value) >= scale * (1 - 0.5 * 10**-digits):
            return f"{significant(value / scale, digits, trim=trim)} {prefix}{unit}"
    return f"{significant(value, digits, trim=trim)} {unit}"


def format_seconds(seconds: float, digits: int = DIGITS, *, trim: bool = False) -> str:
    """``1.20 s``, ``13.6 ms``, ``850 µs``: the largest unit in which the value is at least 1."""
    for scale, unit in _TIME_UNITS:
        if abs(seconds) >= scale * (1 - 0.5 * 10**-digits):
            return f"{significant(seconds / scale, digits, trim=trim)} {unit}"
    return f"{significant(seconds / 1e-9, digits, trim=trim)} ns"


def format_rate(value: float, unit: str = "tokens/s", digits: int = DIGITS) -> str:
    """``0.835 tokens/s``, ``9.92 tokens/s``, ``5,400 tokens/s``: rates people compare by eye
    stay in one unit (no prefix), so a fleet's tokens/s line up."""
    return f"{significant(value, digits)} {unit}"


def format_bytes(value: float, digits: int = DIGITS) -> str:
    """``15.0 GiB``, ``128 KiB``, ``512 B``: binary units, as memory sizes are."""
    for scale, unit in _BINARY_UNITS:
        if abs(value) >= scale:
            return f"{significant(value / scale, digits)} {unit}"
    return f"{value:.0f} B"
