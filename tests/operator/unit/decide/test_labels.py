from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tests.operator.unit.operator_builders import gpu, node, spec

from roofline_operator.core.names import NODE_LABEL_KEYS
from roofline_operator.decide.labels import (
    LABEL_VALUE,
    LabelClaim,
    format_label_value,
    label_claim,
    label_owners,
    label_patch,
    label_safe,
    node_labels_for,
)


@pytest.mark.parametrize(
    ("value", "decimals", "text"),
    [
        pytest.param(153.0, 1, "153", id="integral"),
        pytest.param(48.25, 1, "48.2", id="rounded"),
        pytest.param(0.04, 1, "0", id="tiny"),
        pytest.param(4138.4, 0, "4138", id="no-decimals"),
        pytest.param(1e30, 1, "1000000000000000019884624838656", id="huge"),
    ],
)
def test_numbers_become_label_safe_strings(value: float, decimals: int, text: str) -> None:
    assert format_label_value(value, decimals) == text
    assert LABEL_VALUE.fullmatch(text)
    assert len(text) <= 63


@pytest.mark.parametrize("value", [-1.0, math.inf, math.nan, 1e70])
def test_numbers_without_a_label_form_are_refused(value: float) -> None:
    with pytest.raises(ValueError, match="label value"):
        format_label_value(value)


def test_node_labels_describe_the_given_device_and_name_the_owner() -> None:
    described = gpu(ridge=187.4, min_batch=256, bandwidth=4.1e12)
    labels = node_labels_for(described, "fleet")
    assert labels == {
        "roofline.dev/ridge-point": "187.4",
        "roofline.dev/min-batch": "256",
        "roofline.dev/bandwidth-gbps": "4100",
        "roofline.dev/peak-tflops": "768.3",
        "roofline.dev/profile": "fleet",
        "roofline.dev/class": label_safe(described.product),
        "roofline.dev/device": "gpu",
    }
    assert all(LABEL_VALUE.fullmatch(v) for v in labels.values())


@pytest.mark.parametrize(
    ("product", "device"),
    [
        pytest.param("NVIDIA H200", "gpu", id="gpu-with-spaces"),
        pytest.param("NVIDIA-H200", "gpu", id="already-label-safe"),
        pytest.param("AMD EPYC 9654 96-Core Processor", "cpu", id="cpu-model"),
        pytest.param("Intel(R) Xeon(R) Platinum 8480+", "cpu", id="cpu-with-symbols"),
        pytest.param("x" * 64, "gpu", id="longest-device-name"),
    ],
)
def test_the_class_label_is_the_label_safe_measured_product_and_the_device_its_kind(
    product: str, device: str
) -> None:
    """The contract exported Kueue flavors select by: ``label_safe(status.nodes[].product)``."""
    labels = node_labels_for(replace(gpu(), product=product), "fleet", device)
    assert labels["roofline.dev/class"] == label_safe(product)
    assert labels["roofline.dev/device"] == device
    assert LABEL_VALUE.fullmatch(labels["roofline.dev/class"])
    assert len(labels["roofline.dev/class"]) <= 63


def test_a_device_kind_that_is_no_spec_device_has_no_label() -> None:
    with pytest.raises(ValueError, match="device 'tpu'"):
        node_labels_for(gpu(), "fleet", "tpu")


def test_removing_labels_deletes_the_class_and_device_labels_too() -> None:
    current = node_labels_for(gpu(), "fleet")
    patch = label_patch({**current, "team": "a"}, None) or {}
    assert patch["roofline.dev/class"] is None
    assert patch["roofline.dev/device"] is None
    assert "team" not in patch


def test_a_label_patch_touches_only_what_differs() -> None:
    current = {"roofline.dev/min-batch": "256", "roofline.dev/profile": "fleet", "team": "a"}
    desired = {
        "roofline.dev/min-batch": "256",
        "roofline.dev/profile": "fleet",
        "roofline.dev/ridge-point": "180",
    }
    assert label_patch(current, desired) == {"roofline.dev/ridge-point": "180"}
    assert label_patch(desired, desired) is None


def test_removing_labels_deletes_only_our_keys() -> None:
    current = {"roofline.dev/min-batch": "256", "roofline.dev/profile": "fleet", "team": "a"}
    assert label_patch(current, None) == {
        "roofline.dev/min-batch": None,
        "roofline.dev/profile": None,
    }
    assert label_patch({"team": "a"}, None) is None
    assert set(NODE_LABEL_KEYS) >= set(label_patch(current, None) or {})


LONG_NODE = "ip-10-0-0-1." + "eu-west-1.compute.internal." * 6 + "example"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(LONG_NODE, id="long-dns-name"),
        pytest.param("a" * 60 + "." + "b" * 30, id="dot-at-the-cut"),
        pytest.param("x" * 253, id="longest-name"),
        pytest.param("-" * 70, id="no-alphanumeric-prefix"),
    ],
)
def test_a_name_too_long_for_a_label_becomes_a_short_valid_distinct_value(name: str) -> None:
    value = label_safe(name)
    assert len(value) <= 63
    assert LABEL_VALUE.fullmatch(value)
    assert value == label_safe(name)
    assert value != label_safe(name[:-1] + "z")


def test_a_name_that_is_a_valid_label_value_stays_as_it_is() -> None:
    assert label_safe("gpu-node-7.example") == "gpu-node-7.example"
    assert label_safe("n" * 63) == "n" * 63


def test_a_long_profile_name_owns_labels_by_its_label_safe_form() -> None:
    labels = node_labels_for(gpu(), "p" * 100)
    assert labels["roofline.dev/profile"] == label_safe("p" * 100)
    assert all(LABEL_VALUE.fullmatch(v) and len(v) <= 63 for v in labels.values())


def test_the_oldest_profile_owns_a_shared_node_then_the_first_by_name() -> None:
    nodes = [
        node("a", labels={"ab": "y"}),
        node("b", labels={"ab": "y", "bc": "y"}),
        node("c", labels={"bc": "y"}),
    ]
    owners = label_owners(
        [
            LabelClaim("young", 200.0, spec(nodeSelector={"ab": "y"}).selection),
            LabelClaim("old", 100.0, spec(nodeSelector={"ab": "y", "bc": "y"}).selection),
            LabelClaim("also-old", 100.0, spec(nodeSelector={"bc": "y"}).selection),
            LabelClaim("oldest-but-not-labelling", 1.0, None),
        ],
        nodes,
    )
    assert owners == {"a": "young", "b": "also-old", "c": "also-old"}


@pytest.mark.parametrize(
    ("body", "claims"),
    [
        pytest.param({"spec": {"nodeSelector": {"pool": "h200"}}}, True, id="labelling"),
        pytest.param({"spec": {"labelNodes": False}}, False, id="label-nodes-off"),
        pytest.param({"spec": {"maxParallel": "many"}}, False, id="invalid-spec"),
        pytest.param(
            {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}},
            False,
            id="being-deleted",
        ),
    ],
)
def test_only_a_valid_labelling_profile_claims_nodes(body: dict[str, object], claims: bool) -> None:
    created = {"creationTimestamp": "2026-01-01T00:00:00Z"}
    metadata = {**created, **body.get("metadata", {})}  # type: ignore[dict-item]
    claim = label_claim("p", {**body, "metadata": metadata})
    assert claim.created_at == 1767225600.0
    assert (claim.selection is not None) is claims


def test_a_name_with_a_trailing_newline_is_not_a_label_value_as_it_is() -> None:
    safe = label_safe("fleet\n")
    assert safe != "fleet\n"
    assert LABEL_VALUE.fullmatch(safe)
