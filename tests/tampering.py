"""Untrusted JSON for property-based tests: any JSON value, with the numbers that break naive
code, and a sound document with one of its values replaced by one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Any JSON value, with the numbers that break naive code: NaN, infinities, huge integers.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=80),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=30,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (containers included)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


@st.composite
def tampered_documents(draw: st.DrawFn, document: Any) -> str:
    """``document`` with one of its values replaced by any JSON value or any float."""
    path = draw(st.sampled_from(_paths(document)))
    value = draw(json_values | st.floats() | st.floats(min_value=-1e400, max_value=1e400))
    return json.dumps(_replaced(document, path, value))
