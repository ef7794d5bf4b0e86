"""Two models on two nodes with real profiler pods: ``roofline profile --models-json`` measures
each model's decode step on the node's CPU and the plans come back through the termination
message into status and metrics."""

from __future__ import annotations

import pytest
from tests.model_configs import TINY_LLAMA
from tests.operator.harness import Cluster, OperatorFactory, wait_for
from tests.operator.harness.profiles import (
    CRD_PATH,
    GROUP,
    ON_CPU,
    PLURAL,
    condition,
    example_profile,
    models_planned,
    profile_status,
)
from tests.operator.harness.profiles import wait_for_nodes as wait_for_entries

NODES = ["real-a", "real-b"]
MODELS = [
    {"name": "tiny-llama", "config": TINY_LLAMA, "contextTokens": 512},
    {"name": "tiny-gqa", "config": {**TINY_LLAMA, "num_key_value_heads": 1}, "contextTokens": 1024},
]


@pytest.mark.slow
def test_real_profiler_pods_plan_two_models_on_two_nodes(
    cluster: Cluster, start_operator: OperatorFactory
) -> None:
    cluster.apply_manifest(CRD_PATH)
    for node in NODES:
        cluster.add_gpu_node(node, labels={"suite": "real"})
    operator = start_operator(cluster)
    # The real profiler measures this machine's CPU, which the profile says (device: cpu).
    spec = {"models": MODELS, "slo": {"interTokenLatency": "10s"}, "maxParallel": 2, **ON_CPU}
    cluster.create(PLURAL, example_profile("real", {"suite": "real"}, **spec), group=GROUP)
    names = [m["name"] for m in MODELS]
    entries = wait_for_entries(cluster, "real", models_planned(names), NODES, timeout=300)
    for node in NODES:
        plans = {m["name"]: m for m in entries[node]["models"]}
        assert plans["tiny-llama"]["contextTokens"] == 512
        assert plans["tiny-gqa"]["contextTokens"] == 1024
        for plan in plans.values():
            assert plan["maxBatchByMemory"] > 0
            assert "maxBatchByLatency" in plan
    status = profile_status(cluster, "real")
    assert condition(status, "ModelsReady")["status"] == "True"
    assert status["summary"]["models"] == 2
    wait_for(
        lambda: (
            {
                (labels["node"], labels["model"])
                for labels, _ in operator.samples("roofline_model_max_batch")
                if labels.get("profile") == "real"
            }
            == {(n, m) for n in NODES for m in names}
        ),
        timeout=20,
        what="a model series per node and model",
    )
