"""One line out of a message or an exception, for stderr, a status condition or an error reason.

Every error the product reports is a single line (a CLI error, a termination message, a failure
message in status), so this is the one rule for cutting a longer text down to one, and
:class:`UsageError` is the one exception of bad command-line input.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import unicodedata


def printable(text: str) -> str:
    """``text`` without the characters a terminal, a log viewer or a web page acts on rather
    than shows: C0 and C1 controls (ESC sequences, OSC 8 hyperlinks, BEL), format characters
    (bidi overrides such as U+202E, zero-width U+200B) and every other non-printing category;
    a tab becomes a space. A failed pod's message reaches the status, Events and the log."""
    return "".join(
        " " if char == "\t" else char
        for char in text
        if char == "\t" or unicodedata.category(char)[0] != "C"
    )


def first_line(text: object, fallback: str = "", max_chars: int | None = None) -> str:
    """The first non-empty line of ``text`` (a string or an exception), stripped and
    :func:`printable`.

    ``fallback`` when there is none (``None``, an empty message); longer than ``max_chars``, the
    line is cut and ends in ``...``.
    """
    for line in ("" if text is None else str(text)).splitlines():
        line = printable(line).strip()
        if line:
            if max_chars is not None and len(line) > max_chars:
                return line[: max_chars - 3] + "..."
            return line
    return fallback


class UsageError(ValueError):
    """Bad command-line input: ``str()`` is the one line the command line prints after
    ``roofline: error:``, with exit status 2 and nothing written."""
