import json

import jsonschema
import pytest

from roofline_profiler.result import (
    READABLE_SCHEMA_VERSIONS,
    SCHEMA_VERSION,
    ProfileResult,
    load_schema,
    validate_document,
)
from tests.profiler.synthetic import synthetic_result


def test_result_document_validates_against_the_published_schema() -> None:
    validate_document(synthetic_result(devices=2).to_dict())


def test_result_round_trips_through_json_exactly() -> None:
    document = synthetic_result(devices=2).to_dict()
    text = json.dumps(document)
    again = ProfileResult.from_dict(json.loads(text)).to_dict()
    assert again == document


def test_headline_keys_are_camel_case_and_present() -> None:
    device = synthetic_result().to_dict()["devices"][0]
    for key in (
        "bandwidthBytesPerSecond",
        "peakFlopsPerSecond",
        "ridgePoint",
        "recommendedMinBatch",
    ):
        assert key in device
    assert {"batch", "stepSeconds"} <= set(device["sweep"][0])


def test_schema_version_is_pinned_in_the_schema_file() -> None:
    versions = load_schema()["properties"]["schemaVersion"]["enum"]
    assert versions == list(READABLE_SCHEMA_VERSIONS)
    assert versions[-1] == SCHEMA_VERSION


def test_an_older_or_newer_document_is_refused() -> None:
    document = synthetic_result().to_dict()
    document["schemaVersion"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="schemaVersion"):
        ProfileResult.from_dict(document)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(("devices", 0, "ridgePoint"), -1.0, id="negative-ridge"),
        pytest.param(("devices", 0, "recommendedMinBatch"), 0, id="zero-min-batch"),
        pytest.param(("devices", 0, "backend"), "tpu", id="unknown-backend"),
        pytest.param(("config", "dtype"), "int8", id="unknown-dtype"),
    ],
)
def test_the_schema_rejects_impossible_values(path: tuple[object, ...], value: object) -> None:
    document = synthetic_result().to_dict()
    target = document
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    target[path[-1]] = value  # type: ignore[index]
    with pytest.raises(jsonschema.ValidationError):
        validate_document(document)
