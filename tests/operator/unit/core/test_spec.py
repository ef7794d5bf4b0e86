from __future__ import annotations

from typing import Any

import pytest

from roofline_operator.core.spec import parse_duration, parse_spec
from roofline_operator.core.spec_fields import SpecError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("30m", 1800.0, id="minutes"),
        pytest.param("168h", 604800.0, id="hours"),
        pytest.param("1h30m", 5400.0, id="compound"),
        pytest.param("1.5h", 5400.0, id="decimal"),
        pytest.param("500ms", 0.5, id="milliseconds"),
    ],
)
def test_durations_parse_like_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "7d", "h", "10", "1h 30m", "-1h", "soon"])
def test_malformed_durations_are_rejected(text: str) -> None:
    with pytest.raises(SpecError):
        parse_duration(text)


def test_an_empty_spec_gets_the_crd_defaults() -> None:
    spec = parse_spec({})
    assert spec.selection.gpu_resource == "nvidia.com/gpu"
    assert spec.selection.gpus_per_node == 1
    assert spec.device == "gpu"
    assert spec.dtype == "bfloat16"
    assert spec.max_parallel == 4
    assert spec.label_nodes is True
    assert spec.reprofile_interval_seconds is None
    assert (spec.timeout_seconds, spec.pending_timeout_seconds) == (600, 300)


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        pytest.param({"maxParallel": 0}, "maxParallel", id="zero-parallel"),
        pytest.param({"maxParallel": "2"}, "maxParallel", id="string-parallel"),
        pytest.param({"dtype": "float64"}, "dtype", id="unknown-dtype"),
        pytest.param({"batches": [0, 1]}, "batches", id="zero-batch"),
        pytest.param({"batches": [2, 2]}, "repeat", id="repeated-batch"),
        pytest.param({"batches": [1.5]}, "batches", id="float-batch"),
        pytest.param({"reprofileInterval": "10s"}, "at least 1m", id="short-interval"),
        pytest.param({"reprofileInterval": "weekly"}, "duration", id="bad-interval"),
        pytest.param({"shape": {"k": 1024}}, "shape", id="half-a-shape"),
        pytest.param({"namespace": "Not_A_Namespace"}, "namespace", id="bad-namespace"),
        pytest.param({"labelNodes": "yes"}, "labelNodes", id="non-bool"),
        pytest.param({"imagePullSecrets": ["regcred"]}, "imagePullSecrets", id="bare-secret"),
        pytest.param({"imagePullSecrets": [{"name": "Reg_Cred"}]}, "Secret", id="bad-secret"),
        pytest.param({"priorityClassName": "High!"}, "priorityClassName", id="bad-priority"),
        pytest.param({"runtimeClassName": "NVIDIA"}, "runtimeClassName", id="bad-runtime"),
        pytest.param({"serviceAccountName": "a b"}, "serviceAccountName", id="bad-account"),
        pytest.param({"device": "tpu"}, "spec.device must be one of gpu, cpu", id="bad-device"),
        pytest.param({"device": "CPU"}, "spec.device", id="device-case"),
        pytest.param({"device": ["cpu"]}, "spec.device", id="device-list"),
    ],
)
def test_invalid_specs_fail_with_a_message_naming_the_field(
    fields: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(SpecError, match=fragment):
        parse_spec(fields)


def test_batches_are_sorted_for_the_profiler() -> None:
    assert parse_spec({"batches": [64, 1, 8]}).batches == (1, 8, 64)


def test_retry_delay_doubles_per_failed_attempt_up_to_an_hour() -> None:
    spec = parse_spec({"retryBackoffSeconds": 30})
    assert [spec.retry_delay(n) for n in (1, 2, 3)] == [30.0, 60.0, 120.0]
    assert spec.retry_delay(20) == 3600.0


def test_only_measurement_fields_change_the_measurement_hash() -> None:
    base = parse_spec({"batches": [1, 2]}).measurement_hash()
    assert parse_spec({"batches": [1, 2], "maxParallel": 9}).measurement_hash() == base
    assert parse_spec({"batches": [1, 2], "timeoutSeconds": 60}).measurement_hash() == base
    assert parse_spec({"batches": [1, 4]}).measurement_hash() != base
    assert parse_spec({"batches": [1, 2], "dtype": "float16"}).measurement_hash() != base
    assert parse_spec({"batches": [1, 2], "device": "cpu"}).measurement_hash() != base
    assert parse_spec({"batches": [1, 2], "device": "gpu"}).measurement_hash() == base


def test_pod_placement_fields_parse_and_do_not_change_the_measurement_hash() -> None:
    placed = parse_spec(
        {
            "imagePullSecrets": [{"name": "regcred"}, {"name": "mirror.creds"}],
            "serviceAccountName": "profiler",
            "priorityClassName": "gpu-profiling",
            "runtimeClassName": "nvidia",
        }
    )
    assert placed.image_pull_secrets == ("regcred", "mirror.creds")
    assert (placed.service_account, placed.priority_class, placed.runtime_class) == (
        "profiler",
        "gpu-profiling",
        "nvidia",
    )
    assert placed.measurement_hash() == parse_spec({}).measurement_hash()
