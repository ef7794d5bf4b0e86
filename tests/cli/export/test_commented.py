"""Commented YAML: what every reader parses back is exactly the data, comments above fields."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from roofline_cli.export.commented import Note, plain, render, render_document, scalar


@pytest.mark.parametrize(
    "value",
    [
        "yes", "no", "on", "null", "true", "1.0", "0x10", "a: b", "#x", "- x", "", " padded ",
        "quote \" and \\ backslash", "µs ≈ α + β·B", "--max-num-seqs=96", "nvidia.com/gpu",
        "NVIDIA H200", 0, 7, -3, 0.75, 1e-08, 3.5e-08, 12345678.0, 1e21, True, False, None,
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
