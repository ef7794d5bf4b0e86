from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.operator_builders import device, node, profile, spec, succeeded_pod
from tests.operator.unit.round_builders import DEFAULT_SPEC, NOW, created_pods, finished, world

from roofline_operator.core.names import LABEL_PROFILE, FailureReason, NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.decide.labels import LabelClaim, label_safe
from roofline_operator.decide.pods import PodFacts, ProfileRef, Terminated
from roofline_operator.decide.records import NodeRecord
from roofline_operator.decide.round_plan import (
    POD_APPEARANCE_GRACE_SECONDS,
    POD_CHECK_WAKE_SECONDS,
    POD_CHECKS_PER_ROUND,
    PodCheck,
    PodLookups,
    RoundPlan,
    plan_round,
)
from roofline_profiler.wire.compact import encode_compact


def test_new_nodes_get_one_pod_each_but_never_more_than_max_parallel() -> None:
    plan = plan_round(world([node("a"), node("b"), node("c")]))
    assert len(plan.creates) == 2
    assert {p["metadata"]["labels"]["roofline.dev/node"] for p in plan.creates} == {"a", "b"}
    states = {n: r.state for n, r in plan.records.items()}
    assert states == {"a": NodeState.PROFILING, "b": NodeState.PROFILING, "c": NodeState.QUEUED}


def test_a_lagging_watch_never_causes_a_second_pod() -> None:
    first = plan_round(world([node("a")]))
    again = plan_round(world([node("a")], records=first.records, now=NOW + 5))
    assert again.creates == []
    assert again.deletes == []
    assert again.wake_in is not None
    assert again.wake_in <= POD_APPEARANCE_GRACE_SECONDS


def test_a_pod_unseen_past_the_grace_is_looked_up_not_declared_gone() -> None:
    first = plan_round(world([node("a")]))
    later = plan_round(
        world([node("a")], records=first.records, now=NOW + POD_APPEARANCE_GRACE_SECONDS + 1)
    )
    assert later.failures == []
    assert later.pod_checks == [PodCheck("roofline-system", str(first.records["a"].pod), NOW)]
    assert later.records["a"].state is NodeState.PROFILING
    assert later.wake_in == POD_CHECK_WAKE_SECONDS


def test_a_pod_the_lookup_found_gets_another_grace_period() -> None:
    first = plan_round(world([node("a")]))
    pod = str(first.records["a"].pod)
    found_at = NOW + POD_APPEARANCE_GRACE_SECONDS + 1
    inp = world([node("a")], records=first.records, now=found_at + 10)
    plan = plan_round(replace(inp, pod_lookups=PodLookups(found={pod: found_at})))
    assert plan.pod_checks == []
    assert plan.failures == []
    assert plan.wake_in == pytest.approx(POD_APPEARANCE_GRACE_SECONDS - 10)


def test_a_pod_the_lookup_did_not_find_counts_as_gone_and_is_retried() -> None:
    first = plan_round(world([node("a")]))
    pod = str(first.records["a"].pod)
    inp = world([node("a")], records=first.records, now=NOW + POD_APPEARANCE_GRACE_SECONDS + 2)
    later = plan_round(replace(inp, pod_lookups=PodLookups(missing=frozenset({pod}))))
    assert [f.reason for _, f in later.failures] == [FailureReason.POD_GONE]
    assert later.records["a"].state is NodeState.RETRYING
    assert later.pod_checks == []


def test_unseen_pods_are_looked_up_a_few_at_a_time_oldest_first() -> None:
    names = [f"n{i:02d}" for i in range(POD_CHECKS_PER_ROUND + 5)]
    wide = spec(maxParallel=len(names))
    first = plan_round(world([node(n) for n in names], the_spec=wide))
    records = {
        n: replace(r, last_attempt_at=NOW - i) for i, (n, r) in enumerate(first.records.items())
    }
    later = plan_round(
        world(
            [node(n) for n in names],
            the_spec=wide,
            records=records,
            now=NOW + POD_APPEARANCE_GRACE_SECONDS + 1,
        )
    )
    assert len(later.pod_checks) == POD_CHECKS_PER_ROUND
    oldest = sorted(records.values(), key=lambda r: r.last_attempt_at or 0)
    assert [c.name for c in later.pod_checks] == [r.pod for r in oldest[:POD_CHECKS_PER_ROUND]]


def test_a_found_pod_proves_the_watch_lags_for_every_pod_launched_no_earlier() -> None:
    names = ["early", "same", "late"]
    wide = spec(maxParallel=3)
    first = plan_round(world([node(n) for n in names], the_spec=wide))
    launched = {"early": NOW - 5, "same": NOW, "late": NOW + 5}
    records = {n: replace(r, last_attempt_at=launched[n]) for n, r in first.records.items()}
    found_at = NOW + POD_APPEARANCE_GRACE_SECONDS + 6
    inp = world([node(n) for n in names], the_spec=wide, records=records, now=found_at + 1)
    lookups = PodLookups(lagging_since=(NOW, found_at))
    plan = plan_round(replace(inp, pod_lookups=lookups))
    assert [c.name for c in plan.pod_checks] == [records["early"].pod]
    assert plan.failures == []


def test_a_result_is_recorded_labelled_and_its_pod_deleted() -> None:
    every_gpu = spec(maxParallel=2, retryBackoffSeconds=10, maxAttempts=2, gpusPerNode=0)
    first = plan_round(world([node("a", gpus=2)], the_spec=every_gpu))
    (pod,) = created_pods(first)
    devices = (device(0, min_batch=64), device(1, min_batch=512, ridge=210.0))
    done = finished(pod, message=encode_compact(profile(*devices, created_at=NOW)))
    plan = plan_round(
        world([node("a", gpus=2)], the_spec=every_gpu, pods=[done], records=first.records)
    )
    record = plan.records["a"]
    assert record.state is NodeState.PROFILED
    assert record.result is not None
    assert record.result.worst_gpu().index == 1
    assert plan.deletes == [], "a finished pod is deleted by collection, not by name"
    assert plan.finished == [done]
    assert plan.profiled == ["a"]
    assert plan.label_patches["a"]["roofline.dev/min-batch"] == "512"
    assert plan.label_patches["a"]["roofline.dev/ridge-point"] == "210"
    assert plan.label_patches["a"][LABEL_PROFILE] == "fleet"


def test_a_second_round_on_the_same_world_plans_nothing() -> None:
    first = plan_round(world([node("a")]))
    (pod,) = created_pods(first)
    second = plan_round(world([node("a")], pods=[finished(pod)], records=first.records))
    labelled = node("a", labels={k: v for k, v in second.label_patches["a"].items() if v})
    third = plan_round(
        world(
            [labelled], records=second.records, deleted=frozenset({pod.name}), pods=[finished(pod)]
        )
    )
    assert (third.creates, third.deletes, third.label_patches, third.failures) == ([], [], {}, [])
    assert third.finished == []
    assert third.records == second.records


def test_failures_back_off_then_retry_with_a_new_pod_then_give_up() -> None:
    first = plan_round(world([node("a")]))
    (pod,) = created_pods(first)
    oom = replace(pod, phase="Failed", terminated=Terminated(137, "OOMKilled", None))
    failed = plan_round(world([node("a")], pods=[oom], records=first.records))
    record = failed.records["a"]
    assert (record.state, record.reason, record.attempts) == (NodeState.RETRYING, "OOMKilled", 1)
    assert failed.creates == []
    assert failed.wake_in == 10.0

    too_soon = plan_round(world([node("a")], records=failed.records, now=NOW + 5))
    assert too_soon.creates == []
    retry = plan_round(world([node("a")], records=failed.records, now=NOW + 11))
    (second_pod,) = created_pods(retry, at=NOW + 11)
    assert second_pod.attempt == 2
    assert second_pod.name != pod.name

    broken = finished(second_pod, message="garbage")
    final = plan_round(world([node("a")], pods=[broken], records=retry.records, now=NOW + 20))
    assert final.records["a"].state is NodeState.FAILED
    assert final.records["a"].reason == "InvalidResult"
    assert plan_round(world([node("a")], records=final.records, now=NOW + 9999)).creates == []


def test_one_failing_node_does_not_hold_back_the_others() -> None:
    first = plan_round(world([node("a"), node("b"), node("c")]))
    pod_a, pod_b = created_pods(first)
    failed_a = replace(pod_a, phase="Failed", terminated=Terminated(1, "Error", "boom"))
    plan = plan_round(
        world([node("a"), node("b"), node("c")], pods=[failed_a, pod_b], records=first.records)
    )
    assert [p["metadata"]["labels"]["roofline.dev/node"] for p in plan.creates] == ["c"]


def test_a_node_that_stops_matching_leaves_status_loses_labels_and_its_pod() -> None:
    first = plan_round(world([node("a")]))
    (pod,) = created_pods(first)
    moved = node(
        "a", labels={"pool": "a100", LABEL_PROFILE: "fleet", "roofline.dev/min-batch": "64"}
    )
    plan = plan_round(world([moved], pods=[pod], records=first.records))
    assert plan.records == {}
    assert plan.deletes == [("roofline-system", pod.name)]
    assert plan.label_patches["a"] == {LABEL_PROFILE: None, "roofline.dev/min-batch": None}
    assert plan.failures == []


def test_a_node_that_disappears_mid_profile_is_a_node_gone_failure() -> None:
    first = plan_round(world([node("a")]))
    (pod,) = created_pods(first)
    plan = plan_round(world([], pods=[pod], records=first.records))
    assert [f.reason for _, f in plan.failures] == [FailureReason.NODE_GONE]
    assert plan.records == {}
    assert plan.deletes == [("roofline-system", pod.name)]


def test_a_spec_change_reprofiles_but_keeps_the_old_numbers_meanwhile() -> None:
    old = spec(batches=[1, 2])
    new = spec(batches=[1, 4])
    record = NodeRecord(
        name="a",
        gpus=1,
        state=NodeState.PROFILED,
        attempts=1,
        cycle_hash=old.measurement_hash(),
        result=from_compact(profile(), old.measurement_hash()),
    )
    plan = plan_round(world([node("a")], the_spec=new, records={"a": record}))
    assert len(plan.creates) == 1
    assert plan.records["a"].attempts == 1
    assert plan.records["a"].result == record.result


def test_the_reprofile_interval_requeues_a_profiled_node() -> None:
    every_hour = spec(reprofileInterval="1h")
    result = from_compact(profile(created_at=NOW - 1800), every_hour.measurement_hash())
    record = NodeRecord(
        name="a",
        gpus=1,
        state=NodeState.PROFILED,
        attempts=1,
        cycle_hash=every_hour.measurement_hash(),
        result=result,
    )
    fresh = plan_round(world([node("a")], the_spec=every_hour, records={"a": record}))
    assert fresh.creates == []
    assert fresh.wake_in == 1800.0
    due = plan_round(world([node("a")], the_spec=every_hour, records={"a": record}, now=NOW + 1801))
    assert len(due.creates) == 1


def test_after_a_restart_existing_pods_are_adopted_not_duplicated() -> None:
    first = plan_round(world([node("a")]))
    (pod,) = created_pods(first)
    running = replace(pod, phase="Running", started_at=NOW)
    restarted = plan_round(world([node("a")], pods=[running], records={}))
    assert restarted.creates == []
    assert restarted.records["a"].state is NodeState.PROFILING
    assert restarted.records["a"].pod == pod.name


def test_pods_being_deleted_still_count_against_max_parallel() -> None:
    leftovers = [replace(succeeded_pod(f"old-{i}", f"x{i}", "h"), deleting=True) for i in range(2)]
    plan = plan_round(world([node("a")], pods=leftovers))
    assert plan.creates == []


def test_an_older_profile_owns_shared_labels_and_the_younger_reports_it() -> None:
    digest = DEFAULT_SPEC.measurement_hash()
    record = NodeRecord(
        name="a",
        gpus=1,
        state=NodeState.PROFILED,
        cycle_hash=digest,
        result=from_compact(profile(), digest),
    )
    older = LabelClaim("elder", 100.0, DEFAULT_SPEC.selection)
    plan = plan_round(world([node("a")], records={"a": record}, claims=[older]))
    assert plan.label_patches == {}
    assert plan.conflicts == {"a": "elder"}
    younger = LabelClaim("junior", 900.0, DEFAULT_SPEC.selection)
    plan = plan_round(world([node("a")], records={"a": record}, claims=[younger]))
    assert "a" in plan.label_patches
    assert plan.conflicts == {}


def test_a_running_pod_past_its_timeout_is_deleted_by_name_not_by_collection() -> None:
    short = spec(timeoutSeconds=60)
    first = plan_round(world([node("a")], the_spec=short))
    (pod,) = created_pods(first)
    running = replace(pod, phase="Running", started_at=NOW, bound=True)
    plan = plan_round(
        world([node("a")], the_spec=short, pods=[running], records=first.records, now=NOW + 61)
    )
    assert [f.reason for _, f in plan.failures] == [FailureReason.TIMEOUT]
    assert plan.deletes == [("roofline-system", pod.name)]
    assert plan.finished == []


def test_a_profile_with_a_long_name_recognises_its_label_safe_owner_label() -> None:
    long_name = "decode-" + "h200-" * 20 + "fleet"
    quiet = spec(labelNodes=False)
    labelled = node(
        "a", labels={LABEL_PROFILE: label_safe(long_name), "roofline.dev/min-batch": "8"}
    )
    inp = replace(world([labelled], the_spec=quiet), profile=ProfileRef(long_name, "u"))
    assert plan_round(inp).label_patches == {
        "a": {LABEL_PROFILE: None, "roofline.dev/min-batch": None}
    }


def test_turning_labels_off_removes_our_labels() -> None:
    quiet = spec(labelNodes=False)
    record = NodeRecord(
        name="a",
        gpus=1,
        state=NodeState.PROFILED,
        cycle_hash=quiet.measurement_hash(),
        result=from_compact(profile(), quiet.measurement_hash()),
    )
    labelled = node("a", labels={LABEL_PROFILE: "fleet", "roofline.dev/ridge-point": "180"})
    plan = plan_round(world([labelled], the_spec=quiet, records={"a": record}))
    assert plan.label_patches == {"a": {LABEL_PROFILE: None, "roofline.dev/ridge-point": None}}


def test_labels_of_another_profile_are_never_removed() -> None:
    theirs = node("a", labels={"pool": "a100", LABEL_PROFILE: "other"})
    assert plan_round(world([theirs])).label_patches == {}


def test_a_pending_pod_wakes_the_round_at_its_pending_deadline() -> None:
    slow = spec(pendingTimeoutSeconds=30)
    first = plan_round(world([node("a")], the_spec=slow))
    (pod,) = created_pods(first)
    plan = plan_round(
        world([node("a")], the_spec=slow, pods=[pod], records=first.records, now=NOW + 10)
    )
    assert plan.wake_in is not None
    assert 20.0 <= plan.wake_in <= 20.1
    late = plan_round(
        world([node("a")], the_spec=slow, pods=[pod], records=first.records, now=NOW + 31)
    )
    assert late.failures == []
    assert [node for node, _ in late.unschedulable] == ["a"]
    assert late.deletes == [("roofline-system", pod.name)]


def profiled_world() -> tuple[RoundPlan, NodeFacts]:
    """Node ``a`` profiled and labelled; returns the plan and the labelled node."""
    first = plan_round(world([node("a")]))
    (pod,) = created_pods(first)
    done = plan_round(world([node("a")], pods=[finished(pod)], records=first.records))
    labels = {k: v for k, v in done.label_patches["a"].items() if v}
    annotations = {k: v for k, v in done.record_annotations.items() if v}
    labelled = replace(
        node("a", labels=labels), records={"record.roofline.dev/fleet": annotations["a"]}
    )
    return done, labelled


@pytest.mark.parametrize(
    "outage",
    [
        pytest.param({"ready": False}, id="not-ready"),
        pytest.param({"unschedulable": True}, id="cordoned"),
        pytest.param({"allocatable": {"nvidia.com/gpu": "0"}}, id="device-plugin-restart"),
    ],
)
def test_a_node_in_an_outage_keeps_its_record_labels_and_annotation_for_the_grace(
    outage: dict[str, Any],
) -> None:
    done, labelled = profiled_world()
    down = replace(labelled, **outage)
    plan = plan_round(world([down], records=done.records, now=NOW + 60))
    record = plan.records["a"]
    assert record.state is NodeState.UNAVAILABLE
    assert record.unavailable_since == NOW + 60
    assert record.result == done.records["a"].result
    assert record.message is not None
    assert record.message.startswith("node a ")
    assert plan.label_patches == {}, "the labels stay"
    assert plan.record_annotations == {}, "the record annotation stays"
    assert plan.wake_in == pytest.approx(3600.0)
    # Back within the hour: the publication stands and nothing is re-profiled.
    back = plan_round(world([labelled], records=plan.records, now=NOW + 1800))
    assert back.records["a"].state is NodeState.PROFILED
    assert back.records["a"].unavailable_since is None
    assert back.creates == []
    assert back.label_patches == {}


def test_a_node_unavailable_past_retain_unavailable_for_is_cleaned_up() -> None:
    done, labelled = profiled_world()
    short = spec(maxParallel=2, retainUnavailableFor="10m")
    down = replace(labelled, ready=False)
    kept = plan_round(world([down], the_spec=short, records=done.records, now=NOW + 60))
    assert kept.records["a"].state is NodeState.UNAVAILABLE
    later = plan_round(world([down], the_spec=short, records=kept.records, now=NOW + 60 + 601))
    assert later.records == {}
    assert later.label_patches["a"][LABEL_PROFILE] is None
    assert later.record_annotations == {"a": None}


def test_a_node_deleted_or_no_longer_matching_is_cleaned_up_at_once() -> None:
    done, labelled = profiled_world()
    assert plan_round(world([], records=done.records)).records == {}
    moved = replace(labelled, labels={**labelled.labels, "pool": "a100"})
    plan = plan_round(world([moved], records=done.records))
    assert plan.records == {}
    assert plan.label_patches["a"][LABEL_PROFILE] is None


def unscheduled(pod: PodFacts) -> PodFacts:
    return replace(
        pod,
        bound=False,
        scheduler_message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )


def test_a_pod_that_cannot_be_scheduled_makes_the_node_unschedulable_not_failed() -> None:
    busy = spec(pendingTimeoutSeconds=30, retryBackoffSeconds=10, maxAttempts=1)
    first = plan_round(world([node("a")], the_spec=busy))
    (pod,) = created_pods(first)
    late = plan_round(
        world(
            [node("a")], the_spec=busy, pods=[unscheduled(pod)], records=first.records, now=NOW + 31
        )
    )
    record = late.records["a"]
    assert record.state is NodeState.UNSCHEDULABLE
    assert record.reason == "Unschedulable"
    assert record.message == (
        "pod not scheduled after 30s: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    assert record.next_attempt_at == NOW + 31 + 10
    assert late.failures == []
    assert late.wake_in == pytest.approx(10.0)


def test_unschedulable_attempts_never_exhaust_the_attempts_nor_count_against_failures() -> None:
    busy = spec(pendingTimeoutSeconds=30, retryBackoffSeconds=10, maxAttempts=1)
    plan = plan_round(world([node("a")], the_spec=busy))
    now = NOW
    for _ in range(3):
        (pod,) = created_pods(plan, at=now)
        now += 31
        plan = plan_round(
            world(
                [node("a")], the_spec=busy, pods=[unscheduled(pod)], records=plan.records, now=now
            )
        )
        assert plan.records["a"].state is NodeState.UNSCHEDULABLE
        now = plan.records["a"].next_attempt_at or now
        plan = plan_round(world([node("a")], the_spec=busy, records=plan.records, now=now))
        assert plan.records["a"].state is NodeState.PROFILING
    assert (plan.records["a"].attempts, plan.records["a"].unschedulable) == (4, 3)
    (pod,) = created_pods(plan, at=now)
    crashed = finished(pod, phase="Failed", terminated=Terminated(1, "Error", "boom"))
    failed = plan_round(
        world([node("a")], the_spec=busy, pods=[crashed], records=plan.records, now=now + 1)
    )
    assert failed.records["a"].state is NodeState.FAILED, "one real failure of maxAttempts=1"


def test_an_overflowing_result_fails_its_node_alone_and_the_round_goes_on() -> None:
    nodes = [node("good"), node("huge"), node("deep")]
    first = plan_round(world(nodes, the_spec=spec(maxParallel=3, maxAttempts=2)))
    by_node = {p.node: p for p in created_pods(first)}
    huge = json.loads(encode_compact(profile(device(), created_at=NOW)))
    huge["g"][0][2] = 1e300
    pods = [
        finished(by_node["good"], message=encode_compact(profile(device(), created_at=NOW))),
        finished(by_node["huge"], message=json.dumps(huge)),
        finished(by_node["deep"], message="[" * 4096),
    ]
    plan = plan_round(
        world(nodes, the_spec=spec(maxParallel=3, maxAttempts=2), pods=pods, records=first.records)
    )
    assert plan.records["good"].state is NodeState.PROFILED
    assert set(plan.label_patches) == {"good"}
    failed = dict(plan.failures)
    assert set(failed) == {"huge", "deep"}
    assert all(f.reason is FailureReason.INVALID_RESULT for f in failed.values())
    assert "'bandwidth'" in failed["huge"].message
    assert {p.name for p in plan.finished} == {p.name for p in pods}, "every pod is deleted"
    for name in ("huge", "deep"):
        assert plan.records[name].state is NodeState.RETRYING
        assert plan.records[name].result is None
        assert plan.annotation_texts[name] is None
