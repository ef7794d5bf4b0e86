"""Numbers for people: three significant digits in engineering units, never ``1.2e+03``.

Pure module (no torch, no matplotlib): the terminal summary, the Markdown report and the plots'
axis labels all format through it, so ``1200 ms`` reads ``1.20 s`` everywhere.
"""

from __future__ import annotations

import math

#: Significant digits of a formatted quantity: what the measurements' own spread supports.
DIGITS = 3
_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BINARY_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


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
