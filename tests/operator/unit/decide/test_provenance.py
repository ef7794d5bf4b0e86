"""Only the profiler pods the operator created count; look-alikes are ignored and reported."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.operator.unit.operator_builders import succeeded_pod

from roofline_operator.decide.pods import PodFacts, ProfileRef, profiler_pod_name
from roofline_operator.decide.provenance import (
    FOREIGN_EVENT_INTERVAL_SECONDS,
    ForeignPodLog,
    foreign_reason,
    partition,
)

PROFILE = ProfileRef("fleet", "u")
NAMESPACES = {"roofline-system"}


def genuine(node: str = "a", attempt: int = 1) -> PodFacts:
    name = profiler_pod_name("fleet", node, "h", attempt)
    return succeeded_pod(name, node, "h", attempt, owner_uids=("u",))


def test_a_pod_the_operator_created_is_its_own() -> None:
    assert foreign_reason(genuine(), PROFILE, NAMESPACES) is None


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        pytest.param({"namespace": "tenant-a"}, "namespace 'tenant-a'", id="other-namespace"),
        pytest.param({"owner_uids": ()}, "owner reference", id="no-owner"),
        pytest.param({"owner_uids": ("someone-else",)}, "owner reference", id="other-owner"),
        pytest.param({"attempt": 99}, "name is not", id="edited-attempt"),
        pytest.param({"spec_hash": "other"}, "name is not", id="edited-spec-hash"),
        pytest.param({"node": "b"}, "name is not", id="edited-node"),
    ],
)
def test_a_look_alike_pod_is_foreign_with_a_reason(changes: dict[str, object], why: str) -> None:
    pod = replace(genuine(), **changes)
    reason = foreign_reason(pod, PROFILE, NAMESPACES)
    assert reason is not None
    assert why in reason


def test_a_profile_without_a_uid_owns_no_pod() -> None:
    assert foreign_reason(genuine(), ProfileRef("fleet", ""), NAMESPACES) is not None


def test_partition_keeps_the_order_of_the_profiles_own_pods() -> None:
    pods = [genuine("a"), replace(genuine("b"), namespace="tenant-a"), genuine("c")]
    found = partition(pods, PROFILE, NAMESPACES)
    assert [p.node for p in found.own] == ["a", "c"]
    assert [p.node for p, _ in found.foreign] == ["b"]


def test_each_foreign_pod_is_counted_once_and_reported_at_most_hourly() -> None:
    log = ForeignPodLog()
    first = [(replace(genuine("a"), namespace="t"), "x")]
    assert log.record(first, now=0.0) == (1, True)
    assert log.record(first, now=10.0) == (0, False)
    second = [*first, (replace(genuine("b"), namespace="t"), "x")]
    assert log.record(second, now=20.0) == (1, False), "within the hour: counted, not reported"
    assert log.record(second, now=FOREIGN_EVENT_INTERVAL_SECONDS) == (0, True)
    assert log.record(second, now=2 * FOREIGN_EVENT_INTERVAL_SECONDS) == (0, False)
