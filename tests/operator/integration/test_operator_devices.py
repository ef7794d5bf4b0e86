"""A pod must measure what it was given: a GPU, in the dtype and shape it was asked for.

On a real node a profiler container that saw no GPU (no runtime class, a broken device plugin, a
driver mismatch) measured the CPU, exited 0, and its numbers became the GPU node's labels. Here
the emulated kubelet runs the pods' real commands on this machine, which has no GPU: a GPU
profile's pod (``--device cuda``) fails as such a container now does, and the ``CPU_FALLBACK``
node plays a profiler image that measured the CPU anyway. Either way the node ends ``Failed``
with the cause in its status and a Warning Event, and nothing of it is published.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests.operator.harness import Cluster, FaultMode, OperatorFactory, wait_for
from tests.operator.harness.profiles import (
    CRD_PATH,
    GROUP,
    ON_CPU,
    PLURAL,
    example_profile,
    our_labels,
    profiled,
    state_is,
    wait_for_nodes,
)

#: The likely causes a GPU pod that saw no GPU names, in its status message.
CAUSES = ("runtime class", "device plugin", "driver")


def warnings_of(cluster: Cluster, profile: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.list("events", namespace="default")
        if e.get("reason") == reason
        and e.get("type") == "Warning"
        and (e.get("involvedObject") or {}).get("name") == profile
    ]


def fails_with(cluster: Cluster, profile: str, node: str, reason: str) -> dict[str, Any]:
    """The node's status entry once it failed for good, and the profile's Warning Event."""
    entry = wait_for_nodes(
        cluster, profile, state_is("Failed"), [node], timeout=120, what=f"{node} to fail"
    )[node]
    assert entry["reason"] == reason, entry
    assert our_labels(cluster, node) == {}, "nothing of a refused result is published"
    events = wait_for(
        lambda: warnings_of(cluster, profile, reason), timeout=30, what=f"a {reason} Warning"
    )
    assert node in events[0]["message"]
    return entry


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_gpu_profiles_pod_that_sees_no_gpu_fails_instead_of_measuring_the_cpu(
    cluster: Cluster, start_operator: OperatorFactory
) -> None:
    """The real profiler, given ``--device cuda`` where there is none, refuses to start."""
    cluster.apply_manifest(CRD_PATH)
    cluster.add_gpu_node("no-gpu-visible", labels={"suite": "no-gpu"})
    start_operator(cluster)
    profile = example_profile("no-gpu", {"suite": "no-gpu"}, maxAttempts=1)
    cluster.create(PLURAL, profile, group=GROUP)
    entry = fails_with(cluster, "no-gpu", "no-gpu-visible", "PodFailed")
    assert "device 'cuda' is not available" in entry["message"]
    for cause in CAUSES:
        assert cause in entry["message"]


@pytest.mark.slow
def test_a_gpu_pod_that_measured_the_cpu_fails_its_node_as_wrong_device(
    cluster: Cluster, start_operator: OperatorFactory
) -> None:
    """What the real node showed: the profiler fell back to the CPU and exited 0. The real
    profiler runs (on the CPU) and reports it; the operator refuses its numbers."""
    cluster.apply_manifest(CRD_PATH)
    cluster.add_gpu_node("fell-back", labels={"suite": "fallback"}, mode=FaultMode.CPU_FALLBACK)
    cluster.add_gpu_node("fine", labels={"suite": "fallback"}, mode=FaultMode.SUCCEED_INSTANTLY)
    operator = start_operator(cluster)
    profile = example_profile("fallback", {"suite": "fallback"}, maxAttempts=1)
    cluster.create(PLURAL, profile, group=GROUP)
    entry = fails_with(cluster, "fallback", "fell-back", "WrongDevice")
    assert "instead of the GPU" in entry["message"]
    for cause in CAUSES:
        assert cause in entry["message"]
    wait_for_nodes(cluster, "fallback", profiled, ["fine"])
    assert our_labels(cluster, "fine")["roofline.dev/profile"] == "fallback"
    assert operator.sample("roofline_ridge_point", node="fell-back") is None
    failures = operator.sample(
        "roofline_profile_failures_total", profile="fallback", reason="WrongDevice"
    )
    assert failures == 1


@pytest.mark.slow
def test_the_same_pod_on_a_cpu_profile_is_published(
    cluster: Cluster, start_operator: OperatorFactory
) -> None:
    """CPU profiling stays possible where the profile says so: the same real run succeeds."""
    cluster.apply_manifest(CRD_PATH)
    cluster.add_gpu_node("cpu-serving", labels={"suite": "cpu"}, mode=FaultMode.CPU_FALLBACK)
    start_operator(cluster)
    cluster.create(PLURAL, example_profile("cpu", {"suite": "cpu"}, **ON_CPU), group=GROUP)
    wait_for_nodes(cluster, "cpu", profiled, ["cpu-serving"], timeout=120)
    assert our_labels(cluster, "cpu-serving")["roofline.dev/profile"] == "cpu"


def test_a_result_of_another_dtype_and_shape_than_asked_is_refused(
    instant_cluster: Cluster, start_operator: OperatorFactory
) -> None:
    """A float32, 1x1 result under a bfloat16 profile (an image that ignores the flags) fails
    its node with the field named, and is never published."""
    cluster = instant_cluster
    cluster.apply_manifest(CRD_PATH)
    cluster.add_gpu_node("other-dtype", labels={"suite": "dtype"}, mode=FaultMode.MISMATCHED_RESULT)
    start_operator(cluster)
    spec = {"dtype": "bfloat16", "maxAttempts": 1}
    cluster.create(PLURAL, example_profile("dtype", {"suite": "dtype"}, **spec), group=GROUP)
    entry = fails_with(cluster, "dtype", "other-dtype", "InvalidResult")
    assert entry["message"] == "result: field 'dt' is float32, the pod asked for bfloat16"
