"""A saved result read back from a file: bounded numbers where the schema has them, the maths'
inputs within the limits, every derived number checked (``roofline plan --from`` end to end is
``tests/profiler/cli/test_plan_from_file.py``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from roofline_profiler.wire.result import load_schema
from roofline_profiler.wire.saved_result import (
    MAX_INTEGER,
    MAX_MAGNITUDE,
    UnreadableResult,
    bounded,
    parse_result_text,
    read_saved_result,
)
from tests.profiler.synthetic import measured_result, synthetic_format

SCHEMA = load_schema()
DOCUMENT = measured_result().to_dict()


def test_a_saved_result_reads_back_as_it_was_written() -> None:
    assert read_saved_result(json.dumps(DOCUMENT)) == measured_result()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param('{"a": NaN}', "NaN is no JSON number", id="nan"),
        pytest.param('{"a": -Infinity}', "-Infinity is no JSON number", id="infinity"),
        pytest.param('{"a": ' + "7" * 1001 + "}", "an integer of 1001 digits", id="long-integer"),
        pytest.param("[" * 65 + "]" * 65, "nested over 64 deep", id="deep"),
        pytest.param('{"a": ', "Expecting value", id="truncated"),
    ],
)
def test_a_text_that_is_no_bounded_json_value_is_refused(text: str, reason: str) -> None:
    with pytest.raises(UnreadableResult, match=reason):
        parse_result_text(text)


def _device(**changes: Any) -> dict[str, Any]:
    return {**DOCUMENT["devices"][0], **changes}


def test_numbers_the_schema_declares_are_read_as_floats_and_integers_as_integers() -> None:
    document = {**DOCUMENT, "durationSeconds": 21, "devices": [_device(rounds=8.0)]}
    read = bounded(document, SCHEMA, SCHEMA)
    assert isinstance(read["durationSeconds"], float)
    assert isinstance(read["devices"][0]["rounds"], int)
    assert (
        read["devices"][0]["minBatchCrossingInterval"]
        == DOCUMENT["devices"][0]["minBatchCrossingInterval"]
    ), "a oneOf of an object and null reads the object"


@pytest.mark.parametrize(
    ("document", "where"),
    [
        pytest.param({**DOCUMENT, "durationSeconds": 10**400}, "durationSeconds", id="huge-int"),
        pytest.param(
            {**DOCUMENT, "createdAtUnix": MAX_MAGNITUDE * 10}, "createdAtUnix", id="float"
        ),
        pytest.param(
            {**DOCUMENT, "devices": [_device(rounds=MAX_INTEGER + 1)]},
            "devices/0/rounds",
            id="integer",
        ),
        pytest.param(
            {**DOCUMENT, "devices": [_device(rounds=2.5)]}, "devices/0/rounds", id="fraction"
        ),
        pytest.param(
            {**DOCUMENT, "devices": [_device(telemetry={"watts": 1e300})]},
            "devices/0/telemetry/watts",
            id="free-number",
        ),
    ],
)
def test_a_number_out_of_bounds_is_refused_naming_where(
    document: dict[str, Any], where: str
) -> None:
    with pytest.raises(UnreadableResult, match=f"\\({where}: "):
        bounded(document, SCHEMA, SCHEMA)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param(
            {"batches": [1, 2, 70000]}, "config/batches: 70000 is not a batch", id="batch"
        ),
        pytest.param({"shape": {"k": 1 << 21, "n": 1}}, "config/shape: K and N", id="shape"),
    ],
)
def test_the_maths_inputs_lie_within_the_profilers_limits(
    change: dict[str, Any], reason: str
) -> None:
    document = {**DOCUMENT, "config": {**DOCUMENT["config"], **change}}
    with pytest.raises(UnreadableResult, match=reason):
        read_saved_result(json.dumps(document))


def test_a_weight_formats_implausible_peak_is_refused_naming_where() -> None:
    result = measured_result()
    device = dataclasses.replace(result.devices[0], weight_formats=(synthetic_format(),))
    document = dataclasses.replace(result, devices=(device,)).to_dict()
    document["devices"][0]["weightFormats"][0]["peakFlopsPerSecond"] = 1e20
    with pytest.raises(UnreadableResult, match="devices/0/weightFormats/0: "):
        read_saved_result(json.dumps(document))


def test_a_derived_number_that_overflows_is_refused() -> None:
    read = dict(DOCUMENT["devices"][0]["bandwidth"]["read"])
    read["samplesSeconds"] = [1e-300] * len(read["samplesSeconds"])
    device = _device(bandwidth={**DOCUMENT["devices"][0]["bandwidth"], "read": read})
    with pytest.raises(UnreadableResult, match="a number derived from it is out of range"):
        read_saved_result(json.dumps({**DOCUMENT, "devices": [device]}))
