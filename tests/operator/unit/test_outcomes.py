from __future__ import annotations

from dataclasses import replace

import pytest
from tests.operator.unit.operator_builders import spec, succeeded_pod

from roofline_operator.names import FailureReason
from roofline_operator.outcomes import (
    MAX_MESSAGE_CHARS,
    Failed,
    InFlight,
    Succeeded,
    Unschedulable,
    classify_pod,
)
from roofline_operator.pods import PodFacts, Terminated

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
