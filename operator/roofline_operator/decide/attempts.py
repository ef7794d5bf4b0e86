"""A node's profiling attempts, record by record: when the next is due, the fresh budget of a new
cycle, a pod taken over after a restart, a failure retried or given up, an attempt the scheduler
could not place.

Each is a pure function from a node's record (and the spec, its digest and the time) to the next
record; ``round_plan`` applies them to every selected node in a round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from roofline_operator.core.names import NodeState
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.outcomes import Failed, Unschedulable
from roofline_operator.decide.pods import PodFacts
from roofline_operator.decide.records import NodeRecord


def due_at(record: NodeRecord, spec: ProfileSpec, spec_hash: str, now: float) -> float | None:
    """When a node that has no pod should get one (``now`` when it is due already); ``None``:
    not before the spec changes (a failed node, a profiled one, without a re-profile interval)."""
    interval = spec.reprofile_interval_seconds
    if record.cycle_hash != spec_hash:
        return now
    if record.state in (NodeState.RETRYING, NodeState.UNSCHEDULABLE):
        return record.next_attempt_at or now
    if record.state is NodeState.FAILED:
        if interval is None or record.last_attempt_at is None:
            return None
        return record.last_attempt_at + interval
    if record.result is None or record.result.spec_hash != spec_hash:
        return now
    if interval is not None:
        return record.result.profiled_at + interval
    return None


def start_cycle(record: NodeRecord, spec_hash: str) -> NodeRecord:
    """A new spec digest, or a due re-profile, starts a new cycle with a fresh attempt budget."""
    if record.cycle_hash != spec_hash:
        return replace(
            record,
            cycle_hash=spec_hash,
            attempts=0,
            unschedulable=0,
            state=NodeState.QUEUED,
            next_attempt_at=None,
            reason=None,
            message=None,
        )
    if record.state in (NodeState.PROFILED, NodeState.FAILED):
        return replace(
            record, attempts=0, unschedulable=0, state=NodeState.QUEUED, next_attempt_at=None
        )
    return record


def adopt_pod(
    record: NodeRecord, pods: Sequence[PodFacts], spec_hash: str, now: float
) -> NodeRecord:
    """Take over a pod of the current spec that the records do not know (lost status patch)."""
    if record.state is NodeState.PROFILING and any(p.name == record.pod for p in pods):
        return record
    candidates = [p for p in pods if p.spec_hash == spec_hash and p.attempt > record.attempts]
    if not candidates:
        return record
    pod = max(candidates, key=lambda p: p.attempt)
    return replace(
        record,
        state=NodeState.PROFILING,
        pod=pod.name,
        pod_namespace=pod.namespace,
        attempts=pod.attempt,
        cycle_hash=spec_hash,
        last_attempt_at=pod.created_at or now,
        next_attempt_at=None,
    )


def fail_node(record: NodeRecord, failure: Failed, spec: ProfileSpec, now: float) -> NodeRecord:
    """Record a failed attempt: retry after a doubling delay, or stop after ``maxAttempts``
    (attempts that could not be scheduled do not count)."""
    exhausted = record.attempts - record.unschedulable >= spec.max_attempts
    return replace(
        record,
        state=NodeState.FAILED if exhausted else NodeState.RETRYING,
        pod=None,
        pod_namespace=None,
        reason=failure.reason.value,
        message=failure.message,
        next_attempt_at=None if exhausted else now + spec.retry_delay(record.attempts),
    )


def mark_unschedulable(
    record: NodeRecord, outcome: Unschedulable, spec: ProfileSpec, now: float
) -> NodeRecord:
    """Record an attempt the scheduler could not place: try again after a doubling delay
    (capped at an hour), never give up; the node's published result, if any, stays."""
    unschedulable = record.unschedulable + 1
    return replace(
        record,
        state=NodeState.UNSCHEDULABLE,
        unschedulable=unschedulable,
        pod=None,
        pod_namespace=None,
        reason=NodeState.UNSCHEDULABLE.value,
        message=outcome.message,
        next_attempt_at=now + spec.retry_delay(unschedulable),
    )
