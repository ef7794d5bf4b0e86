"""A RooflineProfile's status as an export source, read once into bounded values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from roofline_cli.export.commented import needs_escape
from roofline_cli.export.from_status import SourceError, source_of_profile
from roofline_cli.export.plans import ExportSource, RequestRate
from roofline_operator.decide.labels import label_safe
from tests.cli.export_sources import (
    H100,
    L40S,
    MODEL,
    PROFILE,
    hostile_text,
    replaced,
    status_profile,
    string_paths,
)
from tests.tampering import json_values, tampered_documents


def test_each_class_of_the_status_is_a_plan_with_its_slowest_nodes_itl() -> None:
    source = source_of_profile(status_profile(), "profile.json")
    assert (source.profile, source.itl_slo, source.description) == (
        PROFILE,
        "50ms",
        f"RooflineProfile {PROFILE}",
    )
    h100, l40s = source.plans
    assert (h100.gpu_class, h100.nodes, h100.max_batch, h100.min_batch) == (H100, 2, 104, 64)
    assert h100.itl is not None
    assert (h100.itl.intercept_seconds, h100.itl.measured_on) == (0.0131, "node gpu-b")
    assert (l40s.gpu_class, l40s.min_batch, l40s.max_batch) == (L40S, None, 24)
    assert h100.engine_flags is None


def test_nodes_group_into_classes_by_the_product_their_class_label_carries() -> None:
    h100, l40s = source_of_profile(status_profile(), "p").node_classes
    assert (h100.label, h100.product, h100.nodes, h100.gpus) == (
        label_safe(H100),
        H100,
        ("gpu-a", "gpu-b"),
        2,
    )
    assert (l40s.label, l40s.nodes, l40s.accelerated) == (label_safe(L40S), ("gpu-c",), True)
    assert h100.tokens_per_second[MODEL] == pytest.approx(104 / 0.049, rel=1e-3)


def test_nodes_of_one_product_are_one_class_whatever_min_batch_they_measured() -> None:
    document = status_profile()
    document["status"]["nodes"][1]["recommendedMinBatch"] = 256
    h100, _ = source_of_profile(document, "p").node_classes
    assert h100.nodes == ("gpu-a", "gpu-b")


def test_a_cpu_device_profile_has_no_accelerated_class() -> None:
    document = status_profile()
    document["spec"]["device"] = "cpu"
    assert not any(c.accelerated for c in source_of_profile(document, "p").node_classes)


def test_a_bare_status_is_read_without_a_profile_label() -> None:
    source = source_of_profile(status_profile()["status"], "status.json")
    assert source.profile is None
    assert len(source.plans) == 2


def test_a_node_whose_rate_was_trimmed_takes_its_classs() -> None:
    document = status_profile()
    for node in document["status"]["nodes"]:
        for model in node["models"]:
            model.pop("tokensPerSecondAtMaxBatch", None)
    (high, _) = source_of_profile(document, "p").node_classes
    assert high.tokens_per_second[MODEL] == pytest.approx(2122)


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    document = status_profile()
    target: Any = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


CLASS = ("status", "models", 0, "classes", 0)
RATE = {"requestsPerSecond": 7.25, "limitedBy": "ttft", "promptTokens": 4000, "outputTokens": 200}


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        pytest.param(_with((*CLASS, "maxBatch"), "96"), "maxBatch", id="string-batch"),
        pytest.param(_with((*CLASS, "maxBatch"), True), "maxBatch", id="boolean-batch"),
        pytest.param(_with((*CLASS, "product"), "\x00"), "product", id="product"),
        pytest.param(_with((*CLASS, "nodes"), -1), "count of nodes", id="nodes"),
        pytest.param(_with((*CLASS, "kvCacheTokens"), 1.5), "kvCacheTokens", id="kv"),
        pytest.param(
            _with((*CLASS, "tokensPerSecondAtMaxBatch"), float("inf")), "positive rate", id="rate"
        ),
        pytest.param(_with((*CLASS, "tokensPerSecondAtMaxBatch"), 10**400), "rate", id="huge"),
        pytest.param(_with((*CLASS, "itlInterceptSeconds"), -1), "itlInterceptSeconds", id="itl"),
        pytest.param(_with((*CLASS, "itlPerSequenceSeconds"), 10**400), "itlPer", id="huge-itl"),
        pytest.param(_with(("status", "models", 0, "classes"), {}), "not a list", id="classes"),
        pytest.param(_with(("status", "models"), [{}] * 9), "more than 8", id="models"),
        pytest.param(_with(("status", "models", 0, "name"), "a/b"), "name", id="model-name"),
        pytest.param(_with(("status", "nodes", 0, "name"), "gpu-a\n"), "name", id="node-newline"),
        pytest.param(_with(("status", "nodes", 0, "name"), "Gpu-A"), "name", id="node-upper"),
        pytest.param(
            _with(("status", "nodes", 2, "product"), "NVIDIA L40S\u2028  evil: x"),
            "product",
            id="node-product",
        ),
        pytest.param(
            _with((*CLASS, "slowestNode"), "gpu-b\x1b[31m"), "slowestNode", id="slowest-node"
        ),
        pytest.param(_with(("metadata", "name"), "fleet\n"), "metadata", id="profile-name"),
        pytest.param(_with((*CLASS, "kvCacheTokens"), 10**300), "kvCacheTokens", id="kv-huge"),
        pytest.param(
            _with((*CLASS, "tokensPerSecondAtMaxBatch"), 5e-324), "positive rate", id="rate-tiny"
        ),
        pytest.param(
            _with((*CLASS, "maxRequestRate"), {**RATE, "limitedBy": "memory"}),
            r"maxRequestRate: limitedBy is not one of ttft, itl, saturation",
            id="rate-limit",
        ),
        pytest.param(
            _with((*CLASS, "maxRequestRate"), {**RATE, "requestsPerSecond": -1}),
            "maxRequestRate: field 'requestsPerSecond'",
            id="rate-negative",
        ),
        pytest.param(
            _with((*CLASS, "maxRequestRate"), {**RATE, "promptTokens": 0}),
            "maxRequestRate: field 'promptTokens'",
            id="rate-prompt",
        ),
        pytest.param(_with((*CLASS, "maxRequestRate"), "fast"), "not an object", id="rate-text"),
        pytest.param({"kind": "RooflineProfile", "status": []}, "status is not", id="status"),
        pytest.param({"kind": "ConfigMap"}, "not a RooflineProfile", id="kind"),
        pytest.param({"kind": "RooflineProfile"}, "no planned model", id="empty"),
    ],
)
def test_a_defect_is_one_error_that_names_the_field(document: Any, reason: str) -> None:
    with pytest.raises(SourceError, match=reason.replace("(", r"\(")):
        source_of_profile(document, "p")


def test_a_long_profile_name_selects_nodes_by_the_operators_label_value() -> None:
    name = "p" * 100
    source = source_of_profile(_with(("metadata", "name"), name), "p")
    assert source.profile == label_safe(name)
    assert source.description == f"RooflineProfile {name}"


@pytest.mark.parametrize(("latency", "kept"), [("50ms", True), ("1m30s", True), ("5\n", False)])
def test_the_slo_is_kept_only_as_the_crd_writes_it(latency: str, kept: bool) -> None:
    source = source_of_profile(_with(("spec", "slo", "interTokenLatency"), latency), "p")
    assert source.itl_slo == (latency if kept else None)


STATUS = status_profile()


def _strings(source: ExportSource) -> list[str]:
    """Every string of a source that reaches the YAML."""
    found = [source.description, source.profile or "", source.itl_slo or ""]
    for plan in source.plans:
        found += [plan.model, plan.gpu_class, plan.source, plan.itl.measured_on if plan.itl else ""]
    for node_class in source.node_classes:
        found += [
            node_class.label,
            node_class.product,
            *node_class.nodes,
            *node_class.tokens_per_second,
        ]
    return found


@st.composite
def _hostile_strings(draw: st.DrawFn) -> str:
    """The status with one of its strings replaced by separators, controls and look-alikes."""
    path = draw(st.sampled_from(string_paths(STATUS)))
    return json.dumps(replaced(STATUS, path, draw(hostile_text)))


@given(text=st.one_of(tampered_documents(STATUS), json_values.map(json.dumps), _hostile_strings()))
@example(text=json.dumps(_with((*CLASS, "maxBatchByMemory"), 10**400)))
@example(text=json.dumps(_with(("status", "nodes", 2, "product"), "NVIDIA L40S\u2028x")))
def test_any_tampered_status_reads_as_a_source_or_one_source_error(text: str) -> None:
    """A status from a cluster or a file may hold anything: it reads into a source whose every
    string a YAML comment can carry, or into one :class:`SourceError`, never another exception."""
    message = ""
    try:
        source = source_of_profile(json.loads(text), "p")
    except SourceError as exc:
        message = str(exc)
    else:
        assert source.plans
        assert all(plan.max_batch_by_memory >= 0 for plan in source.plans)
        assert not any(needs_escape(char) for string in _strings(source) for char in string)
    assert "\n" not in message
    assert message.isprintable()


def test_a_classs_max_request_rate_is_read_with_its_limit_and_workload() -> None:
    source = source_of_profile(_with((*CLASS, "maxRequestRate"), RATE), "p")
    rated = [p.max_request_rate for p in source.plans if p.max_request_rate is not None]
    assert rated == [RequestRate(7.25, "ttft", 4000, 200)]
