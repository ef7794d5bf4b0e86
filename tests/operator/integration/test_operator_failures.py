"""Every way a profile can fail becomes a per-node failure with a reason, never a crash.

Faults are injected per node by the fake kubelet and scheduler, and per request by the emulated
API server. A healthy node in the same profile must be profiled regardless: one bad node never
blocks the others.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.harness import Cluster, FaultMode, OperatorProcess, wait_for
from tests.operator.harness.profiles import (
    GROUP,
    PLURAL,
    condition,
    example_profile,
    node_entries,
    our_labels,
    profile_status,
    profiled,
    state_is,
    wait_for_nodes,
)

pytestmark = pytest.mark.usefixtures("shared_operator")


def profile_with_bad_node(
    cluster: Cluster, suite: str, mode: FaultMode, **spec: Any
) -> tuple[str, str]:
    good, bad = f"{suite}-good", f"{suite}-bad"
    cluster.add_gpu_node(good, labels={"suite": suite})
    cluster.add_gpu_node(bad, labels={"suite": suite}, mode=mode)
    cluster.create(PLURAL, example_profile(suite, {"suite": suite}, **spec), group=GROUP)
    return good, bad


@pytest.mark.parametrize(
    ("mode", "reason", "spec"),
    [
        pytest.param(FaultMode.EXIT_NONZERO, "PodFailed", {}, id="pod-fails"),
        pytest.param(FaultMode.OOM_KILLED, "OOMKilled", {}, id="oom-killed"),
        pytest.param(FaultMode.GARBAGE_MESSAGE, "InvalidResult", {}, id="garbage-message"),
        pytest.param(FaultMode.TRUNCATED_MESSAGE, "InvalidResult", {}, id="truncated-message"),
        pytest.param(
            FaultMode.HANG, "Timeout", {"timeoutSeconds": 5}, id="hangs", marks=pytest.mark.slow
        ),
    ],
)
def test_a_failing_node_fails_with_its_reason_without_blocking_the_others(
    shared_cluster: Cluster,
    shared_operator: OperatorProcess,
    mode: FaultMode,
    reason: str,
    spec: dict[str, Any],
) -> None:
    suite = f"fail-{mode.value}"
    good, bad = profile_with_bad_node(shared_cluster, suite, mode, maxAttempts=1, **spec)
    entries = wait_for_nodes(
        shared_cluster, suite, state_is("Failed"), [bad], timeout=45, what=f"{bad} to fail"
    )
    assert entries[bad]["reason"] == reason
    assert entries[bad]["message"]
    assert our_labels(shared_cluster, bad) == {}
    wait_for_nodes(shared_cluster, suite, profiled, [good])
    status = profile_status(shared_cluster, suite)
    assert (status["summary"]["profiled"], status["summary"]["failed"]) == (1, 1)
    assert condition(status, "Degraded")["status"] == "True"
    assert condition(status, "Ready")["status"] == "False"
    assert shared_operator.sample("roofline_node_profile_failed", profile=suite, node=bad) == 1
    failures = shared_operator.sample(
        "roofline_profile_failures_total", profile=suite, reason=reason
    )
    assert failures is not None
    assert failures >= 1
    line = f"node {bad} failed ({reason})"
    wait_for(lambda: line in shared_operator.log_text(), timeout=10, what=f"a log line {line!r}")
    logged = [ln for ln in shared_operator.log_text().splitlines() if line in ln]
    assert len(logged) == 1, "one failure is one log line"
    assert "WARNING" in logged[0]


def test_a_node_without_a_free_gpu_is_unschedulable_not_failed_and_is_tried_again(
    shared_cluster: Cluster, shared_operator: OperatorProcess
) -> None:
    suite = "busy"
    good, busy = profile_with_bad_node(
        shared_cluster,
        suite,
        FaultMode.NEVER_SCHEDULE,
        maxAttempts=1,
        pendingTimeoutSeconds=1,
        retryBackoffSeconds=1,
    )
    entries = wait_for_nodes(
        shared_cluster, suite, state_is("Unschedulable"), [busy], timeout=45, what="busy"
    )
    assert entries[busy]["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in entries[busy]["message"]
    wait_for_nodes(shared_cluster, suite, profiled, [good])
    status = profile_status(shared_cluster, suite)
    assert status["summary"]["failed"] == 0
    assert condition(status, "Degraded")["status"] == "False"
    assert condition(status, "Ready")["reason"] == "NodesUnschedulable"
    assert shared_operator.sample("roofline_node_profile_failed", profile=suite, node=busy) == 0
    unschedulable = shared_operator.sample(
        "roofline_node_profile_unschedulable", profile=suite, node=busy
    )
    assert unschedulable == 1
    # maxAttempts=1 would have stopped a failing node; a busy one keeps being tried.
    wait_for(
        lambda: (node_entries(shared_cluster, suite)[busy].get("unschedulableAttempts") or 0) >= 2,
        timeout=30,
        what="a second attempt on the busy node",
    )
    shared_cluster.set_fault(busy, FaultMode.SUCCEED_INSTANTLY)
    wait_for_nodes(shared_cluster, suite, profiled, [busy], timeout=45)


def test_a_failed_attempt_is_retried_with_backoff_up_to_max_attempts(
    shared_cluster: Cluster,
) -> None:
    _, bad = profile_with_bad_node(
        shared_cluster, "retry", FaultMode.EXIT_NONZERO, maxAttempts=2, retryBackoffSeconds=1
    )
    entries = wait_for_nodes(shared_cluster, "retry", state_is("Failed"), [bad], timeout=45)
    assert entries[bad]["attempts"] == 2
    assert "device failed" in entries[bad]["message"]
    runs = shared_cluster.runs([bad])
    assert len(runs) == 2
    assert runs[1].started - (runs[0].ended or 0) >= 1.0


def test_a_node_that_recovers_is_profiled_on_its_next_attempt(shared_cluster: Cluster) -> None:
    _, bad = profile_with_bad_node(
        shared_cluster, "recover", FaultMode.EXIT_NONZERO, maxAttempts=3, retryBackoffSeconds=2
    )
    wait_for_nodes(shared_cluster, "recover", state_is("Retrying"), [bad], timeout=30)
    shared_cluster.set_fault(bad, FaultMode.SUCCEED_INSTANTLY)
    entries = wait_for_nodes(shared_cluster, "recover", profiled, [bad], timeout=30)
    assert entries[bad]["attempts"] == 2
    assert our_labels(shared_cluster, bad)["roofline.dev/profile"] == "recover"


def test_an_invalid_spec_that_passed_the_schema_sets_a_condition(
    shared_cluster: Cluster, shared_operator: OperatorProcess
) -> None:
    # The CRD's CEL rule refuses intervals under 1m; clusters that do not evaluate CEL (before
    # 1.25, or with validation rules disabled) store it anyway, and so does the emulator.
    shared_cluster.add_gpu_node("invalid-0", labels={"suite": "invalid"})
    shared_cluster.create(
        PLURAL,
        example_profile("invalid", {"suite": "invalid"}, reprofileInterval="30s"),
        group=GROUP,
    )
    ready = wait_for(
        lambda: condition(profile_status(shared_cluster, "invalid"), "Ready") or None,
        timeout=20,
        what="a Ready condition",
    )
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "reprofileInterval" in ready["message"]
    assert shared_cluster.runs(["invalid-0"]) == []
    assert shared_operator.running


def test_api_conflicts_and_server_errors_are_retried(
    shared_cluster: Cluster, shared_operator: OperatorProcess
) -> None:
    faults = [
        shared_cluster.inject("create", "pods", 503, count=2),
        shared_cluster.inject("patch", "nodes", 409, count=1),
        shared_cluster.inject("patch", "rooflineprofiles/status", 500, count=2),
    ]
    nodes = ["flaky-0", "flaky-1"]
    for node in nodes:
        shared_cluster.add_gpu_node(node, labels={"suite": "flaky"})
    shared_cluster.create(PLURAL, example_profile("flaky", {"suite": "flaky"}), group=GROUP)
    wait_for_nodes(shared_cluster, "flaky", profiled, nodes, timeout=60)
    wait_for(
        lambda: all(our_labels(shared_cluster, n) for n in nodes),
        timeout=30,
        what="labels on every node despite the conflict",
    )
    assert [shared_cluster.remaining_faults(f) for f in faults] == [0, 0, 0]
    assert shared_operator.running
    log = shared_operator.log_text()
    for retried in (
        "Retrying POST /api/v1/namespaces/roofline-system/pods after HTTP 503",
        "Retrying PATCH /api/v1/nodes/flaky-",
        "Retrying PATCH /apis/roofline.dev/v1alpha1/rooflineprofiles/flaky/status after HTTP 500",
    ):
        assert retried in log, f"{retried!r} is not in the operator's log"
    assert set(node_entries(shared_cluster, "flaky")) == set(nodes)


def test_the_operator_resumes_after_its_watches_are_cut_and_their_history_is_gone(
    shared_cluster: Cluster, shared_operator: OperatorProcess
) -> None:
    shared_cluster.add_gpu_node("cut-0", labels={"suite": "cut"})
    shared_cluster.create(PLURAL, example_profile("cut", {"suite": "cut"}), group=GROUP)
    wait_for_nodes(shared_cluster, "cut", profiled, ["cut-0"])
    before = shared_cluster.request_counts()
    assert shared_cluster.drop_watches(compact=True) >= 3

    def relisted() -> bool:
        # A resumed watch gets 410 Gone (history compacted), so the client must list again.
        now = shared_cluster.request_counts()
        return all(now[(verb, "nodes")] > before[(verb, "nodes")] for verb in ("watch", "list"))

    wait_for(relisted, timeout=30, what="the operator to list and watch nodes again")
    shared_cluster.add_gpu_node("cut-1", labels={"suite": "cut"})
    wait_for_nodes(shared_cluster, "cut", profiled, ["cut-0", "cut-1"], timeout=45)
    assert shared_operator.running
