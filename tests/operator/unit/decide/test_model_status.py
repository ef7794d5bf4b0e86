from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from tests.operator.unit.model_builders import plan, planned_node
from tests.operator.unit.operator_builders import status_of

from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.names import NodeState
from roofline_operator.decide.model_sources import ModelFailure, ServedFormat
from roofline_operator.decide.model_status import ModelsView, cost_per_million_tokens
from roofline_operator.decide.records import NodeRecord

MODELS = (ModelSpec("a", preset="qwen3-8b"), ModelSpec("b", preset="llama-3.1-8b"))


def status_with(records: dict[str, NodeRecord], view: ModelsView) -> dict[str, Any]:
    return status_of(records, models=view)


def fleet() -> dict[str, NodeRecord]:
    return {
        "n1": planned_node("n1", (plan("a", min_batch=16), plan("b"))),
        "n2": planned_node("n2", (plan("a", min_batch=64), plan("b"))),
        "n3": planned_node("n3", (plan("a", min_batch=32), plan("b"))),
    }


def test_every_node_lists_each_model_of_the_spec() -> None:
    status = status_with(fleet(), ModelsView(MODELS))
    entry = {m["name"]: m for m in status["nodes"][1]["models"]}
    assert set(entry) == {"a", "b"}
    assert entry["a"]["minBatch"] == 64
    assert entry["a"]["maxBatch"] == 128
    assert status["summary"]["models"] == 2


def test_the_model_summary_has_count_min_median_and_max() -> None:
    status = status_with(fleet(), ModelsView(MODELS))
    a = next(m for m in status["models"] if m["name"] == "a")
    assert a["nodes"] == 3
    assert a["failedNodes"] == 0
    assert a["minBatch"] == {"min": 16, "median": 32, "max": 64}
    assert a["contextTokens"] == 4096
    assert a["tensorParallel"] == 1


def test_a_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    records = fleet()
    del records["n3"]
    status = status_with(records, ModelsView(MODELS))
    assert status["models"][0]["minBatch"]["median"] == 40


def test_a_removed_model_leaves_nodes_summary_and_count() -> None:
    status = status_with(fleet(), ModelsView(MODELS[:1]))
    assert [m["name"] for m in status["nodes"][0]["models"]] == ["a"]
    assert [m["name"] for m in status["models"]] == ["a"]
    assert status["summary"]["models"] == 1


def test_without_models_there_is_no_model_status_at_all() -> None:
    status = status_with(fleet(), ModelsView())
    assert "models" not in status
    assert "models" not in status["summary"]
    assert "models" not in status["nodes"][0]
    assert "ModelsReady" not in {c["type"] for c in status["conditions"]}


def test_a_failed_model_shows_on_every_node_and_makes_models_ready_false() -> None:
    failure = ModelFailure("ConfigMapNotFound", "spec.models[1].configMapRef.name: gone")
    status = status_with(fleet(), ModelsView(MODELS, {"b": failure}))
    for node in status["nodes"]:
        b = next(m for m in node["models"] if m["name"] == "b")
        assert b["reason"] == "ConfigMapNotFound"
        assert "minBatch" not in b
        assert any("minBatch" in m for m in node["models"] if m["name"] == "a")
    summary = {m["name"]: m for m in status["models"]}
    assert summary["b"]["reason"] == "ConfigMapNotFound"
    assert summary["b"]["nodes"] == 0
    ready = {c["type"]: c for c in status["conditions"]}["ModelsReady"]
    assert ready["status"] == "False"
    assert ready["reason"] == "ConfigMapNotFound"
    assert ready["message"].startswith("spec.models[1].configMapRef.name")
    assert status["summary"]["models"] == 1
    nodes_ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert nodes_ready["status"] == "True"


def test_models_ready_is_true_when_every_model_is_planned() -> None:
    status = status_with(fleet(), ModelsView(MODELS))
    ready = {c["type"]: c for c in status["conditions"]}["ModelsReady"]
    assert (ready["status"], ready["reason"]) == ("True", "Planned")


def test_an_empty_range_keeps_its_numbers_and_says_which_limit_bites() -> None:
    records = {"n1": planned_node("n1", (plan("a", min_batch=256),))}
    (entry,) = status_with(records, ModelsView(MODELS[:1]))["nodes"][0]["models"]
    assert entry["reason"] == "RangeEmpty"
    assert (entry["minBatch"], entry["maxBatch"]) == (256, 128)
    assert "bound by latency" in entry["message"]
    ready = {c["type"]: c for c in status_with(records, ModelsView(MODELS[:1]))["conditions"]}
    assert ready["ModelsReady"]["status"] == "True"


def test_a_profile_without_the_models_plan_marks_it_not_planned() -> None:
    records = {"n1": planned_node("n1", (plan("a"),))}
    entries = status_with(records, ModelsView(MODELS))["nodes"][0]["models"]
    assert entries[1] == {
        "name": "b",
        "contextTokens": 4096,
        "tensorParallel": 1,
        "reason": "NotPlanned",
        "message": "the profiler returned no plan for this model",
    }


def test_a_node_still_profiling_has_no_model_entries() -> None:
    records = {"n1": NodeRecord(name="n1", gpus=1, state=NodeState.PROFILING)}
    assert "models" not in status_with(records, ModelsView(MODELS))["nodes"][0]


def test_the_cost_of_a_million_tokens_uses_the_replicas_gpus() -> None:
    assert cost_per_million_tokens(Decimal("3.60"), 2, 1000.0) == pytest.approx(2.0)
    records = {"n1": planned_node("n1", (plan("a"),))}
    view = ModelsView(MODELS[:1], {}, Decimal("3.60"))
    (entry,) = status_with(records, view)["nodes"][0]["models"]
    assert entry["costPerMillionTokensAtMaxBatch"] == pytest.approx(3.6 / 3600 / 3200 * 1e6)


def test_a_model_the_node_could_not_measure_fails_alone_and_the_roofline_publishes() -> None:
    """The profiler's ModelFailed warning (a layer that did not fit in GPU memory)."""
    record = planned_node("n1", (plan("a"),))
    assert record.result is not None
    gpus = tuple(replace(g, warnings=("ModelFailed",)) for g in record.result.gpus)
    record = replace(record, result=replace(record.result, gpus=gpus))
    status = status_with({"n1": record}, ModelsView(MODELS))
    node = status["nodes"][0]
    ok, failed = node["models"]
    assert ok["name"] == "a"
    assert "reason" not in ok
    assert (failed["name"], failed["reason"]) == ("b", "ModelFailed")
    assert "out of GPU memory" in failed["message"]
    assert node["ridgePoint"] > 0, "the roofline is published"


def test_a_model_without_a_min_batch_says_why_and_publishes_no_rate_at_one() -> None:
    records = {"n1": planned_node("n1", (plan("a", min_batch=None),))}
    (entry,) = status_with(records, ModelsView(MODELS[:1]))["nodes"][0]["models"]
    assert "minBatch" not in entry
    assert "efficiency threshold at 4096 tokens" in entry["minBatchReason"]
    assert "maxBatch (128)" in entry["minBatchReason"]
    assert "tokensPerSecondAtMinBatch" not in entry
    assert entry["tokensPerSecondAtMaxBatch"] == pytest.approx(128 / 0.04)


def test_a_model_with_a_min_batch_has_no_reason_for_one() -> None:
    records = {"n1": planned_node("n1", (plan("a", min_batch=16),))}
    (entry,) = status_with(records, ModelsView(MODELS[:1]))["nodes"][0]["models"]
    assert "minBatchReason" not in entry
    assert entry["tokensPerSecondAtMinBatch"] == pytest.approx(16 / 0.01)


#: ``a`` in AWQ 4-bit with an FP8 cache, ``b`` in its dtype with an FP8 cache.
FORMATS = {"a": ServedFormat("awq-int4-g128", "fp8"), "b": ServedFormat("", "fp8_e5m2")}


def test_each_entry_says_how_its_model_is_served_leaving_out_the_defaults() -> None:
    status = status_with(fleet(), ModelsView(MODELS, formats=FORMATS))
    for listed in (status["nodes"][0]["models"], status["models"]):
        a, b = listed
        assert (a["weightFormat"], a["kvCacheDtype"]) == ("awq-int4-g128", "fp8")
        assert "weightFormat" not in b
        assert b["kvCacheDtype"] == "fp8_e5m2"
    plain = status_with(fleet(), ModelsView(MODELS, formats={n: ServedFormat() for n in "ab"}))
    for listed in (plain["nodes"][0]["models"], plain["models"]):
        assert all("weightFormat" not in m and "kvCacheDtype" not in m for m in listed)


def test_a_served_model_without_a_plan_keeps_its_format_and_a_failed_one_has_none() -> None:
    """A model the profiler did not plan was resolved, so its format is known; a model that
    failed before (its config, its format against the config's) has no resolved format."""
    records = {"n1": planned_node("n1", (plan("b"),))}
    failure = ModelFailure("InvalidModel", "spec.models[1].weightFormat ...")
    view = ModelsView(MODELS, {"b": failure}, formats={"a": FORMATS["a"]})
    status = status_with(records, view)
    a, b = status["nodes"][0]["models"]
    assert (a["reason"], a["weightFormat"], a["kvCacheDtype"]) == (
        "NotPlanned",
        "awq-int4-g128",
        "fp8",
    )
    assert b["reason"] == "InvalidModel"
    assert "weightFormat" not in b
    assert "kvCacheDtype" not in b
    summary = {m["name"]: m for m in status["models"]}
    assert summary["a"]["weightFormat"] == "awq-int4-g128"
    assert "weightFormat" not in summary["b"]
