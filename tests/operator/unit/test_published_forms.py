"""Golden files of every form in which the operator publishes a profiled node, for one input.

The input is the compact text the profiler writes for its synthetic planned profile (pinned itself
in ``tests/profiler/test_published_forms.py``), read as the operator reads a finished pod
(``published_builders.py``). Pinned, byte for byte: the node's ``status.nodes[]`` entry and the
whole status, the record annotation, the node labels and their merge patch, the NodeFeature
object and the Prometheus exposition of the gauges. A refactor must leave these files identical;
a deliberate change regenerates them with
``ROOFLINE_UPDATE_GOLDEN=1 pytest tests/operator/unit/test_published_forms.py`` and the diff is
reviewed. The last test checks the published numbers against the profiler's own, so the files
cannot pin a wrong number unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from tests import golden
from tests.operator.unit.published_builders import (
    MODEL,
    NAMESPACE,
    NODE,
    PROFILE,
    READ_AT,
    models_view,
    profiled_node,
    profiled_record,
    profiled_spec,
)
from tests.profiler.synthetic import planned_result

from roofline_operator.core.names import (
    LABEL_BANDWIDTH_GBPS,
    LABEL_MIN_BATCH,
    LABEL_PEAK_TFLOPS,
    LABEL_RIDGE_POINT,
)
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.labels import label_patch, node_labels_for
from roofline_operator.decide.node_features import build_node_feature
from roofline_operator.decide.records import (
    NodeRecord,
    record_annotation_key,
    record_to_annotation,
    record_to_status,
)
from roofline_operator.decide.status import build_status
from roofline_operator.run.metrics import RooflineCollector, snapshot_from_records

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = "tests/operator/unit/test_published_forms.py"
#: Relative precision of a number after the compact text's four significant digits.
COMPACT_PRECISION = 5e-4


def check_golden(name: str, text: str) -> None:
    golden.check_golden(GOLDEN / name, text, REGENERATE)


@pytest.fixture(scope="module")
def the_spec() -> ProfileSpec:
    return profiled_spec()


@pytest.fixture(scope="module")
def record(the_spec: ProfileSpec) -> NodeRecord:
    return profiled_record(the_spec)


def labels_of(record: NodeRecord) -> dict[str, str]:
    assert record.result is not None
    return node_labels_for(record.result.worst_gpu(), PROFILE)


def exposition(record: NodeRecord, the_spec: ProfileSpec) -> tuple[str, CollectorRegistry]:
    """The scrape of the gauges of a snapshot holding ``record`` (the counters are left out:
    their ``_created`` samples hold the wall clock)."""
    registry = CollectorRegistry()
    collector = RooflineCollector()
    registry.register(collector)
    records = {record.name: record}
    collector.update(snapshot_from_records(PROFILE, records, the_spec.measurement_hash(), (MODEL,)))
    return generate_latest(registry).decode(), registry


def test_the_node_status_entry_matches_its_golden_file(record: NodeRecord) -> None:
    check_golden("node-status-entry.json", golden.pretty_json(record_to_status(record)))


def test_the_profile_status_matches_its_golden_file(
    record: NodeRecord, the_spec: ProfileSpec
) -> None:
    status = build_status(
        records={record.name: record},
        spec_hash=the_spec.measurement_hash(),
        conflicts={},
        spec_error=None,
        previous_conditions=[],
        generation=1,
        now=READ_AT,
        models=models_view(the_spec),
    )
    check_golden("profile-status.json", golden.pretty_json(status))


def test_the_record_annotation_matches_its_golden_file(record: NodeRecord) -> None:
    text = record_to_annotation(record)
    assert text is not None
    check_golden("record-annotation.txt", text)


def test_the_node_labels_and_their_patch_match_their_golden_file(record: NodeRecord) -> None:
    labels = labels_of(record)
    patch = label_patch(profiled_node().labels, labels)
    check_golden("node-labels.json", golden.pretty_json({"labels": labels, "patch": patch}))


def test_the_node_feature_matches_its_golden_file(record: NodeRecord) -> None:
    annotation = record_to_annotation(record)
    assert annotation is not None
    body = build_node_feature(
        NODE,
        labels_of(record),
        PROFILE,
        NAMESPACE,
        {record_annotation_key(PROFILE): annotation},
    )
    check_golden("node-feature.json", golden.pretty_json(body))


def test_the_metrics_exposition_matches_its_golden_file(
    record: NodeRecord, the_spec: ProfileSpec
) -> None:
    text, _ = exposition(record, the_spec)
    check_golden("metrics.txt", text)


def test_every_published_form_carries_the_profilers_numbers(
    record: NodeRecord, the_spec: ProfileSpec
) -> None:
    """The operator's forms against the profiler's full-precision result: equal up to the
    compact text's rounding (and the labels' one decimal)."""
    (measured,) = planned_result().devices
    plan = measured.models[0]
    entry = record_to_status(record)
    annotation = json.loads(record_to_annotation(record) or "")
    labels = labels_of(record)
    _, registry = exposition(record, the_spec)
    gpu = {"profile": PROFILE, "node": NODE, "gpu": "0"}
    gpu.update(product=measured.name, dtype=measured.dtype)

    def near(value: float | None) -> object:
        return pytest.approx(value, rel=COMPACT_PRECISION)

    for published in (entry, annotation):
        assert published["ridgePoint"] == near(measured.ridge_point)
        assert published["recommendedMinBatch"] == measured.recommended_min_batch
        assert published["bandwidthBytesPerSecond"] == near(measured.bandwidth_bytes_per_second)
        assert published["peakFlopsPerSecond"] == near(measured.peak_flops_per_second)
    assert float(labels[LABEL_RIDGE_POINT]) == pytest.approx(measured.ridge_point, abs=0.05)
    assert labels[LABEL_MIN_BATCH] == str(measured.recommended_min_batch)
    assert float(labels[LABEL_BANDWIDTH_GBPS]) == near(measured.bandwidth_bytes_per_second / 1e9)
    assert float(labels[LABEL_PEAK_TFLOPS]) == pytest.approx(
        measured.peak_flops_per_second / 1e12, abs=0.05
    )
    assert registry.get_sample_value("roofline_ridge_point", gpu) == near(measured.ridge_point)
    assert registry.get_sample_value("roofline_recommended_min_batch", gpu) == (
        measured.recommended_min_batch
    )
    bandwidth = registry.get_sample_value("roofline_memory_bandwidth_bytes_per_second", gpu)
    assert bandwidth == near(measured.bandwidth_bytes_per_second)
    for point in (e.point for e in measured.sweep):
        step = registry.get_sample_value(
            "roofline_decode_step_seconds", {**gpu, "batch": str(point.batch)}
        )
        assert step == near(point.step_seconds), point.batch
    by_memory = registry.get_sample_value(
        "roofline_model_max_batch", {**gpu, "model": MODEL, "bound": "memory"}
    )
    assert by_memory == plan.max_batch_by_memory
    by_latency = registry.get_sample_value(
        "roofline_model_max_batch", {**gpu, "model": MODEL, "bound": "latency"}
    )
    assert by_latency == plan.max_batch_by_latency
