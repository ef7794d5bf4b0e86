"""Metric and label names in PromQL expressions, for checking them against what is exposed.

Not a PromQL parser: it removes what cannot be a metric name (strings, label matchers, range
and offset durations, grouping clauses, function calls, keywords, numbers) and reads the
identifiers that remain. That is enough for the expressions of our rules and dashboard, and the
unit tests below pin its behaviour on the constructs they use.
"""

from __future__ import annotations

import re

KEYWORDS = frozenset(
    {
        "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
        "group_left", "group_right", "inf", "nan", "atan2",
    }
)  # fmt: skip
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_FUNCTION = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*\s*\(")
_IDENTIFIER = re.compile(r"(?<![\w:.$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^{}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING_LABELS = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^()]*)\)", re.IGNORECASE)


def _without_strings(expr: str) -> str:
    """Blank string contents (matcher values may hold braces, commas or keywords)."""
    return _STRING.sub('""', expr)


def metric_names(expr: str) -> set[str]:
    """Names of the series an expression selects (recording rule names included)."""
    text = _without_strings(expr)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _FUNCTION.sub(" ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables outside selectors
    names = set(_IDENTIFIER.findall(text))
    return {name for name in names if name.lower() not in KEYWORDS}


def selector_labels(expr: str) -> dict[str, set[str]]:
    """Label names matched in each metric's selector: ``{metric: {label, ...}}``."""
    found: dict[str, set[str]] = {}
    for metric, matchers in _SELECTOR.findall(_without_strings(expr)):
        if metric.lower() in KEYWORDS:
            continue
        found.setdefault(metric, set()).update(_MATCHER.findall(matchers))
    return found


def grouping_labels(expr: str) -> set[str]:
    """Label names of every by/without/on/ignoring clause."""
    labels: set[str] = set()
    for inner in _GROUPING_LABELS.findall(_without_strings(expr)):
        labels.update(label.strip() for label in inner.split(",") if label.strip())
    return labels
