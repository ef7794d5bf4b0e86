"""Each model's largest request rate per replica in the status: per node beside its plan, per
class the slowest node's, read back through the wire's checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import device, profile, status_of

from roofline_operator.core.model_loads import (
    MAX_REQUEST_RATE_KEY,
    load_from_status,
    loads_from_status,
    slowest_rate,
)
from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact, from_status, to_status
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.core.plausibility import ImplausibleValue
from roofline_profiler.wire.compact_loads import CompactLoad

MODELS = ModelsView((ModelSpec("llama", preset="llama-3.1-8b"),))


def _node(name: str, product: str, *loads: CompactLoad) -> NodeRecord:
    gpu = replace(device(0, name=product), models=(plan("llama"),))
    result = from_compact(replace(profile(gpu), loads=loads), "h")
    return NodeRecord(name=name, gpus=1, state=NodeState.PROFILED, result=result)


def _rate(rps: float, limited_by: str = "ttft") -> CompactLoad:
    return CompactLoad("llama", rps, limited_by, 1000, 200)


def _status(*records: NodeRecord) -> dict[str, Any]:
    return status_of({r.name: r for r in records}, models=MODELS)


def test_a_nodes_model_entry_carries_its_rate_limit_and_workload() -> None:
    status = _status(_node("a", "NVIDIA H100", _rate(12.345678)))
    (node,) = status["nodes"]
    (entry,) = node["models"]
    assert entry[MAX_REQUEST_RATE_KEY] == {
        "requestsPerSecond": 12.34,
        "limitedBy": "ttft",
        "promptTokens": 1000,
        "outputTokens": 200,
    }


def test_a_node_profiled_without_a_workload_has_no_rate() -> None:
    status = _status(_node("a", "NVIDIA H100"))
    (entry,) = status["nodes"][0]["models"]
    assert MAX_REQUEST_RATE_KEY not in entry
    assert MAX_REQUEST_RATE_KEY not in status["models"][0]["classes"][0]


def test_a_class_takes_the_slowest_nodes_rate_with_its_limit() -> None:
    status = _status(
        _node("a", "NVIDIA H100", _rate(12.0, "itl")),
        _node("b", "NVIDIA H100", _rate(7.5, "saturation")),
        _node("c", "NVIDIA H200", _rate(20.0)),
    )
    h100, h200 = status["models"][0]["classes"]
    assert h100[MAX_REQUEST_RATE_KEY]["requestsPerSecond"] == 7.5
    assert h100[MAX_REQUEST_RATE_KEY]["limitedBy"] == "saturation"
    assert h200[MAX_REQUEST_RATE_KEY]["requestsPerSecond"] == 20


def test_a_class_with_a_node_without_a_rate_has_none() -> None:
    status = _status(_node("a", "NVIDIA H100", _rate(12.0)), _node("b", "NVIDIA H100"))
    assert MAX_REQUEST_RATE_KEY not in status["models"][0]["classes"][0]


def test_the_rate_survives_a_round_trip_through_the_status() -> None:
    result = _node("a", "NVIDIA H100", _rate(12.345678)).result
    assert result is not None
    restored = from_status(to_status(result))
    assert restored is not None
    assert restored.loads == (CompactLoad("llama", 12.34, "ttft", 1000, 200),)
    assert to_status(restored)["models"] == to_status(result)["models"]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        pytest.param("12", TypeError, id="not-an-object"),
        pytest.param({"requestsPerSecond": 1, "limitedBy": "memory"}, ImplausibleValue, id="limit"),
        pytest.param(
            {"requestsPerSecond": -1, "limitedBy": "itl", "promptTokens": 1, "outputTokens": 1},
            ImplausibleValue,
            id="negative-rate",
        ),
        pytest.param(
            {"requestsPerSecond": 1, "limitedBy": "itl", "promptTokens": 0, "outputTokens": 1},
            ImplausibleValue,
            id="zero-prompt",
        ),
    ],
)
def test_a_damaged_rate_in_the_status_is_refused(raw: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        load_from_status("llama", raw)


def test_a_damaged_rate_is_skipped_and_the_others_kept() -> None:
    good = {"requestsPerSecond": 3, "limitedBy": "itl", "promptTokens": 9, "outputTokens": 9}
    entries = [
        {"name": "a", MAX_REQUEST_RATE_KEY: good},
        {"name": "b", MAX_REQUEST_RATE_KEY: {**good, "requestsPerSecond": "fast"}},
        {"name": "c"},
    ]
    assert loads_from_status(entries) == (CompactLoad("a", 3.0, "itl", 9, 9),)


def test_the_slowest_rate_is_unknown_unless_every_node_has_one() -> None:
    assert slowest_rate([]) is None
    assert slowest_rate([{"requestsPerSecond": 2}, None]) is None
    assert slowest_rate([{"requestsPerSecond": 2}, {"requestsPerSecond": 1}]) == {
        "requestsPerSecond": 1
    }
