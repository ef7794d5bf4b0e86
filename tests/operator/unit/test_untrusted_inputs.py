"""Property-based: whatever a profiler pod reports or a Node's record annotation holds, a round
ends with a valid publication or a per-node failure, never an exception.

Valid publication: every label value is a Kubernetes label value, the status and the record
annotation are JSON an API server accepts (no NaN, no infinity) within their budgets, and every
metric sample is a finite number.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import ASKED, device, node, profile, spec
from tests.profiler.format_builders import compact_format
from tests.profiler.headline_builders import with_number_intervals, with_values
from tests.tampering import json_values, tampered_documents

from roofline_operator.core.names import FailureReason, NodeState
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.decide.labels import LABEL_VALUE, MAX_LABEL_VALUE_CHARS, node_labels_for
from roofline_operator.decide.outcomes import Failed, Succeeded, classify_pod
from roofline_operator.decide.pods import PodFacts, ProfileRef, Terminated, pod_facts
from roofline_operator.decide.records import (
    NodeRecord,
    record_annotation_key,
    record_from_annotation,
    record_to_annotation,
    restore_records,
)
from roofline_operator.decide.round_plan import RoundInput, plan_round
from roofline_operator.decide.sizes import RECORD_ANNOTATION_BUDGET_BYTES, STATUS_ENTRY_BUDGET_BYTES
from roofline_operator.decide.status import build_status
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records
from roofline_profiler.wire.compact import encode_compact

NOW = 1_800_000_000.0
SPEC = spec()


def _sound_wire() -> dict[str, Any]:
    """A sound two-GPU result with intervals, warnings, a model plan and two weight formats,
    measured at NOW."""
    devices = []
    for index in range(2):
        d = device(index, ridge=180.0 + index)
        d = with_number_intervals(
            d,
            bandwidth_bytes_per_second=(
                d.bandwidth_bytes_per_second * 0.99,
                d.bandwidth_bytes_per_second,
            ),
            peak_flops_per_second=(d.peak_flops_per_second * 0.99, d.peak_flops_per_second * 1.01),
            ridge_point=(d.ridge_point * 0.98, d.ridge_point * 1.02),
            recommended_min_batch=(64, 256),
        )
        devices.append(replace(d, models=(plan("llama"),), warnings=("CpuContention",)))
    formats = (compact_format("awq-int4-g128", 1), compact_format("int8-w8a8", 0))
    measured = replace(profile(*devices, created_at=NOW - 30), weight_formats=formats)
    loaded: dict[str, Any] = json.loads(encode_compact(measured))
    return loaded


SOUND_WIRE = _sound_wire()
#: How a result that is not a valid answer fails its node: not a plausible result, or one
#: measured on another backend than the pod was given (a tampered ``be``).
REFUSED = (FailureReason.INVALID_RESULT, FailureReason.WRONG_DEVICE)


def _succeeded(message: str) -> PodFacts:
    return PodFacts(
        name="p",
        namespace="roofline-system",
        profile="fleet",
        node="a",
        attempt=1,
        spec_hash="h",
        phase="Succeeded",
        created_at=NOW - 60,
        terminated=Terminated(0, "Completed", message),
        owner_uids=("u",),
        asked=ASKED,
    )


def assert_valid_publication(record: NodeRecord) -> None:
    """Labels, status, record annotation and metrics of ``record`` are all acceptable."""
    assert record.result is not None
    for value in node_labels_for(record.result.worst_gpu(), "fleet").values():
        assert len(value) <= MAX_LABEL_VALUE_CHARS
        assert LABEL_VALUE.fullmatch(value)
    status = build_status(
        records={record.name: record},
        spec_hash="h",
        conflicts={},
        spec_error=None,
        previous_conditions=[],
        generation=1,
        now=NOW,
    )
    text = json.dumps(status, allow_nan=False)
    assert len(json.dumps(status["nodes"][0])) <= STATUS_ENTRY_BUDGET_BYTES
    annotation = record_to_annotation(record)
    assert annotation is not None
    json.loads(annotation, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert len(annotation.encode()) <= RECORD_ANNOTATION_BUDGET_BYTES
    assert record_from_annotation(record.name, record.gpus, annotation, NOW) is not None
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.collector.update(snapshot_from_records("fleet", {record.name: record}, "h"))
    for family in metrics.registry.collect():
        for sample in family.samples:
            assert math.isfinite(sample.value), (sample, text[:0])


def _published(outcome: Succeeded) -> NodeRecord:
    return NodeRecord(
        name="a", gpus=2, state=NodeState.PROFILED, cycle_hash="h", result=outcome.result
    )


def test_the_sound_result_the_properties_tamper_with_is_published() -> None:
    outcome = classify_pod(_succeeded(json.dumps(SOUND_WIRE)), SPEC, NOW, gpus=2)
    assert isinstance(outcome, Succeeded)
    assert [f.name for f in outcome.result.weight_formats] == ["awq-int4-g128", "int8-w8a8"]
    assert_valid_publication(_published(outcome))


@given(message=st.one_of(st.text(max_size=300), json_values.map(json.dumps)))
def test_any_termination_message_is_a_valid_result_or_an_invalid_result_failure(
    message: str,
) -> None:
    outcome = classify_pod(_succeeded(message), SPEC, NOW, gpus=2)
    if isinstance(outcome, Failed):
        assert outcome.reason in REFUSED
    else:
        assert isinstance(outcome, Succeeded)
        assert_valid_publication(_published(outcome))


@given(message=tampered_documents(SOUND_WIRE))
def test_a_result_with_any_field_replaced_is_published_validly_or_fails_its_node(
    message: str,
) -> None:
    outcome = classify_pod(_succeeded(message), SPEC, NOW, gpus=2)
    if isinstance(outcome, Failed):
        assert outcome.reason in REFUSED
        assert outcome.message
    else:
        assert isinstance(outcome, Succeeded)
        assert_valid_publication(_published(outcome))


def _sound_annotation() -> dict[str, Any]:
    outcome = classify_pod(_succeeded(json.dumps(SOUND_WIRE)), SPEC, NOW, gpus=2)
    assert isinstance(outcome, Succeeded)
    text = record_to_annotation(_published(outcome))
    assert text is not None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


SOUND_ANNOTATION = _sound_annotation()


def _with_step_at_max_batch(seconds: float) -> str:
    document = json.loads(json.dumps(SOUND_ANNOTATION))
    document["models"][0]["stepSecondsAtMaxBatch"] = seconds
    return json.dumps(document)


@given(text=st.one_of(tampered_documents(SOUND_ANNOTATION), json_values.map(json.dumps)))
# A positive step so short that batch ÷ step overflows: tokens/s would be published as Infinity.
@example(text=_with_step_at_max_batch(3.5666386340537186e-308))
def test_any_record_annotation_restores_as_a_valid_publication_or_none(text: str) -> None:
    node_facts = NodeFacts(name="a", records={record_annotation_key("fleet"): text})
    restored = restore_records({}, [node_facts], "fleet", NOW)
    if restored:
        assert_valid_publication(restored["a"])


@given(
    bandwidth=st.floats(allow_nan=True, allow_infinity=True),
    peak=st.floats(allow_nan=True, allow_infinity=True),
    ridge=st.floats(allow_nan=True, allow_infinity=True),
    min_batch=st.integers(min_value=-(10**70), max_value=10**70),
    created_at=st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_numbers_a_profiler_encodes_end_as_a_publication_or_a_node_failure(
    bandwidth: float, peak: float, ridge: float, min_batch: int, created_at: float
) -> None:
    d = with_values(
        device(),
        bandwidth_bytes_per_second=bandwidth,
        peak_flops_per_second=peak,
        ridge_point=ridge,
        recommended_min_batch=min_batch,
    )
    try:
        message = encode_compact(profile(d, created_at=created_at))
    except (ValueError, OverflowError):
        return  # the profiler refuses to write it; nothing reaches the operator
    outcome = classify_pod(_succeeded(message), SPEC, NOW, gpus=1)
    if isinstance(outcome, Succeeded):
        assert_valid_publication(_published(outcome))
    else:
        assert isinstance(outcome, Failed)
        assert outcome.reason in REFUSED


@given(message=st.one_of(tampered_documents(SOUND_WIRE), st.text(max_size=100)))
def test_a_round_with_any_result_goes_on_for_the_other_nodes(message: str) -> None:
    nodes = {n: node(n, gpus=2) for n in ("a", "b")}
    the_spec = spec(maxParallel=2, gpusPerNode=0)
    profile_ref = ProfileRef("fleet", "u")

    def world(pods: list[PodFacts], records: dict[str, NodeRecord]) -> RoundInput:
        return RoundInput(
            profile=profile_ref,
            created_at=0.0,
            spec=the_spec,
            spec_hash=the_spec.measurement_hash(),
            namespace="roofline-system",
            image="roofline:test",
            nodes=nodes,
            pods=pods,
            records=records,
            claims=[],
            deleted=frozenset(),
            now=NOW,
        )

    first = plan_round(world([], {}))
    finished = []
    for body in first.creates:
        facts = pod_facts(body)
        text = message if facts.node == "a" else json.dumps(SOUND_WIRE)
        finished.append(replace(facts, phase="Succeeded", terminated=Terminated(0, "C", text)))
    plan = plan_round(world(finished, first.records))
    assert plan.records["b"].state is NodeState.PROFILED
    assert plan.records["a"].state in (NodeState.PROFILED, NodeState.RETRYING)
    assert {p.node for p in plan.finished} == {"a", "b"}, "both pods are deleted"
    for name, record in plan.records.items():
        if record.result is not None:
            assert_valid_publication(record)
        else:
            assert name == "a"
            assert record.reason in {r.value for r in REFUSED}
