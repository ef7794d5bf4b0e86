from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from tests.operator.unit.model_builders import plan, planned_node
from tests.operator.unit.operator_builders import device, profile, status_of
from tests.profiler.headline_builders import with_values

from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact, headline_of
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.outcomes import MAX_MESSAGE_CHARS
from roofline_operator.decide.records import NodeRecord
from roofline_operator.decide.status import (
    DEFAULT_STATUS_MAX_NODES,
    build_status,
    listing_order,
    merge_conditions,
    merge_patch,
    summarize,
)


def profiled(name: str, ridge: float, min_batch: int, spec_hash: str = "h") -> NodeRecord:
    result = from_compact(profile(device(ridge=ridge, min_batch=min_batch)), spec_hash)
    return NodeRecord(name=name, gpus=1, state=NodeState.PROFILED, result=result)


def conditions(records: dict[str, NodeRecord], **kw: object) -> dict[str, dict[str, object]]:
    status = build_status(
        records=records,
        spec_hash="h",
        conflicts=kw.get("conflicts", {}),  # type: ignore[arg-type]
        spec_error=kw.get("spec_error"),
        previous_conditions=[],  # type: ignore[arg-type]
        generation=3,
        now=1000.0,
    )
    return {c["type"]: c for c in status["conditions"]}


def test_summary_counts_nodes_and_recommends_the_largest_min_batch() -> None:
    records = {
        "a": profiled("a", 150.0, 64),
        "b": profiled("b", 200.0, 256),
        "c": profiled("c", 180.0, 128),
        "d": NodeRecord(name="d", gpus=1, state=NodeState.FAILED, reason="Timeout"),
        "e": NodeRecord(name="e", gpus=1, state=NodeState.PROFILING),
        "f": NodeRecord(name="f", gpus=1, state=NodeState.UNSCHEDULABLE, reason="Unschedulable"),
    }
    assert summarize(records, "h") == {
        "matched": 6,
        "profiled": 3,
        "failed": 1,
        "pending": 1,
        "unschedulable": 1,
        "minRidgePoint": 150.0,
        "medianRidgePoint": 180.0,
        "maxRidgePoint": 200.0,
        "recommendedMinBatch": 256,
    }


def test_summary_ridge_points_are_rounded_to_two_decimals() -> None:
    records = {
        "a": profiled("a", 3.9125, 8),
        "b": profiled("b", 3.9325000000000001, 8),
        "c": profiled("c", 3.91, 8),
        "d": profiled("d", 4.0066666, 8),
    }
    summary = summarize(records, "h")
    assert summary["medianRidgePoint"] == 3.92
    assert str(summary["medianRidgePoint"]) == "3.92"
    assert (summary["minRidgePoint"], summary["maxRidgePoint"]) == (3.91, 4.01)


def test_a_result_under_an_old_spec_counts_as_pending() -> None:
    assert summarize({"a": profiled("a", 150.0, 64, spec_hash="old")}, "h")["pending"] == 1


def test_ready_when_every_matched_node_is_profiled() -> None:
    ready = conditions({"a": profiled("a", 150.0, 64)})["Ready"]
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == (
        "True",
        "Profiled",
        3,
    )


@pytest.mark.parametrize(
    ("records", "reason"),
    [
        pytest.param({}, "NoMatchingNodes", id="nothing-matched"),
        pytest.param({"a": NodeRecord(name="a", gpus=1)}, "Profiling", id="in-progress"),
        pytest.param(
            {"a": NodeRecord(name="a", gpus=1, state=NodeState.FAILED, reason="OOMKilled")},
            "NodesFailed",
            id="failed",
        ),
        pytest.param(
            {"a": NodeRecord(name="a", gpus=1, state=NodeState.UNSCHEDULABLE)},
            "NodesUnschedulable",
            id="unschedulable",
        ),
    ],
)
def test_not_ready_says_why(records: dict[str, NodeRecord], reason: str) -> None:
    ready = conditions(records)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", reason)


def test_degraded_counts_failures_by_reason() -> None:
    records = {
        n: NodeRecord(name=n, gpus=1, state=NodeState.RETRYING, reason=r)
        for n, r in [("a", "OOMKilled"), ("b", "OOMKilled"), ("c", "Timeout")]
    }
    degraded = conditions(records)["Degraded"]
    assert degraded["status"] == "True"
    assert degraded["message"] == "failed nodes by reason: OOMKilled: 2, Timeout: 1"


def test_an_invalid_spec_is_a_condition_with_its_message() -> None:
    ready = conditions({}, spec_error="spec.maxParallel must be between 1 and 10000, got 0")[
        "Ready"
    ]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "maxParallel" in str(ready["message"])


def test_a_label_conflict_names_the_nodes_and_the_owner() -> None:
    found = conditions({"a": profiled("a", 150.0, 64)}, conflicts={"a": "older"})
    conflict = found["LabelConflict"]
    assert conflict["status"] == "True"
    assert conflict["message"] == "labels of a are owned by the older profile older"


def test_transition_time_changes_only_when_the_status_flips() -> None:
    from roofline_operator.decide.status import Condition

    first = merge_conditions([], [Condition("Ready", False, "Profiling", "0 of 1")], 1, 100.0)
    same = merge_conditions(first, [Condition("Ready", False, "Profiling", "1 of 2")], 2, 200.0)
    flipped = merge_conditions(same, [Condition("Ready", True, "Profiled", "all")], 2, 300.0)
    assert first[0]["lastTransitionTime"] == same[0]["lastTransitionTime"]
    assert flipped[0]["lastTransitionTime"] != same[0]["lastTransitionTime"]


def test_merge_patch_deletes_missing_keys_and_replaces_lists_whole() -> None:
    old = {"summary": {"matched": 1, "minRidgePoint": 5.0}, "nodes": [{"name": "a"}], "x": 1}
    new = {"summary": {"matched": 2}, "nodes": [{"name": "a"}, {"name": "b"}], "x": 1}
    assert merge_patch(old, new) == {
        "summary": {"matched": 2, "minRidgePoint": None},
        "nodes": [{"name": "a"}, {"name": "b"}],
    }
    assert merge_patch(new, new) == {}


def build(records: dict[str, NodeRecord], max_nodes: int | None, **kw: Any) -> dict[str, Any]:
    return status_of(records, max_nodes=max_nodes, **kw)


def test_status_lists_failed_then_changed_then_pending_nodes_before_the_rest() -> None:
    records = {
        "a-profiled": profiled("a-profiled", 180.0, 128),
        "b-profiled": profiled("b-profiled", 180.0, 128),
        "c-pending": NodeRecord(name="c-pending", gpus=1, state=NodeState.PROFILING),
        "d-changed": replace(profiled("d-changed", 180.0, 128), change="bandwidth 4→3 TB/s"),
        "e-failed": NodeRecord(name="e-failed", gpus=1, state=NodeState.FAILED, reason="Timeout"),
        "f-old-spec": profiled("f-old-spec", 180.0, 128, spec_hash="old"),
    }
    assert listing_order(records, "h") == [
        "e-failed",
        "d-changed",
        "c-pending",
        "f-old-spec",
        "a-profiled",
        "b-profiled",
    ]
    status = build(records, max_nodes=4)
    assert [n["name"] for n in status["nodes"]] == [
        "c-pending",
        "d-changed",
        "e-failed",
        "f-old-spec",
    ]
    assert (status["summary"]["listed"], status["summary"]["omitted"]) == (4, 2)
    assert status["summary"]["matched"] == 6, "the summary still counts every node"
    assert status["summary"]["profiled"] == 3


def test_a_status_within_the_bound_lists_every_node_by_name() -> None:
    records = {n: profiled(n, 180.0, 128) for n in ("b", "a")}
    status = build(records, max_nodes=2)
    assert [n["name"] for n in status["nodes"]] == ["a", "b"]
    assert (status["summary"]["listed"], status["summary"]["omitted"]) == (2, 0)


def test_a_bound_of_zero_lists_no_node_but_keeps_the_aggregates() -> None:
    records = {n: profiled(n, 150.0 + i, 64) for i, n in enumerate(("a", "b", "c"))}
    status = build(records, max_nodes=0)
    assert status["nodes"] == []
    assert status["summary"]["omitted"] == 3
    assert status["summary"]["medianRidgePoint"] == 151.0


@pytest.mark.slow
def test_status_of_10000_nodes_with_8_gpus_and_8_models_stays_far_below_the_object_limit() -> None:
    names = [f"model-{i}-{'n' * 30}" for i in range(8)]
    models = tuple(ModelSpec(n, preset="llama-3.1-8b") for n in names)
    base = planned_node("x", *[tuple(plan(n) for n in names) for _ in range(8)])
    assert base.result is not None
    headline = headline_of(base.result)
    worst = replace(
        base,
        state=NodeState.RETRYING,
        attempts=3,
        pod="p" * 63,
        pod_namespace="n" * 63,
        reason="PodFailed",
        message="m" * MAX_MESSAGE_CHARS,
        last_attempt_at=1.7e9,
        next_attempt_at=1.7e9,
        measured=with_values(headline, ridge_point=1.0),
        previous=headline,
        published_at=1.7e9,
        change="GPU 7 bandwidth 4.31→3.62 TB/s (−16%), " * 8,
    )
    names_of_nodes = [f"node-{i:05d}-{'x' * 40}" for i in range(10_000)]
    records = {n: replace(worst, name=n) for n in names_of_nodes}
    view = ModelsView(models, {}, Decimal("2.50"))
    status = build(records, max_nodes=DEFAULT_STATUS_MAX_NODES, models=view)
    size = len(json.dumps(status, separators=(",", ":")).encode())
    assert size < 1 << 20, f"{size / 1024:.0f} KiB"
    assert len(status["nodes"]) == DEFAULT_STATUS_MAX_NODES
    assert status["summary"]["omitted"] == 10_000 - DEFAULT_STATUS_MAX_NODES
    assert [(m["name"], m["nodes"]) for m in status["models"]] == [(n, 10_000) for n in names]


def test_an_unschedulable_node_does_not_degrade_the_profile() -> None:
    busy = {
        "a": NodeRecord(name="a", gpus=1, state=NodeState.UNSCHEDULABLE, reason="Unschedulable")
    }
    assert conditions(busy)["Degraded"]["status"] == "False"
