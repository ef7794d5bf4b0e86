"""A source's text parsed into bounded values: JSON or YAML, depth and digits bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline_cli.export.source_text import (
    MAX_SOURCE_DEPTH,
    UnreadableSource,
    parse_json,
    parse_source,
)
from roofline_profiler.core.plausibility import MAX_INT_DIGITS


@pytest.mark.parametrize(
    ("text", "value", "form"),
    [
        pytest.param('{"a": [1, 2.5, null]}', {"a": [1, 2.5, None]}, "json", id="json"),
        pytest.param("a:\n  - 1\n  - x\n", {"a": [1, "x"]}, "yaml", id="yaml"),
        pytest.param("a: 0x1f\nb: 1_000\n", {"a": 31, "b": 1000}, "yaml", id="yaml-int-forms"),
        pytest.param("[" * MAX_SOURCE_DEPTH + "]" * MAX_SOURCE_DEPTH, None, "json", id="deepest"),
        pytest.param("a: " + "9" * MAX_INT_DIGITS, {"a": int("9" * MAX_INT_DIGITS)}, "yaml",
                     id="longest-yaml-int"),
        pytest.param("a: &x [1]\nb: *x\n", {"a": [1], "b": [1]}, "yaml", id="alias"),
    ],
)  # fmt: skip
def test_a_bounded_document_reads_as_its_value(text: str, value: object, form: str) -> None:
    parsed, parsed_form = parse_source(text)
    assert parsed_form == form
    if value is not None:
        assert parsed == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param('{"a": ' + "9" * (MAX_INT_DIGITS + 1) + "}", "digits", id="json-int"),
        pytest.param("a: " + "9" * 5000, "digits", id="yaml-int"),
        pytest.param("a: -" + "9" * 5000, "digits", id="yaml-negative-int"),
        pytest.param("[" * (MAX_SOURCE_DEPTH + 1) + "]" * (MAX_SOURCE_DEPTH + 1), "nested",
                     id="json-depth"),
        pytest.param("[" * 100_000, "nested", id="json-depth-unclosed"),
        pytest.param("a: " + "{b: " * 100 + "1" + "}" * 100, "nested", id="yaml-flow-depth"),
        pytest.param("".join(f"{'  ' * i}- \n" for i in range(200)), "nested", id="yaml-depth"),
        pytest.param("a: 2023-13-45\n", "neither JSON nor YAML", id="bad-timestamp"),
        pytest.param("a: !!python/object:os.system x\n", "neither", id="python-tag"),
        pytest.param("a: [\n", "neither", id="broken"),
    ],
)  # fmt: skip
def test_an_unbounded_or_broken_document_is_one_unreadable_source(text: str, reason: str) -> None:
    with pytest.raises(UnreadableSource, match=reason) as caught:
        parse_source(text)
    assert "\n" not in str(caught.value)


def test_kubectls_output_is_json_only() -> None:
    assert parse_json(b'{"kind": "RooflineProfile"}') == {"kind": "RooflineProfile"}
    for text, reason in ((b"a: b", "not a JSON"), (b"\xff", "UTF-8"), (b"[" * 70, "nested")):
        with pytest.raises(UnreadableSource, match=reason):
            parse_json(text)


@given(st.text(max_size=200))
def test_any_text_is_a_document_or_one_unreadable_source(text: str) -> None:
    message = ""
    try:
        parse_source(text)
    except UnreadableSource as exc:
        message = str(exc)
    assert "\n" not in message
