"""Types of the bench scripts' flags: a bad value is argparse's one-line error (exit 2).

A count such as ``--runs``, ``--rounds``, ``--threads`` or a node count of ``--sizes`` means
nothing at 0 or below; refused at parsing, it cannot end in a traceback halfway through a run.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number above 0."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, not {text!r}")
    return value
