from __future__ import annotations

from typing import Any

import pytest

from roofline_operator.core.selection_spec import (
    DEFAULT_GPU_RESOURCE,
    MatchExpression,
    Toleration,
    parse_gpu_resource,
    parse_node_selection,
    parse_tolerations,
)
from roofline_operator.core.spec import parse_spec
from roofline_operator.core.spec_fields import SpecError


def test_an_empty_selection_requests_one_gpu_of_the_default_resource_anywhere() -> None:
    selection = parse_node_selection({}, parse_gpu_resource({}), ())
    assert (selection.node_selector, selection.terms, selection.tolerations) == ({}, (), ())
    assert (selection.gpu_resource, selection.gpus_per_node) == (DEFAULT_GPU_RESOURCE, 1)


def test_selector_terms_are_ored_tuples_of_anded_expressions() -> None:
    terms = [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
        {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                {"key": "gen", "operator": "Gt", "values": ["3"]},
            ]
        },
    ]
    selection = parse_node_selection({"nodeSelectorTerms": terms}, DEFAULT_GPU_RESOURCE, ())
    assert selection.terms == (
        (MatchExpression("gpu", "Exists", ()),),
        (MatchExpression("zone", "In", ("a", "b")), MatchExpression("gen", "Gt", ("3",))),
    )


def test_tolerations_are_parsed_for_selection_and_kept_as_written_for_the_pod() -> None:
    written = [{"key": "gpu", "value": "busy", "effect": "NoSchedule"}, {"operator": "Exists"}]
    parsed, raw = parse_tolerations(written)
    assert parsed == (
        Toleration("gpu", "Equal", "busy", "NoSchedule"),
        Toleration(None, "Exists", None, None),
    )
    assert raw == tuple(written)


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        pytest.param({"gpuResource": "nvidia.com/"}, "gpuResource", id="bad-resource"),
        pytest.param({"nodeSelector": {"gpu": 1}}, "nodeSelector", id="non-string-selector"),
        pytest.param({"nodeSelectorTerms": {}}, "nodeSelectorTerms", id="terms-not-a-list"),
        pytest.param(
            {"nodeSelectorTerms": [{"matchExpressions": []}]}, "non-empty", id="empty-term"
        ),
        pytest.param(
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]},
            "needs values",
            id="in-without-values",
        ),
        pytest.param(
            {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}
                ]
            },
            "integer",
            id="gt-non-integer",
        ),
        pytest.param(
            {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}
                ]
            },
            "takes no values",
            id="exists-with-values",
        ),
        pytest.param({"tolerations": [{"operator": "Equal", "value": "x"}]}, "key", id="keyless"),
        pytest.param({"tolerations": [{"operator": "Less"}]}, "Equal or Exists", id="operator"),
        pytest.param({"gpusPerNode": -1}, "gpusPerNode", id="negative-gpus"),
    ],
)
def test_invalid_selections_fail_with_a_message_naming_the_field(
    fields: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(SpecError, match=fragment):
        parse_spec(fields)


def test_zero_gpus_per_node_asks_for_every_allocatable_gpu() -> None:
    assert parse_spec({"gpusPerNode": 0}).selection.gpus_per_node is None
    assert parse_spec({"gpusPerNode": 8}).selection.gpus_per_node == 8
