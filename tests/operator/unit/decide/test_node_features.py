"""The NodeFeature objects through which Node Feature Discovery labels nodes for a profile."""

from __future__ import annotations

import re

import pytest

from roofline_operator.decide.labels import label_safe
from roofline_operator.decide.node_features import (
    NFD_NODE_NAME_LABEL,
    build_node_feature,
    node_feature_name,
    profile_selector,
)

#: An object name: a DNS subdomain (lower-case alphanumerics and dashes here) of at most 253.
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABELS = {"roofline.dev/ridge-point": "187.4", "roofline.dev/profile": "fleet"}


@pytest.mark.parametrize(
    ("profile", "node"),
    [
        pytest.param("fleet", "gpu-node-17", id="plain"),
        pytest.param("Fleet_A", "gpu.node.17.example.com", id="dots-and-capitals"),
        pytest.param("p" * 253, "n" * 253, id="longest"),
        pytest.param("...", "___", id="nothing-valid"),
    ],
)
def test_the_object_name_is_valid_and_at_most_200_characters(profile: str, node: str) -> None:
    name = node_feature_name(profile, node)
    assert OBJECT_NAME.match(name), name
    assert len(name) <= 200


def test_the_object_name_reads_as_profile_and_node_with_a_digest() -> None:
    assert re.fullmatch(
        r"roofline-fleet-gpu-node-17-[0-9a-f]{8}", node_feature_name("fleet", "gpu-node-17")
    )
    assert node_feature_name("Fleet_A", "gpu.node").startswith("roofline-fleet-a-gpu-node-")


def test_names_that_the_shortening_merges_stay_apart() -> None:
    stem = "n" * 150
    assert node_feature_name("fleet", stem + "a") != node_feature_name("fleet", stem + "b")
    assert node_feature_name("fleet-a", "b") != node_feature_name("fleet", "a-b")
    assert node_feature_name("fleet", "a") == node_feature_name("fleet", "a")


def test_the_object_carries_exactly_the_labels_for_its_node_in_the_operators_namespace() -> None:
    body = build_node_feature("gpu-node-17", LABELS, "fleet", "roofline-system")
    assert body["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1"
    assert body["kind"] == "NodeFeature"
    metadata = body["metadata"]
    assert metadata["name"] == node_feature_name("fleet", "gpu-node-17")
    assert metadata["namespace"] == "roofline-system"
    assert metadata["labels"][NFD_NODE_NAME_LABEL] == "gpu-node-17"
    assert body["spec"] == {"labels": LABELS}
    assert "annotations" not in metadata


def test_the_object_copies_the_labels_it_is_given() -> None:
    labels = dict(LABELS)
    body = build_node_feature("a", labels, "fleet", "roofline-system")
    labels["roofline.dev/min-batch"] = "256"
    assert body["spec"]["labels"] == LABELS


def test_a_profile_that_labels_nothing_still_keeps_its_record_annotation() -> None:
    record = {"record.roofline.dev/fleet": '{"state":"Profiled"}'}
    body = build_node_feature("a", {}, "fleet", "roofline-system", annotations=record)
    assert body["spec"] == {"labels": {}}
    assert body["metadata"]["annotations"] == record


@pytest.mark.parametrize("profile", ["fleet", "f" * 120], ids=["short", "longer-than-a-label"])
def test_the_profile_selector_selects_the_profiles_own_objects_only(profile: str) -> None:
    def selected(body: dict[str, object], selector: str) -> bool:
        labels = body["metadata"]["labels"]  # type: ignore[index]
        return all(labels.get(k) == v for k, v in (t.split("=") for t in selector.split(",")))

    own = build_node_feature("a", LABELS, profile, "roofline-system")
    other = build_node_feature("a", LABELS, "other", "roofline-system")
    assert own["metadata"]["labels"]["roofline.dev/profile"] == label_safe(profile)
    assert selected(own, profile_selector(profile))
    assert not selected(other, profile_selector(profile))
