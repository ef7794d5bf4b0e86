"""Model plans through the whole operator: spec to pods, pods' results to status and metrics.

Profiler pods succeed at once with synthetic results whose plans follow the pod's
``--models-json`` (``harness.faults.synthetic_plans``), so these tests check what the operator
sends and publishes; ``test_operator_models_real.py`` runs the real profiler.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.model_configs import TINY_LLAMA
from tests.operator.harness import (
    Cluster,
    FaultMode,
    Kubectl,
    OperatorFactory,
    OperatorProcess,
    wait_for,
)
from tests.operator.harness.faults import SyntheticGpu
from tests.operator.harness.profiles import (
    CRD_PATH,
    GROUP,
    PLURAL,
    condition,
    example_profile,
    models_planned,
    node_entries,
    profile_status,
    wait_for_nodes,
)

TWO_MODELS = [
    {"name": "Llama-3.1-8B-Instruct", "preset": "llama-3.1-8b", "contextTokens": 8192},
    {"name": "tiny", "config": TINY_LLAMA, "contextTokens": 2048},
]
NAMESPACE = "roofline-system"


def model_entries(cluster: Cluster, profile: str, node: str) -> dict[str, dict[str, Any]]:
    entry = node_entries(cluster, profile).get(node, {})
    return {m["name"]: m for m in entry.get("models", [])}


def model_series(operator: OperatorProcess, profile: str) -> set[tuple[str, str]]:
    """``(node, model)`` of every ``roofline_model_max_batch`` series of ``profile``."""
    return {
        (labels["node"], labels["model"])
        for labels, _ in operator.samples("roofline_model_max_batch")
        if labels.get("profile") == profile
    }


pytestmark = pytest.mark.usefixtures("shared_operator")


def test_two_models_on_two_nodes_reach_status_metrics_and_kubectl(
    shared_cluster: Cluster, shared_operator: OperatorProcess, kubectl: Kubectl
) -> None:
    nodes = ["two-a", "two-b"]
    for node in nodes:
        shared_cluster.add_gpu_node(node, labels={"suite": "two"}, gpus=2)
    spec = {"models": TWO_MODELS, "slo": {"interTokenLatency": "50ms"}, "gpuHourCost": "2.50"}
    spec["gpusPerNode"] = 0  # both GPUs of each node, so that each gets its own plan
    shared_cluster.create(PLURAL, example_profile("two", {"suite": "two"}, **spec), group=GROUP)
    names = [m["name"] for m in TWO_MODELS]
    wait_for_nodes(shared_cluster, "two", models_planned(names), nodes, timeout=45)
    status = profile_status(shared_cluster, "two")
    for node in nodes:
        entries = model_entries(shared_cluster, "two", node)
        llama = entries["Llama-3.1-8B-Instruct"]
        assert llama["contextTokens"] == 8192
        assert llama["maxBatch"] == min(llama["maxBatchByMemory"], llama["maxBatchByLatency"])
        assert llama["kvCacheTokens"] == llama["maxBatchByMemory"] * 8192
        assert llama["costPerMillionTokensAtMaxBatch"] > 0
    summary = {m["name"]: m for m in status["models"]}
    assert summary["tiny"]["nodes"] == 2
    assert set(summary["tiny"]["maxBatchByMemory"]) == {"min", "median", "max"}
    assert status["summary"]["models"] == 2
    assert condition(status, "ModelsReady")["status"] == "True"
    assert condition(status, "Ready")["status"] == "True"

    wait_for(
        lambda: model_series(shared_operator, "two") == {(n, m) for n in nodes for m in names},
        timeout=20,
        what="a model series per node and model",
    )
    per_gpu = [
        labels
        for labels, _ in shared_operator.samples("roofline_model_recommended_min_batch")
        if labels.get("profile") == "two" and labels["node"] == "two-a"
    ]
    assert {(s["gpu"], s["model"]) for s in per_gpu} == {(g, m) for g in "01" for m in names}

    rows = kubectl.table("rooflineprofiles")
    assert next(r for r in rows if r["NAME"] == "two")["MODELS"] == "2"
    path = '{.status.nodes[?(@.name=="two-a")].models[?(@.name=="tiny")].maxBatch}'
    shown = kubectl("get", "rp", "two", "-o", f"jsonpath={path}").stdout.strip()
    assert shown == str(model_entries(shared_cluster, "two", "two-a")["tiny"]["maxBatch"])


def test_a_bad_inline_config_fails_that_model_alone(shared_cluster: Cluster) -> None:
    nodes = ["badcfg-a", "badcfg-b"]
    for node in nodes:
        shared_cluster.add_gpu_node(node, labels={"suite": "badcfg"})
    broken = {k: v for k, v in TINY_LLAMA.items() if k != "num_attention_heads"}
    models = [TWO_MODELS[1], {"name": "broken", "config": broken}]
    shared_cluster.create(
        PLURAL, example_profile("badcfg", {"suite": "badcfg"}, models=models), group=GROUP
    )
    wait_for_nodes(shared_cluster, "badcfg", models_planned(["tiny"]), nodes, timeout=45)
    for node in nodes:
        broken_entry = model_entries(shared_cluster, "badcfg", node)["broken"]
        assert broken_entry["reason"] == "InvalidModel"
        assert "spec.models[1].config" in broken_entry["message"]
        assert "num_attention_heads" in broken_entry["message"]
    status = profile_status(shared_cluster, "badcfg")
    assert condition(status, "Ready")["status"] == "True"
    models_ready = condition(status, "ModelsReady")
    assert (models_ready["status"], models_ready["reason"]) == ("False", "InvalidModel")
    assert status["summary"]["models"] == 1


def test_a_missing_config_map_fails_its_model_until_it_is_created(shared_cluster: Cluster) -> None:
    nodes = ["cm-a", "cm-b"]
    for node in nodes:
        shared_cluster.add_gpu_node(node, labels={"suite": "cm"})
    models = [TWO_MODELS[1], {"name": "mapped", "configMapRef": {"name": "mapped-config"}}]
    shared_cluster.create(
        PLURAL, example_profile("cm", {"suite": "cm"}, models=models), group=GROUP
    )
    wait_for_nodes(shared_cluster, "cm", models_planned(["tiny"]), nodes, timeout=45)
    entry = model_entries(shared_cluster, "cm", "cm-a")["mapped"]
    assert entry["reason"] == "ConfigMapNotFound"
    assert entry["message"] == (
        f"spec.models[1].configMapRef.name: ConfigMap {NAMESPACE}/mapped-config not found"
    )
    assert condition(profile_status(shared_cluster, "cm"), "ModelsReady")["reason"] == (
        "ConfigMapNotFound"
    )
    shared_cluster.create(
        "configmaps",
        {"metadata": {"name": "mapped-config"}, "data": {"config.json": json.dumps(TINY_LLAMA)}},
        namespace=NAMESPACE,
    )
    wait_for_nodes(shared_cluster, "cm", models_planned(["tiny", "mapped"]), nodes, timeout=90)
    assert condition(profile_status(shared_cluster, "cm"), "ModelsReady")["status"] == "True"


def test_a_model_removed_from_the_spec_leaves_status_and_metrics(
    shared_cluster: Cluster, shared_operator: OperatorProcess
) -> None:
    shared_cluster.add_gpu_node("rm-a", labels={"suite": "rm"})
    profile = example_profile("rm", {"suite": "rm"}, models=TWO_MODELS)
    shared_cluster.create(PLURAL, profile, group=GROUP)
    names = [m["name"] for m in TWO_MODELS]
    wait_for_nodes(shared_cluster, "rm", models_planned(names), ["rm-a"], timeout=45)
    wait_for(
        lambda: model_series(shared_operator, "rm") == {("rm-a", n) for n in names},
        timeout=20,
        what="both models' series",
    )
    shared_cluster.patch(PLURAL, "rm", {"spec": {"models": TWO_MODELS[1:]}}, group=GROUP)
    wait_for_nodes(shared_cluster, "rm", models_planned(["tiny"]), ["rm-a"], timeout=45)
    status = profile_status(shared_cluster, "rm")
    assert [m["name"] for m in status["models"]] == ["tiny"]
    assert status["summary"]["models"] == 1
    wait_for(
        lambda: model_series(shared_operator, "rm") == {("rm-a", "tiny")},
        timeout=20,
        what="the removed model's series to vanish",
    )


def test_the_worst_case_payload_of_eight_gpus_and_eight_models_arrives_whole(
    shared_cluster: Cluster,
) -> None:
    """Eight GPUs with names of 64 characters, eight models named with 63: every plan number of
    every GPU must come through the 4096-byte termination message."""
    gpus = tuple(SyntheticGpu(name=f"NVIDIA H200 NVL {i} ".ljust(64, "x")) for i in range(8))
    shared_cluster.add_gpu_node("worst-a", labels={"suite": "worst"}, gpus=8, synthetic_gpus=gpus)
    models = [
        {"name": f"{i}-".ljust(63, "m"), "config": TINY_LLAMA, "contextTokens": 1048576}
        for i in range(8)
    ]
    profile = example_profile(
        "worst",
        {"suite": "worst"},
        models=models,
        slo={"interTokenLatency": "50ms"},
        gpusPerNode=0,
    )
    shared_cluster.create(PLURAL, profile, group=GROUP)
    names = [m["name"] for m in models]
    entries = wait_for_nodes(
        shared_cluster, "worst", models_planned(names), ["worst-a"], timeout=45
    )
    assert len(entries["worst-a"]["devices"]) == 8
    for entry in entries["worst-a"]["models"]:
        assert {"minBatch", "maxBatchByMemory", "maxBatchByLatency"} <= set(entry)


@pytest.mark.slow
def test_an_operator_restart_keeps_the_plans(
    instant_cluster: Cluster, start_operator: OperatorFactory
) -> None:
    instant_cluster.apply_manifest(CRD_PATH)
    instant_cluster.add_gpu_node(
        "keep-a", labels={"suite": "keep"}, mode=FaultMode.SUCCEED_INSTANTLY
    )
    first = start_operator(instant_cluster)
    instant_cluster.create(
        PLURAL, example_profile("keep", {"suite": "keep"}, models=TWO_MODELS), group=GROUP
    )
    names = [m["name"] for m in TWO_MODELS]
    wait_for_nodes(instant_cluster, "keep", models_planned(names), ["keep-a"], timeout=45)
    before = model_entries(instant_cluster, "keep", "keep-a")
    first.kill()
    second = start_operator(instant_cluster)
    wait_for(
        lambda: model_series(second, "keep") == {("keep-a", n) for n in names},
        timeout=30,
        what="the restarted operator to publish the kept plans",
    )
    assert len(instant_cluster.runs(["keep-a"])) == 1, "the plans were kept, not re-measured"
    assert model_entries(instant_cluster, "keep", "keep-a") == before
    min_batch = second.sample("roofline_model_recommended_min_batch", profile="keep", model="tiny")
    assert min_batch == before["tiny"]["minBatch"]
