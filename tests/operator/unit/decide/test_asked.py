"""A result must answer what its pod was asked: the backend it was given, its dtype, its shape."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.operator.unit.operator_builders import ASKED, device, profile, spec, succeeded_pod

from roofline_operator.core.names import FailureReason
from roofline_operator.decide.asked import ProfilerAsk, asked_of, refusal
from roofline_operator.decide.outcomes import Failed, Succeeded, classify_pod
from roofline_operator.decide.pods import ProfileRef, build_profiler_pod, pod_facts
from roofline_profiler.wire.compact import CompactProfile, encode_compact

CPU_NAME = "Intel(R) Xeon(R) Processor"


def measured_on(backend: str | None, **changes: object) -> CompactProfile:
    name = CPU_NAME if backend == "cpu" else "NVIDIA H200"
    return replace(profile(device(name=name)), backend=backend, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "asked"),
    [
        pytest.param(
            ["roofline", "profile", "--device", "cuda", "--dtype", "bfloat16"],
            ProfilerAsk("cuda", "bfloat16", (4096, 14336)),
            id="default-shape",
        ),
        pytest.param(
            ["roofline", "profile", "--device=cpu", "--dtype=float32", "--shape", "512x512"],
            ProfilerAsk("cpu", "float32", (512, 512)),
            id="equals-form",
        ),
        pytest.param(
            ["roofline", "profile", "--device", "cuda:1", "--dtype", "float16"],
            ProfilerAsk("cuda", "float16", (4096, 14336)),
            id="indexed-device",
        ),
        pytest.param(
            ["roofline", "profile", "--device", "all", "--dtype", "bfloat16"],
            ProfilerAsk("all", "bfloat16", (4096, 14336)),
            id="older-operator",
        ),
        pytest.param(["roofline", "profile", "--dtype", "bfloat16"], None, id="no-device"),
        pytest.param(["roofline", "profile", "--device", "cuda"], None, id="no-dtype"),
        pytest.param(
            ["roofline", "profile", "--device", "cuda", "--dtype", "bfloat16", "--shape", "4kx1"],
            None,
            id="bad-shape",
        ),
    ],
)
def test_what_a_pod_asks_is_read_from_its_command(
    argv: list[str], asked: ProfilerAsk | None
) -> None:
    assert asked_of(argv) == asked


@pytest.mark.parametrize(
    ("backend", "device"),
    [
        pytest.param("cuda", "cuda", id="nvidia"),
        pytest.param("rocm", "cuda", id="amd"),
        pytest.param("cpu", "cpu", id="cpu-profile"),
        pytest.param(None, "cuda", id="older-profiler-strict-gpu"),
        pytest.param(None, "cpu", id="older-profiler-strict-cpu"),
        pytest.param("cuda", "all", id="older-operator-gpu"),
    ],
)
def test_a_result_on_the_backend_the_pod_was_given_is_accepted(
    backend: str | None, device: str
) -> None:
    asked = replace(ASKED, device=device)
    assert refusal(measured_on(backend), asked) is None


def test_a_gpu_pods_cpu_result_is_refused_naming_the_likely_causes() -> None:
    refused = refusal(measured_on("cpu"), ASKED)
    assert refused is not None
    reason, message = refused
    assert reason is FailureReason.WRONG_DEVICE
    assert CPU_NAME in message
    for cause in ("runtime class", "device plugin", "driver"):
        assert cause in message


@pytest.mark.parametrize(
    ("backend", "device", "words"),
    [
        pytest.param("cpu", "all", "instead of the GPU", id="older-operator-cpu"),
        pytest.param("mps", "cuda", "instead of the GPU", id="apple-gpu"),
        pytest.param("cuda", "cpu", "asked for the CPU", id="cpu-profile-found-a-gpu"),
        pytest.param(None, "all", "does not say what it measured", id="older-both"),
        pytest.param("cuda", "tpu", "instead of the GPU", id="unknown-device"),
    ],
)
def test_a_result_on_another_backend_is_refused(
    backend: str | None, device: str, words: str
) -> None:
    refused = refusal(measured_on(backend), replace(ASKED, device=device))
    assert refused is not None
    assert refused[0] is FailureReason.WRONG_DEVICE
    assert words in refused[1]


def test_a_result_of_another_dtype_is_refused_naming_the_field() -> None:
    refused = refusal(measured_on("cuda", dtype="float32"), ASKED)
    assert refused == (
        FailureReason.INVALID_RESULT,
        "result: field 'dt' is float32, the pod asked for bfloat16",
    )


def test_a_result_of_another_shape_is_refused_naming_the_fields() -> None:
    refused = refusal(measured_on("cuda", shape_k=1, shape_n=1), ASKED)
    assert refused == (
        FailureReason.INVALID_RESULT,
        "result: fields 'k' and 'n' are 1x1, the pod asked for 4096x14336",
    )


def test_a_pod_whose_command_says_nothing_has_no_valid_result() -> None:
    refused = refusal(measured_on("cuda"), None)
    assert refused is not None
    assert refused[0] is FailureReason.INVALID_RESULT


def finished_pod_of(the_spec_fields: dict[str, object], message: str) -> Succeeded | Failed:
    """A pod built for the spec, finished with ``message``, as the operator judges it."""
    the_spec = spec(**the_spec_fields)
    body = build_profiler_pod(
        profile=ProfileRef("fleet", "u"),
        spec=the_spec,
        node="gpu-1",
        gpus=1,
        attempt=1,
        spec_hash="h",
        namespace="roofline-system",
        image="roofline:test",
    )
    facts = pod_facts(body)
    done = replace(succeeded_pod(facts.name, "gpu-1", "h", message=message), asked=facts.asked)
    outcome = classify_pod(done, the_spec, now=1_700_000_060.0)
    assert isinstance(outcome, Succeeded | Failed)
    return outcome


def test_a_gpu_profiles_pod_that_measured_the_cpu_fails_its_node() -> None:
    outcome = finished_pod_of({}, encode_compact(measured_on("cpu")))
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.WRONG_DEVICE
    assert "runtime class" in outcome.message


def test_a_float32_1x1_result_under_a_bfloat16_profile_is_refused() -> None:
    """The #27 case: a result of another dtype and shape was published under the profile."""
    outcome = finished_pod_of({}, encode_compact(measured_on("cuda", dtype="float32")))
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert "'dt'" in outcome.message
    one_by_one = encode_compact(measured_on("cuda", shape_k=1, shape_n=1))
    outcome = finished_pod_of({}, one_by_one)
    assert isinstance(outcome, Failed)
    assert "'k' and 'n'" in outcome.message


def test_a_cpu_profiles_pod_that_measured_the_cpu_succeeds() -> None:
    cpu = measured_on("cpu", dtype="float32")
    outcome = finished_pod_of({"device": "cpu", "dtype": "float32"}, encode_compact(cpu))
    assert isinstance(outcome, Succeeded)
    assert outcome.result.gpus[0].product == CPU_NAME
