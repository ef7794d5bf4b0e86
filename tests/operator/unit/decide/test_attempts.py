from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.operator_builders import device, profile, spec, succeeded_pod

from roofline_operator.core.names import FailureReason, NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.attempts import (
    adopt_pod,
    due_at,
    fail_node,
    mark_unschedulable,
    start_cycle,
)
from roofline_operator.decide.outcomes import Failed, Unschedulable
from roofline_operator.decide.records import NodeRecord

NOW = 10_000.0
SPEC = spec(retryBackoffSeconds=10, maxAttempts=2, reprofileInterval="1h")
HASH = SPEC.measurement_hash()
CRASHED = Failed(FailureReason.POD_GONE, "pod gone")
BUSY = Unschedulable("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


def record(**fields: Any) -> NodeRecord:
    return replace(NodeRecord(name="a", gpus=1, cycle_hash=HASH), **fields)


def test_a_failed_attempt_retries_after_a_doubling_delay_then_gives_up_at_max_attempts() -> None:
    first = fail_node(record(attempts=1), CRASHED, SPEC, NOW)
    assert (first.state, first.next_attempt_at) == (NodeState.RETRYING, NOW + 10)
    second = fail_node(record(attempts=2), CRASHED, SPEC, NOW)
    assert (second.state, second.next_attempt_at) == (NodeState.FAILED, None)
    assert (second.reason, second.message) == (FailureReason.POD_GONE.value, "pod gone")


def test_attempts_the_scheduler_could_not_place_never_count_toward_giving_up() -> None:
    busy = mark_unschedulable(record(attempts=1), BUSY, SPEC, NOW)
    assert busy.state is NodeState.UNSCHEDULABLE
    assert (busy.unschedulable, busy.next_attempt_at) == (1, NOW + 10)
    failed = fail_node(replace(busy, attempts=2), CRASHED, SPEC, NOW)
    assert failed.state is NodeState.RETRYING


@pytest.mark.parametrize(
    ("fields", "due"),
    [
        pytest.param({"cycle_hash": "old"}, NOW, id="new-spec"),
        pytest.param(
            {"state": NodeState.RETRYING, "next_attempt_at": NOW + 5}, NOW + 5, id="retry"
        ),
        pytest.param({"state": NodeState.FAILED, "last_attempt_at": NOW}, NOW + 3600, id="failed"),
        pytest.param({"state": NodeState.FAILED}, None, id="failed-never-launched"),
        pytest.param({"state": NodeState.PROFILED}, NOW, id="nothing-published"),
    ],
)
def test_a_node_is_due_at_its_retry_its_reprofile_or_at_once_for_a_new_spec(
    fields: dict[str, Any], due: float | None
) -> None:
    assert due_at(record(**fields), SPEC, HASH, NOW) == due


def test_a_profiled_node_is_due_an_interval_after_its_profile_and_never_without_one() -> None:
    result = from_compact(profile(device(), created_at=NOW - 60), HASH)
    profiled = record(state=NodeState.PROFILED, result=result)
    assert due_at(profiled, SPEC, HASH, NOW) == NOW - 60 + 3600
    once = spec(retryBackoffSeconds=10, maxAttempts=2)
    assert due_at(profiled, once, HASH, NOW) is None


def test_a_new_cycle_gets_a_fresh_attempt_budget_and_forgets_the_old_failure() -> None:
    failed = record(state=NodeState.FAILED, attempts=2, unschedulable=1, reason="PodGone")
    assert start_cycle(failed, HASH) == replace(
        failed, state=NodeState.QUEUED, attempts=0, unschedulable=0
    )
    fresh = start_cycle(failed, "new")
    assert (fresh.cycle_hash, fresh.attempts, fresh.reason) == ("new", 0, None)
    retrying = record(state=NodeState.RETRYING, attempts=1)
    assert start_cycle(retrying, HASH) is retrying


def test_the_latest_pod_of_the_current_spec_is_adopted_and_others_are_not() -> None:
    pods = [
        succeeded_pod("p1", "a", HASH, attempt=1),
        succeeded_pod("p2", "a", HASH, attempt=2),
        succeeded_pod("old", "a", "other", attempt=3),
    ]
    adopted = adopt_pod(record(), pods, HASH, NOW)
    assert (adopted.state, adopted.pod, adopted.attempts) == (NodeState.PROFILING, "p2", 2)
    known = record(state=NodeState.PROFILING, pod="p1", attempts=1)
    assert adopt_pod(known, pods, HASH, NOW) is known
