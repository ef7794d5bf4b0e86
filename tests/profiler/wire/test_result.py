import dataclasses
import json

import jsonschema
import pytest

from roofline_profiler.core.decode_model import AttentionRoofline, plan_models
from roofline_profiler.core.engines import VLLM_CPU
from roofline_profiler.core.limits import BACKEND_NAMES
from roofline_profiler.core.planning import PlanOptions
from roofline_profiler.wire.result import (
    READABLE_SCHEMA_VERSIONS,
    SCHEMA_VERSION,
    ProfileResult,
    load_schema,
    validate_document,
)
from tests.profiler.core.step_builders import synthetic
from tests.profiler.synthetic import synthetic_format, synthetic_result


def test_result_document_validates_against_the_published_schema() -> None:
    validate_document(synthetic_result(devices=2).to_dict())


def test_result_round_trips_through_json_exactly() -> None:
    document = synthetic_result(devices=2).to_dict()
    text = json.dumps(document)
    again = ProfileResult.from_dict(json.loads(text)).to_dict()
    assert again == document


def test_cpu_wait_shares_validate_and_round_trip() -> None:
    waits = {"read": {0: 0.4}, "mm 8192x8192x8192": {1: 0.1}, "decode B=1": {2: 0.2}}
    document = synthetic_result(cpu_waits=waits).to_dict()
    validate_document(document)
    read = document["devices"][0]["bandwidth"]["read"]
    assert read["roundsCpuWait"][:2] == [0.4, 0.0]
    assert "roundsCpuWait" not in document["devices"][0]["bandwidth"]["copy"]
    assert ProfileResult.from_dict(json.loads(json.dumps(document))).to_dict() == document


def with_formats() -> ProfileResult:
    result = synthetic_result()
    formats = (synthetic_format(), synthetic_format("int8-w8a8", bytes_per_weight=1.0))
    device = dataclasses.replace(result.devices[0], weight_formats=formats)
    return dataclasses.replace(result, devices=(device,))


def test_the_weight_formats_rooflines_validate_and_round_trip() -> None:
    document = with_formats().to_dict()
    validate_document(document)
    assert [f["weightFormat"] for f in document["devices"][0]["weightFormats"]] == [
        "awq-int4-g128",
        "int8-w8a8",
    ]
    assert ProfileResult.from_dict(json.loads(json.dumps(document))).to_dict() == document


def test_a_result_without_weight_formats_has_no_key_for_them() -> None:
    assert "weightFormats" not in synthetic_result().to_dict()["devices"][0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("weightFormat", "awq-int3-g128", id="unknown-format"),
        pytest.param("weightFormat", "awq-int4-g100", id="odd-group"),
        pytest.param("ridgePoint", 0, id="zero-ridge"),
        pytest.param("recommendedMinBatch", 0, id="zero-min-batch"),
        pytest.param("recommendedMinBatchSource", "guess", id="unknown-source"),
    ],
)
def test_the_schema_rejects_an_impossible_format_roofline(key: str, value: object) -> None:
    document = with_formats().to_dict()
    document["devices"][0]["weightFormats"][0][key] = value
    with pytest.raises(jsonschema.ValidationError):
        validate_document(document)


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
    pinned = load_schema()["properties"]["schemaVersion"]["enum"]
    assert pinned == list(READABLE_SCHEMA_VERSIONS)
    assert max(pinned) == SCHEMA_VERSION


def test_a_version_1_document_without_model_plans_is_still_read() -> None:
    document = synthetic_result().to_dict()
    document["schemaVersion"] = 1
    for device in document["devices"]:
        del device["models"], device["modelMeasurements"]
    validate_document(document)
    result = ProfileResult.from_dict(document)
    assert all(d.models == () and d.model_measurements == () for d in result.devices)


def test_a_version_3_document_without_engines_is_still_read() -> None:
    """Version 4 added the engine a plan predicts and how its parts were obtained; a result
    written before reads back with no engine and the GEMM path it then had."""
    measured = dataclasses.replace(
        synthetic(),
        linear="onednn-packed",
        attention_roofline=AttentionRoofline(2e10, 4e11),
    )
    plans = plan_models(measured, (1024,), 141 << 30, 9.9e14, PlanOptions(), VLLM_CPU)
    result = synthetic_result()
    device = dataclasses.replace(result.devices[0], models=plans, model_measurements=(measured,))
    document = dataclasses.replace(result, devices=(device,)).to_dict()
    validate_document(document)
    assert document["devices"][0]["models"][0]["engine"]["name"] == VLLM_CPU.name
    document["schemaVersion"] = 3
    plans = [plan for device in document["devices"] for plan in device["models"]]
    measured = [m for device in document["devices"] for m in device["modelMeasurements"]]
    assert plans
    assert measured
    for plan in plans:
        plan.pop("engine", None)
    for m in measured:
        for key in ("linear", "attentionKernel", "attentionMethod", "attentionRoofline"):
            m.pop(key, None)
    validate_document(document)
    result = ProfileResult.from_dict(document)
    assert all(plan.engine is None for d in result.devices for plan in d.models)
    assert all(m.linear == "torch-linear" for d in result.devices for m in d.model_measurements)


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


def test_every_headline_number_carries_its_interval_in_the_document() -> None:
    device = synthetic_result().to_dict()["devices"][0]
    for value, interval in [
        ("bandwidthBytesPerSecond", "bandwidthInterval"),
        ("readBandwidthBytesPerSecond", "readBandwidthInterval"),
        ("copyBandwidthBytesPerSecond", "copyBandwidthInterval"),
        ("peakFlopsPerSecond", "peakInterval"),
        ("ridgePoint", "ridgePointInterval"),
        ("recommendedMinBatch", "recommendedMinBatchInterval"),
    ]:
        assert device[interval]["low"] <= device[value] <= device[interval]["high"]
    assert device["bandwidthKernel"] == "read"
    assert device["peakKernel"] == "mm 8192x8192x8192"
    assert device["rounds"] == 8
    assert device["sweep"][0]["measurement"]["samplesRound"][:4] == [0, 0, 1, 1]


def test_a_document_from_before_intervals_still_loads_with_point_intervals() -> None:
    document = synthetic_result().to_dict()
    device = document["devices"][0]
    for key in [k for k in device if k.endswith(("Interval", "Kernel"))] + [
        "readBandwidthBytesPerSecond",
        "copyBandwidthBytesPerSecond",
        "minBatchCrossing",
        "rounds",
    ]:
        del device[key]
    validate_document(document)
    (loaded,) = ProfileResult.from_dict(document).devices
    assert loaded.interval("ridge_point") == (loaded.ridge_point, loaded.ridge_point)
    assert loaded.interval("recommended_min_batch") == (loaded.recommended_min_batch,) * 2
    assert loaded.source("peak_flops_per_second") == "mm 8192x8192x8192"


def test_the_schema_names_the_backends_a_compact_result_may_carry() -> None:
    device = load_schema()["properties"]["devices"]["items"]["properties"]
    assert tuple(device["backend"]["enum"]) == BACKEND_NAMES


def test_the_compact_form_names_the_one_backend_of_the_profile() -> None:
    result = synthetic_result(devices=2)
    assert result.to_compact().backend == "cuda"
    mixed = dataclasses.replace(
        result, devices=(result.devices[0], dataclasses.replace(result.devices[1], backend="cpu"))
    )
    with pytest.raises(ValueError, match="one backend"):
        mixed.to_compact()
