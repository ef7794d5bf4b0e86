"""Commented YAML: what every reader parses back is exactly the data, comments above fields."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from roofline_cli.export.commented import (
    Note,
    UnwritableText,
    plain,
    render,
    render_document,
    scalar,
)
from tests.cli.export_sources import SEPARATORS, hostile_text


@pytest.mark.parametrize(
    "value",
    [
        "yes", "no", "on", "null", "true", "1.0", "0x10", "a: b", "#x", "- x", "", " padded ",
        "quote \" and \\ backslash", "µs ≈ α + β·B", "--max-num-seqs=96", "nvidia.com/gpu",
        "NVIDIA H200", 0, 7, -3, 0.75, 1e-08, 3.5e-08, 12345678.0, 1e21, True, False, None,
        "abc\n", "a\u2028b", "a\x85b", "a\u2029b", "a\rb", "\x00", "\x1b[31m", "\x7f",
        "\u202eevil", "\u200b", "\ufeff", "\ufffe", "\U000e0001", "tab\there",
    ],
)  # fmt: skip
def test_a_scalar_reads_back_as_itself(value: Any) -> None:
    assert yaml.safe_load(f"key: {scalar(value)}") == {"key": value}


def test_a_float_always_has_a_decimal_point_so_yaml_1_1_reads_a_float() -> None:
    assert scalar(1e-08) == "1.0e-08"
    assert isinstance(yaml.safe_load(scalar(1e-08)), float)


def test_nan_has_no_yaml_form() -> None:
    with pytest.raises(ValueError, match="no YAML form"):
        scalar(float("nan"))


def test_comments_sit_above_their_fields_and_the_data_reads_back() -> None:
    document = {
        "spec": {
            "threshold": Note("96", "maxBatch 96: the batch within the SLO"),
            "triggers": [
                Note({"type": "prometheus", "metadata": {"q": Note("x", "the query")}}, "first"),
                {"type": "cpu"},
                ["nested", 1],
            ],
            "empty": {},
            "none": [],
            "text": "line one\nline two\n",
        }
    }
    text = render_document(document, "header")
    assert yaml.safe_load(text) == plain(document)
    lines = text.splitlines()
    assert lines[0] == "# header"
    assert (
        lines[lines.index('  threshold: "96"') - 1] == "  # maxBatch 96: the batch within the SLO"
    )
    assert "    # first" in lines
    assert "    - type: prometheus" in lines


def test_a_long_comment_wraps_within_the_width() -> None:
    text = render_document({"key": Note(1, "word " * 60)})
    assert all(len(line) <= 100 for line in text.splitlines())
    assert yaml.safe_load(text) == {"key": 1}


def test_documents_are_one_stream_and_a_list_is_a_document() -> None:
    stream = render([("a", {"kind": "A"}), ("b", [Note({"op": "add"}, "why")])])
    assert list(yaml.safe_load_all(stream)) == [{"kind": "A"}, [{"op": "add"}]]


@pytest.mark.parametrize("char", [c for c in SEPARATORS if c != "\n"])
def test_a_comment_never_carries_a_separator_or_control_character(char: str) -> None:
    with pytest.raises(UnwritableText, match="U\\+") as caught:
        render_document({"key": Note(1, f"product NVIDIA{char}  evil: injected")})
    assert str(caught.value).isprintable()
    with pytest.raises(UnwritableText):
        render([(f"from fleet{char}.json", {"key": 1})])


@pytest.mark.parametrize(
    "text",
    ["no newline at the end", "two at the end\n\n", " indented first line\n", "a\u2028b\n",
     "cr\r\n", "\n\n  indented after blank lines\n", "\n"],
)  # fmt: skip
def test_text_a_literal_block_would_change_is_written_quoted(text: str) -> None:
    rendered = render_document({"data": {"key": text}})
    assert "|" not in rendered
    assert yaml.safe_load(rendered) == {"data": {"key": text}}


def test_a_key_with_a_trailing_newline_is_quoted() -> None:
    assert yaml.safe_load(render_document({"abc\n": 1, "evil\u2028x": 2})) == {
        "abc\n": 1,
        "evil\u2028x": 2,
    }


_keys = hostile_text | st.sampled_from(["kind", "metadata", "a: b", "- x", "#"])
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | hostile_text
)
_documents = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=20,
)


@given(document=st.dictionaries(_keys, _documents, min_size=1, max_size=4))
def test_any_document_reads_back_exactly_or_is_unwritable(document: dict[str, object]) -> None:
    """Whatever its strings hold (separators, controls, bidi characters, look-alike YAML), a
    document reads back as exactly itself, or is refused as a whole (a lone surrogate)."""
    message = ""
    try:
        text = render([("header", document), ("second", document)])
    except UnwritableText as exc:
        message = str(exc)
    if message:
        assert "surrogate" in message
    else:
        assert list(yaml.safe_load_all(text)) == [document, document]
