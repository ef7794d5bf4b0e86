"""The profiler container's resources: memory sized from measurement unless the profile says."""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.unit.operator_builders import GPU, spec

from roofline_operator.decide.pod_resources import DEFAULT_MEMORY, container_resources


def memory_of(**fields: Any) -> tuple[object, object]:
    resources = container_resources(spec(**fields), gpus=2)
    return resources["requests"]["memory"], resources["limits"]["memory"]


def test_a_pod_gets_a_memory_request_and_limit_by_default_so_it_is_not_best_effort() -> None:
    assert memory_of() == DEFAULT_MEMORY["gpu"] == ("2Gi", "8Gi")
    assert memory_of(device="cpu") == DEFAULT_MEMORY["cpu"] == ("4Gi", "12Gi")
    planned = memory_of(device="cpu", models=[{"name": "m", "preset": "llama-3.1-8b"}])
    assert planned == DEFAULT_MEMORY["cpu"], "a model plan's buffers are bounded: the same sizes"


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param({"limits": {"memory": "16Gi"}}, ("2Gi", "16Gi"), id="larger-limit"),
        pytest.param({"limits": {"memory": "1Gi"}}, ("1Gi", "1Gi"), id="limit-below-request"),
        pytest.param({"requests": {"memory": "3Gi"}}, ("3Gi", "8Gi"), id="larger-request"),
        pytest.param({"requests": {"memory": "20Gi"}}, ("20Gi", "20Gi"), id="request-above-limit"),
        pytest.param(
            {"requests": {"memory": 1 << 30}, "limits": {"memory": "2G"}},
            (1 << 30, "2G"),
            id="both",
        ),
    ],
)
def test_a_profile_overrides_the_memory_never_with_a_request_above_the_limit(
    resources: dict[str, Any], expected: tuple[object, object]
) -> None:
    assert memory_of(resources=resources) == expected


def test_the_gpus_are_a_limit_and_a_cpu_profile_asks_for_none() -> None:
    gpu = container_resources(spec(resources={"requests": {"cpu": "2"}}), gpus=2)
    assert gpu["limits"][GPU] == "2"
    assert gpu["requests"] == {"cpu": "2", "memory": "2Gi"}
    assert GPU not in container_resources(spec(device="cpu"), gpus=1)["limits"]
