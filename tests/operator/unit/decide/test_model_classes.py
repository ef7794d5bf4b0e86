"""status.models[].classes: each model per GPU product class, safe on every node of the class."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import device, profile, status_of

from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.model_classes import MAX_CLASSES, classes, itl_step
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire.compact_models import CompactModelPlan

MODELS = ModelsView((ModelSpec("llama", preset="llama-3.1-8b"),))


def _node(name: str, product: str, model_plan: CompactModelPlan) -> NodeRecord:
    gpu = replace(device(0, name=product), models=(model_plan,))
    result = from_compact(profile(gpu), "h")
    return NodeRecord(name=name, gpus=1, state=NodeState.PROFILED, result=result)


def _itl(alpha: float, beta: float, gamma: float, error: float = 0.05) -> dict[str, Any]:
    return {
        "itl_intercept_seconds": alpha,
        "itl_per_sequence_seconds": beta,
        "itl_per_sequence_context_token_seconds": gamma,
        "itl_max_relative_error": error,
    }


def _classes(*records: NodeRecord) -> list[dict[str, Any]]:
    status = status_of({r.name: r for r in records}, models=MODELS)
    (model,) = status["models"]
    found: list[dict[str, Any]] = model["classes"]
    return found


def test_a_class_takes_the_worst_of_each_bound_over_its_nodes() -> None:
    found = _classes(
        _node("a", "NVIDIA H100", plan("llama", min_batch=16, max_batch_by_latency=96)),
        _node("b", "NVIDIA H100", plan("llama", min_batch=64, max_batch_by_memory=300)),
        _node("c", "NVIDIA H200", plan("llama", min_batch=8)),
    )
    assert [(c["product"], c["nodes"]) for c in found] == [("NVIDIA H100", 2), ("NVIDIA H200", 1)]
    h100 = found[0]
    assert (h100["minBatch"], h100["maxBatch"], h100["maxBatchByMemory"]) == (64, 96, 300)
    assert h100["kvCacheTokens"] == 300 * 4096
    # 96 / 0.04 on node a, 128 / 0.04 on node b: the slower one holds on both.
    assert h100["tokensPerSecondAtMaxBatch"] == pytest.approx(2400)


def test_the_itl_model_is_the_slowest_nodes_whole_not_a_mix_of_terms() -> None:
    """Node a has the larger intercept, node b the larger per-sequence term; at the class's
    largest max batch (128) node b is slower, so the class publishes b's three terms."""
    found = _classes(
        _node("a", "NVIDIA H100", plan("llama", **_itl(0.02, 1e-5, 1e-8, 0.1))),
        _node("b", "NVIDIA H100", plan("llama", **_itl(0.01, 2e-4, 1e-8, 0.2))),
    )
    (h100,) = found
    assert h100["slowestNode"] == "b"
    assert (
        h100["itlInterceptSeconds"],
        h100["itlPerSequenceSeconds"],
        h100["itlPerSequenceContextTokenSeconds"],
        h100["itlMaxRelativeError"],
    ) == (0.01, 2e-4, 1e-8, 0.2)


def test_a_class_without_a_min_batch_on_one_node_has_none() -> None:
    found = _classes(
        _node("a", "NVIDIA L4", plan("llama", min_batch=None)),
        _node("b", "NVIDIA L4", plan("llama", min_batch=64)),
    )
    assert "minBatch" not in found[0]


def test_nodes_without_an_itl_model_give_a_class_without_one() -> None:
    (found,) = _classes(_node("a", "NVIDIA L4", plan("llama")))
    assert "slowestNode" not in found
    assert "itlInterceptSeconds" not in found


def test_classes_are_bounded_and_ordered_by_product() -> None:
    entry = {"name": "m", "maxBatchByMemory": 8, "maxBatch": 8, "contextTokens": 16}
    nodes = [(f"n{i}", f"GPU {i:02d}", [entry]) for i in reversed(range(MAX_CLASSES + 3))]
    found = classes("m", nodes)
    assert [c["product"] for c in found] == [f"GPU {i:02d}" for i in range(MAX_CLASSES)]


def test_an_itl_step_is_the_line_at_a_batch_and_context() -> None:
    entry = {
        "itlInterceptSeconds": 0.01,
        "itlPerSequenceSeconds": 1e-4,
        "itlPerSequenceContextTokenSeconds": 1e-8,
    }
    assert itl_step(entry, 10, 1000) == pytest.approx(0.01 + 1e-3 + 1e-4)
    assert itl_step({}, 10, 1000) is None
