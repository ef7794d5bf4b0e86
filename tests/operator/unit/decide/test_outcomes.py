from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import device, profile, spec, succeeded_pod
from tests.profiler.headline_builders import with_values

from roofline_operator.core.names import FailureReason
from roofline_operator.decide.outcomes import (
    MAX_MESSAGE_CHARS,
    Failed,
    InFlight,
    Succeeded,
    Unschedulable,
    classify_pod,
)
from roofline_operator.decide.pods import PodFacts, Terminated
from roofline_profiler.wire.compact import encode_compact

SPEC = spec(timeoutSeconds=60, pendingTimeoutSeconds=30)


def pod(**changes: object) -> PodFacts:
    return replace(succeeded_pod("p", "gpu-1", "h"), **changes)  # type: ignore[arg-type]


def test_a_succeeded_pod_yields_its_decoded_profile() -> None:
    outcome = classify_pod(pod(), SPEC, now=2000.0)
    assert isinstance(outcome, Succeeded)
    assert outcome.result.gpus[0].product == "NVIDIA H200"
    assert outcome.result.spec_hash == "h"


@pytest.mark.parametrize(
    "message",
    [
        pytest.param("", id="empty"),
        pytest.param("not json at all", id="garbage"),
        pytest.param('{"v":1,"dt":"bfloat16","k":8192,"n":81', id="truncated"),
        pytest.param('{"v":99}', id="wrong-version"),
    ],
)
def test_a_malformed_result_is_an_invalid_result_failure(message: str) -> None:
    bad = pod(terminated=Terminated(exit_code=0, reason="Completed", message=message))
    outcome = classify_pod(bad, SPEC, now=2000.0)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert "\n" not in outcome.message


def test_an_oom_killed_pod_fails_as_oom_killed() -> None:
    dead = pod(phase="Failed", terminated=Terminated(137, "OOMKilled", None))
    assert classify_pod(dead, SPEC, 2000.0) == Failed(
        FailureReason.OOM_KILLED, "the profiler ran out of memory (OOMKilled)"
    )


def test_a_failed_pod_reports_the_profilers_own_line() -> None:
    dead = pod(phase="Failed", terminated=Terminated(1, "Error", "CUDA error: device lost\n"))
    assert classify_pod(dead, SPEC, 2000.0) == Failed(
        FailureReason.POD_FAILED, "CUDA error: device lost"
    )


def test_a_failed_pod_without_a_message_reports_its_exit_code() -> None:
    dead = pod(phase="Failed", terminated=Terminated(3, "Error", ""))
    assert classify_pod(dead, SPEC, 2000.0) == Failed(FailureReason.POD_FAILED, "exit code 3")


def test_a_pod_past_its_active_deadline_is_a_timeout() -> None:
    dead = pod(phase="Failed", reason="DeadlineExceeded", terminated=None)
    outcome = classify_pod(dead, SPEC, 2000.0)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.TIMEOUT


def test_a_running_pod_is_in_flight_until_its_timeout() -> None:
    running = pod(phase="Running", started_at=1000.0, terminated=None)
    assert classify_pod(running, SPEC, now=1059.0) == InFlight()
    outcome = classify_pod(running, SPEC, now=1061.0)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.TIMEOUT


def test_a_pod_pending_unbound_too_long_is_unschedulable_with_the_schedulers_reason() -> None:
    pending = pod(
        phase="Pending",
        created_at=1000.0,
        bound=False,
        terminated=None,
        scheduler_message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )
    assert classify_pod(pending, SPEC, now=1029.0) == InFlight()
    assert classify_pod(pending, SPEC, now=1031.0) == Unschedulable(
        "pod not scheduled after 30s: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )


def test_a_pod_bound_but_never_started_fails_as_not_started_with_the_waiting_reason() -> None:
    pulling = pod(
        phase="Pending",
        created_at=1000.0,
        bound=True,
        terminated=None,
        waiting_reason="ImagePullBackOff",
    )
    assert classify_pod(pulling, SPEC, now=1029.0) == InFlight()
    assert classify_pod(pulling, SPEC, now=1031.0) == Failed(
        FailureReason.NOT_STARTED, "pod not started after 30s: ImagePullBackOff"
    )


def test_a_long_failure_message_is_shortened_to_one_status_line() -> None:
    message = "\n\n  " + "a" * 5000 + "\nsecond line"
    failed = pod(
        phase="Failed", terminated=Terminated(exit_code=1, reason="Error", message=message)
    )
    outcome = classify_pod(failed, SPEC, now=2000.0)
    assert isinstance(outcome, Failed)
    assert len(outcome.message) == MAX_MESSAGE_CHARS
    assert outcome.message.endswith("...")


def _valid_wire(now: float) -> dict[str, Any]:
    """A valid one-GPU result with one model plan, measured a minute before ``now``."""
    with_plan = replace(device(), models=(plan("llama"),))
    return json.loads(encode_compact(profile(with_plan, created_at=now - 60)))


def _tampered(path: tuple[Any, ...], value: Any, now: float = 2000.0) -> str:
    """The valid result with the field at ``path`` replaced by ``value``, as JSON text (``NaN``
    and ``Infinity`` written as Python's encoder writes them)."""
    wire = _valid_wire(now)
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(wire, separators=(",", ":"))


@pytest.mark.parametrize(
    ("message", "named"),
    [
        pytest.param("[" * 4096, "nests deeper", id="4096-bytes-of-brackets"),
        pytest.param(_tampered(("t",), math.nan), "'t'", id="time-nan"),
        pytest.param(_tampered(("t",), math.inf), "'t'", id="time-inf"),
        pytest.param(_tampered(("t",), -math.inf), "'t'", id="time-minus-inf"),
        pytest.param(_tampered(("t",), 1e20), "'t'", id="time-1e20"),
        pytest.param(_tampered(("t",), -1e12), "'t'", id="time-minus-1e12"),
        pytest.param(_tampered(("t",), 1e9), "'t'", id="time-years-old"),
        pytest.param(_tampered(("t",), 2000.0 + 3600), "'t'", id="time-an-hour-ahead"),
        pytest.param(_tampered(("g", 0, 2), 1e300), "'bandwidth'", id="bandwidth-1e300"),
        pytest.param(_tampered(("g", 0, 3), math.nan), "'peak'", id="peak-nan"),
        pytest.param(_tampered(("g", 0, 4), 1e100), "'ridge point'", id="ridge-1e100"),
        pytest.param(_tampered(("g", 0, 5), 10**63), "'min batch'", id="min-batch-64-digits"),
        pytest.param(_tampered(("g", 0, 5), -3), "'min batch'", id="min-batch-negative"),
        pytest.param(_tampered(("p", 0, 0, 1), 10**400), "'max batch by memory'", id="bound-1e400"),
        pytest.param(_tampered(("p", 0, 0, 3), 0), "'step at min'", id="model-step-zero"),
        pytest.param(_tampered(("m", 0, 0), "a b/c"), "'name'", id="model-name-not-a-label"),
        pytest.param(_tampered(("g", 0, 1), "x" * 65), "'name'", id="device-name-too-long"),
        pytest.param(_tampered(("dt",), "float8"), "'dt'", id="unknown-dtype"),
    ],
)
def test_an_implausible_result_fails_its_node_with_a_message_naming_the_field(
    message: str, named: str
) -> None:
    outcome = classify_pod(pod(terminated=Terminated(0, "Completed", message)), SPEC, now=2000.0)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert named in outcome.message
    assert len(outcome.message) <= MAX_MESSAGE_CHARS


def test_a_result_listing_more_devices_than_the_pod_requested_is_invalid() -> None:
    wire = _valid_wire(2000.0)
    wire["g"] = [[i, *wire["g"][0][1:]] for i in range(16)]
    wire["p"] = wire["p"] * 16
    message = json.dumps(wire, separators=(",", ":"))
    assert len(message) < 4096
    outcome = classify_pod(
        pod(terminated=Terminated(0, "Completed", message)), SPEC, now=2000.0, gpus=1
    )
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert "16 devices, the pod requested 1 GPU(s)" in outcome.message


def test_a_sweep_outside_the_default_batches_is_invalid_when_the_spec_names_none() -> None:
    outcome = classify_pod(
        pod(terminated=Terminated(0, "Completed", _tampered(("b",), [1, 3]))), SPEC, 2000.0
    )
    assert isinstance(outcome, Failed)
    assert "'b'" in outcome.message


def test_a_result_with_batches_the_spec_did_not_ask_for_is_invalid() -> None:
    message = _tampered(("b",), [1, 3])
    asked = spec(batches=[1, 256])
    wire_steps = json.loads(message)
    assert len(wire_steps["b"]) == len(wire_steps["g"][0][6])
    outcome = classify_pod(pod(terminated=Terminated(0, "Completed", message)), asked, 2000.0)
    assert isinstance(outcome, Failed)
    assert "'b'" in outcome.message


def test_a_result_measured_47_hours_before_its_pod_existed_fails_its_node() -> None:
    """A copied old result passed: only the operator's clock bounded its time."""
    message = encode_compact(profile(created_at=1000.0))
    late = pod(created_at=1000.0 + 47 * 3600, terminated=Terminated(0, "Completed", message))
    outcome = classify_pod(late, SPEC, now=1000.0 + 47 * 3600 + 60)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert "before its pod was created" in outcome.message


def test_a_ridge_point_that_is_not_peak_over_bandwidth_fails_its_node() -> None:
    forged = with_values(device(), ridge_point=1.0)
    message = encode_compact(profile(forged, created_at=1001.0))
    outcome = classify_pod(pod(terminated=Terminated(0, "Completed", message)), SPEC, 2000.0)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert "is not peak over bandwidth" in outcome.message


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        pytest.param({"name": "NVIDIA H200\n"}, "'name'", id="device-name"),
        pytest.param({"warnings": ("CpuContention\n",)}, "'warning'", id="warning-code"),
        pytest.param({"models": (plan("llama\n"),)}, "name", id="model-name"),
    ],
)
def test_a_string_with_a_trailing_newline_is_refused(changed: dict[str, Any], field: str) -> None:
    """``^...$`` checked with ``match`` accepted a trailing newline; ``"CpuContention\\n"`` then
    evaded the interference hold-back, which looks for the code itself."""
    message = encode_compact(profile(replace(device(), **changed), created_at=1001.0))
    outcome = classify_pod(pod(terminated=Terminated(0, "Completed", message)), SPEC, 2000.0)
    assert isinstance(outcome, Failed)
    assert outcome.reason is FailureReason.INVALID_RESULT
    assert field in outcome.message
