from __future__ import annotations

from typing import Any

import pytest
from tests.operator.unit.operator_builders import GPU, node, spec

from roofline_operator.core.nodes import NodeFacts, Taint, node_facts, select_nodes
from roofline_profiler.core.plausibility import MAX_GPU_UNITS


def test_node_facts_read_labels_taints_readiness_and_gpus_from_a_node_object() -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "gpu-1", "labels": {"pool": "h200"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {GPU: "8", "cpu": "64"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    facts = node_facts(body)
    assert facts.name == "gpu-1"
    assert facts.ready
    assert facts.unschedulable
    assert facts.gpu_count(GPU) == 8
    assert facts.taints == (Taint("k", None, "NoSchedule"),)


def test_a_node_without_a_ready_condition_is_not_ready() -> None:
    assert not node_facts({"metadata": {"name": "n"}, "status": {}}).ready


def test_selection_needs_labels_readiness_and_a_gpu() -> None:
    nodes = [
        node("match"),
        node("other-pool", labels={"pool": "a100"}),
        node("not-ready", ready=False),
        node("no-gpu", gpus=0),
    ]
    assert select_nodes(nodes, spec().selection) == {"match": 1}


def test_a_cpu_profile_selects_matching_nodes_with_or_without_gpus() -> None:
    nodes = [node("no-gpu", gpus=0), node("eight", gpus=8), node("other", labels={"pool": "x"})]
    cpu = spec(device="cpu", gpusPerNode=0).selection
    assert select_nodes(nodes, cpu) == {"eight": 1, "no-gpu": 1}


def test_each_node_gets_one_gpu_unless_the_spec_names_a_count_or_all() -> None:
    nodes = [node("eight", gpus=8), node("two", gpus=2)]
    assert select_nodes(nodes, spec().selection) == {"eight": 1, "two": 1}
    assert select_nodes(nodes, spec(gpusPerNode=4).selection) == {"eight": 4}
    assert select_nodes(nodes, spec(gpusPerNode=0).selection) == {"eight": 8, "two": 2}


def test_cordoned_nodes_are_skipped_unless_the_cordon_is_tolerated() -> None:
    nodes = [node("cordoned", unschedulable=True)]
    assert select_nodes(nodes, spec().selection) == {}
    toleration = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}
    assert select_nodes(nodes, spec(tolerations=[toleration]).selection) == {"cordoned": 1}


@pytest.mark.parametrize(
    ("taint", "toleration", "selected"),
    [
        pytest.param({"key": "gpu", "effect": "NoSchedule"}, None, False, id="untolerated"),
        pytest.param({"key": "gpu", "effect": "PreferNoSchedule"}, None, True, id="soft-taint"),
        pytest.param(
            {"key": "gpu", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "Exists"},
            True,
            id="exists",
        ),
        pytest.param(
            {"key": "gpu", "value": "a", "effect": "NoExecute"},
            {"key": "gpu", "operator": "Equal", "value": "b"},
            False,
            id="wrong-value",
        ),
        pytest.param(
            {"key": "gpu", "value": "a", "effect": "NoExecute"},
            {"key": "gpu", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
            False,
            id="wrong-effect",
        ),
        pytest.param(
            {"key": "x", "effect": "NoSchedule"},
            {"operator": "Exists"},
            True,
            id="tolerate-everything",
        ),
    ],
)
def test_taints_follow_the_schedulers_toleration_rules(
    taint: dict[str, str], toleration: dict[str, str] | None, selected: bool
) -> None:
    body = {
        "metadata": {"name": "tainted", "labels": {"pool": "h200"}},
        "spec": {"taints": [taint]},
        "status": {"allocatable": {GPU: "1"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    chosen = spec(tolerations=[toleration] if toleration else [])
    assert bool(select_nodes([node_facts(body)], chosen.selection)) is selected


def test_match_expressions_are_ored_terms_of_anded_expressions() -> None:
    nodes = [
        node("a", labels={"zone": "a", "gen": "5"}),
        node("b", labels={"zone": "b", "gen": "3"}),
        node("c", labels={"zone": "c"}),
    ]
    terms = [
        {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]},
                {"key": "gen", "operator": "Gt", "values": ["4"]},
            ]
        },
        {"matchExpressions": [{"key": "gen", "operator": "DoesNotExist"}]},
    ]
    assert set(select_nodes(nodes, spec(nodeSelectorTerms=terms).selection)) == {"a", "c"}


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        pytest.param("In", ["5"], {"five"}, id="in"),
        pytest.param("NotIn", ["5"], {"nine", "none"}, id="not-in"),
        pytest.param("Exists", [], {"five", "nine"}, id="exists"),
        pytest.param("Lt", ["6"], {"five"}, id="lt"),
        pytest.param("Gt", ["6"], {"nine"}, id="gt"),
    ],
)
def test_each_selector_operator_matches_like_kubernetes(
    operator: str, values: list[str], expected: set[str]
) -> None:
    nodes = [node("five", labels={"gen": "5"}), node("nine", labels={"gen": "9"}), node("none")]
    expression = {"key": "gen", "operator": operator}
    if values:
        expression["values"] = values  # type: ignore[assignment]
    chosen = spec(nodeSelectorTerms=[{"matchExpressions": [expression]}])
    assert set(select_nodes(nodes, chosen.selection)) == expected


@pytest.mark.parametrize(
    ("allocatable", "count"),
    [
        pytest.param("80", 80, id="time-sliced"),
        pytest.param(str(MAX_GPU_UNITS + 1), 0, id="beyond-any-node"),
        pytest.param("9" * 4000, 0, id="thousands-of-digits"),
        pytest.param("1k", 0, id="not-whole"),
    ],
)
def test_allocatable_gpu_units_beyond_any_node_count_as_none(allocatable: str, count: int) -> None:
    facts = NodeFacts(name="n", allocatable={"nvidia.com/gpu": allocatable})
    assert facts.gpu_count("nvidia.com/gpu") == count
