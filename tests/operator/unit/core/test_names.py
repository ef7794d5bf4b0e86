"""The names the operator shares with the cluster, and its Kubernetes timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline_operator.core import names
from roofline_operator.core.names import (
    API_VERSION,
    NODE_LABEL_KEYS,
    RESOURCE,
    FailureReason,
    NodeState,
    format_time,
    parse_time,
)

CONTRACTS = Path(__file__).resolve().parents[4] / "docs" / "contracts.md"

#: Every label, annotation and finalizer the operator writes onto objects users see.
PINNED = [
    pytest.param(getattr(names, name), id=name)
    for name in dir(names)
    if name.startswith(("LABEL_", "ANNOTATION_", "FINALIZER")) and name != "ANNOTATION_PREFIX"
]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00Z", id="epoch"),
        pytest.param(1796272200.0, "2026-12-03T04:30:00Z", id="whole-seconds"),
        pytest.param(1796272200.9, "2026-12-03T04:30:00Z", id="fraction-dropped"),
    ],
)
def test_times_are_written_as_utc_rfc3339_in_whole_seconds(seconds: float, text: str) -> None:
    assert format_time(seconds) == text


def test_no_time_is_written_as_none() -> None:
    assert format_time(None) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-12-03T04:30:00Z", id="zulu"),
        pytest.param("2026-12-03T04:30:00+00:00", id="offset"),
        pytest.param("2026-12-03T05:30:00+01:00", id="other-zone"),
    ],
)
def test_kubernetes_timestamps_are_read_as_unix_seconds(text: str) -> None:
    assert parse_time(text) == 1796272200.0


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(None, id="absent"),
        pytest.param("", id="empty"),
        pytest.param("yesterday", id="malformed"),
        pytest.param(1796272200, id="a-number"),
    ],
)
def test_an_absent_or_malformed_timestamp_reads_as_none(text: object) -> None:
    assert parse_time(text) is None


def test_a_written_time_reads_back_to_its_whole_second() -> None:
    assert parse_time(format_time(1796272200.75)) == 1796272200.0


def test_the_api_version_and_resource_are_built_from_group_version_and_plural() -> None:
    assert API_VERSION == "roofline.dev/v1alpha1"
    assert RESOURCE == "rooflineprofiles.roofline.dev"


def test_every_node_label_is_in_the_roofline_namespace_and_the_profile_label_names_the_owner() -> (
    None
):
    assert all(key.startswith("roofline.dev/") for key in NODE_LABEL_KEYS)
    assert len(set(NODE_LABEL_KEYS)) == len(NODE_LABEL_KEYS)
    assert names.LABEL_PROFILE in NODE_LABEL_KEYS


@pytest.mark.parametrize("key", PINNED)
def test_every_label_annotation_and_finalizer_is_pinned_in_the_contracts(key: str) -> None:
    assert f"`{key}" in CONTRACTS.read_text(), f"{key} is not in docs/contracts.md"


@pytest.mark.parametrize("kind", [NodeState, FailureReason])
def test_states_and_failure_reasons_are_distinct_camel_case_words(
    kind: type[NodeState] | type[FailureReason],
) -> None:
    values = [member.value for member in kind]
    assert len(set(values)) == len(values)
    assert all(value[0].isupper() and value.isalnum() for value in values), values
