"""The reconcile loop with models (ConfigMaps read, pods' arguments) and the NodeFeature backend."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from tests.model_configs import QUANTIZATION_CONFIGS, TINY_LLAMA
from tests.operator.unit.model_builders import plan
from tests.operator.unit.model_client import ENV, ModelClient, loop_with
from tests.operator.unit.operator_builders import device, fresh_succeeded_pod, node, profile

from roofline_operator.core.names import LABEL_PROFILE, NODE_LABEL_KEYS
from roofline_operator.decide.labels import label_claim, label_safe
from roofline_operator.decide.node_features import build_node_feature, node_feature_name
from roofline_operator.decide.pods import pod_facts
from roofline_operator.run import model_delivery
from roofline_operator.run.kubeapi import ApiError
from roofline_operator.run.reconcile import ProfileLoop
from roofline_operator.run.release import release_profile
from roofline_profiler.wire.compact import encode_compact

pytestmark = pytest.mark.usefixtures("quiet_events")


MODELS = [
    {"name": "tiny", "config": TINY_LLAMA, "contextTokens": 2048},
    {"name": "mapped", "configMapRef": {"name": "cfg"}},
    {"name": "lost", "configMapRef": {"name": "gone"}},
]


@pytest.mark.asyncio
async def test_pods_get_the_valid_models_and_the_missing_config_map_fails_its_model() -> None:
    client = ModelClient({("ns", "cfg"): {"config.json": json.dumps(TINY_LLAMA)}})
    loop = loop_with(client, {"models": MODELS, "slo": {"interTokenLatency": "20ms"}}, ENV)
    await loop.round({"a": node("a")}, [], {})
    command = client.created[0]["spec"]["containers"][0]["command"]
    models = client.models_of(client.created[0])
    assert [m["name"] for m in models] == ["tiny", "mapped"]
    assert command[command.index("--itl-slo") + 1] == "0.02s"
    status = client.statuses[-1]
    ready = {c["type"]: c for c in status["conditions"]}["ModelsReady"]
    assert ready["reason"] == "ConfigMapNotFound"
    assert "spec.models[2].configMapRef.name" in ready["message"]
    assert sorted(client.config_map_reads) == [("ns", "cfg"), ("ns", "gone")]


@pytest.mark.asyncio
async def test_config_maps_are_read_again_only_after_a_while() -> None:
    client = ModelClient({})
    loop = loop_with(client, {"models": MODELS[1:2]}, ENV)
    for _ in range(3):
        await loop.round({"a": node("a")}, [], {})
    assert client.config_map_reads == [("ns", "cfg")]


@pytest.mark.asyncio
async def test_a_changed_config_map_reprofiles_the_nodes() -> None:
    client = ModelClient({("ns", "cfg"): {"config.json": json.dumps(TINY_LLAMA)}})
    loop = loop_with(client, {"models": MODELS[1:2]}, ENV)
    await loop.round({"a": node("a")}, [], {})
    first = pod_facts(client.created[0]).spec_hash
    larger = {**TINY_LLAMA, "num_hidden_layers": 4}
    client.config_maps[("ns", "cfg")] = {"config.json": json.dumps(larger)}
    loop.models.config_maps.clear()
    await loop.round({"a": node("a"), "b": node("b")}, [], {})
    assert pod_facts(client.created[-1]).node == "b"
    assert pod_facts(client.created[-1]).spec_hash != first


@pytest.mark.asyncio
async def test_plans_reach_status_and_a_removed_model_leaves_it() -> None:
    client = ModelClient({})
    spec = {"models": MODELS[:1]}
    loop = loop_with(client, spec, ENV)
    await loop.round({"a": node("a")}, [], {})
    pod = pod_facts(client.created[0])
    message = encode_compact(
        profile(replace(device(), models=(plan("tiny"),)), created_at=time.time())
    )
    done = fresh_succeeded_pod(
        pod.name, pod.node, pod.spec_hash, pod.attempt, namespace=pod.namespace, message=message
    )
    await loop.round({"a": node("a")}, [done], {})
    status = client.statuses[-1]
    (entry,) = status["nodes"][0]["models"]
    assert (entry["name"], entry["minBatch"], entry["maxBatch"]) == ("tiny", 32, 128)
    assert status["summary"]["models"] == 1
    loop.body = {**loop.body, "spec": {"nodeSelector": {"pool": "h200"}}}
    await loop.round({"a": node("a")}, [], {})
    status = client.statuses[-1]
    assert status["models"] is None
    assert "models" not in status["nodes"][0]
    assert status["summary"]["models"] is None


NFD_ENV = {**ENV, "ROOFLINE_NODE_LABEL_BACKEND": "nodeFeature", "ROOFLINE_OPERATOR_NAMESPACE": "op"}


async def profiled_with_node_features() -> tuple[ModelClient, ProfileLoop, dict[str, Any]]:
    """A loop on the NodeFeature backend after one node's profile succeeded."""
    client = ModelClient({})
    loop = loop_with(client, {}, NFD_ENV)
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    pod = pod_facts(client.created[0])
    done = fresh_succeeded_pod(
        pod.name, pod.node, pod.spec_hash, pod.attempt, namespace=pod.namespace
    )
    await loop.round(nodes, [done], {})
    return client, loop, nodes


@pytest.mark.asyncio
async def test_the_node_feature_backend_writes_objects_instead_of_patching_nodes() -> None:
    client, loop, nodes = await profiled_with_node_features()
    await loop.round(nodes, [], {})  # nfd-master has not labelled the node yet: no rewrite
    assert client.labelled == []
    feature = client.features[node_feature_name("fleet", "a")]
    assert feature["metadata"]["namespace"] == "op"
    assert feature["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] == "a"
    assert feature["spec"]["labels"][LABEL_PROFILE] == "fleet"
    assert set(feature["spec"]["labels"]) == set(NODE_LABEL_KEYS)
    assert feature["spec"]["labels"]["roofline.dev/class"] == label_safe("NVIDIA H200")
    assert feature["spec"]["labels"]["roofline.dev/device"] == "gpu"
    assert json.loads(feature["metadata"]["annotations"]["record.roofline.dev/fleet"])["gpu"] == "0"
    await loop.round({}, [], {})  # the node left
    assert client.feature_deletes == [node_feature_name("fleet", "a")]
    assert client.features == {}


@pytest.mark.asyncio
async def test_with_the_node_feature_backend_a_restart_rebuilds_records_from_the_objects() -> None:
    client, _, nodes = await profiled_with_node_features()

    restarted = loop_with(client, {}, NFD_ENV)
    await restarted.restore(client)  # type: ignore[arg-type]
    client.created.clear()
    await restarted.round(nodes, [], {})
    assert client.created == []
    assert restarted.records["a"].result is not None


def named_loop(client: ModelClient, name: str, created: str, spec: dict[str, Any]) -> ProfileLoop:
    loop = loop_with(client, spec, NFD_ENV)
    loop.name = loop.applier.profile = name
    metadata = {**loop.body["metadata"], "name": name, "creationTimestamp": created}
    loop.body = {**loop.body, "metadata": metadata}
    return loop


async def profile_node(loop: ProfileLoop, client: ModelClient, nodes: dict[str, Any]) -> None:
    created = len(client.created)
    await loop.round(nodes, [], {})
    pods = [pod_facts(body) for body in client.created[created:]]
    done = [
        fresh_succeeded_pod(p.name, p.node, p.spec_hash, p.attempt, namespace=p.namespace)
        for p in pods
    ]
    await loop.round(nodes, done, {})


@pytest.mark.asyncio
async def test_when_label_ownership_moves_the_old_owner_never_deletes_the_new_owners_object() -> (
    None
):
    client = ModelClient({})
    nodes = {"a": node("a")}
    older = named_loop(client, "older", "2026-01-01T00:00:00Z", {})
    younger = named_loop(client, "younger", "2026-06-01T00:00:00Z", {})
    await profile_node(younger, client, nodes)
    younger_object = node_feature_name("younger", "a")
    assert client.features[younger_object]["spec"]["labels"][LABEL_PROFILE] == "younger"
    # The older profile appears and takes the labels: the younger keeps its record, unlabelled.
    claims = {
        "older": label_claim("older", older.body),
        "younger": label_claim("younger", younger.body),
    }
    await profile_node(older, client, nodes)
    await older.round(nodes, [], claims)
    await younger.round(nodes, [], claims)
    older_object = node_feature_name("older", "a")
    assert client.features[older_object]["spec"]["labels"][LABEL_PROFILE] == "older"
    assert client.features[younger_object]["spec"]["labels"] == {}
    assert (
        "record.roofline.dev/younger" in client.features[younger_object]["metadata"]["annotations"]
    )
    assert older_object not in client.feature_deletes


@pytest.mark.asyncio
async def test_a_profile_that_does_not_label_nodes_still_keeps_a_durable_record() -> None:
    client = ModelClient({})
    loop = named_loop(client, "fleet", "2026-01-01T00:00:00Z", {"labelNodes": False})
    await profile_node(loop, client, {"a": node("a")})
    (feature,) = client.features.values()
    assert feature["spec"]["labels"] == {}
    restarted = named_loop(client, "fleet", "2026-01-01T00:00:00Z", {"labelNodes": False})
    await restarted.restore(client)  # type: ignore[arg-type]
    assert restarted.records["a"].result is not None


@pytest.mark.asyncio
async def test_deleting_a_profile_deletes_its_node_features_one_by_one() -> None:
    client = ModelClient({})
    loop = named_loop(client, "fleet", "2026-01-01T00:00:00Z", {})
    await profile_node(loop, client, {"a": node("a"), "b": node("b")})
    other = build_node_feature("a", {}, "other", "op")
    client.features[other["metadata"]["name"]] = other
    runtime = loop.runtime
    await release_profile(runtime, "fleet", loop.body)
    assert sorted(client.feature_deletes) == sorted(
        [node_feature_name("fleet", "a"), node_feature_name("fleet", "b")]
    )
    assert list(client.features) == [other["metadata"]["name"]]


@pytest.mark.asyncio
async def test_a_restart_replaces_an_object_under_the_old_per_node_name() -> None:
    client = ModelClient({})
    loop = named_loop(client, "fleet", "2026-01-01T00:00:00Z", {})
    await profile_node(loop, client, {"a": node("a")})
    (name,) = client.features
    legacy = {**client.features.pop(name)}
    legacy["metadata"] = {**legacy["metadata"], "name": "roofline-a"}
    client.features["roofline-a"] = legacy
    restarted = named_loop(client, "fleet", "2026-01-01T00:00:00Z", {})
    await restarted.restore(client)  # type: ignore[arg-type]
    await restarted.round({"a": node("a")}, [], {})
    assert list(client.features) == [node_feature_name("fleet", "a")]
    assert "roofline-a" in client.feature_deletes


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ApiError(403, 'configmaps "cfg" is forbidden'), id="forbidden"),
        pytest.param(ApiError(503, "etcdserver: leader changed"), id="server-error"),
    ],
)
@pytest.mark.asyncio
async def test_an_unreadable_config_map_fails_its_model_alone_and_the_round_goes_on(
    error: ApiError,
) -> None:
    client = ModelClient({})
    client.refused[("ns", "cfg")] = error
    loop = loop_with(client, {"models": MODELS[:2]}, ENV)
    await loop.round({"a": node("a")}, [], {})
    assert [m["name"] for m in client.models_of(client.created[0])] == ["tiny"], (
        "the other model still reaches the pod"
    )
    status = client.statuses[-1]
    ready = {c["type"]: c for c in status["conditions"]}["ModelsReady"]
    assert ready["reason"] == "ConfigMapUnreadable"
    assert f"HTTP {error.status}" in ready["message"]
    (mapped,) = [m for m in status["models"] if m["name"] == "mapped"]
    assert mapped["reason"] == "ConfigMapUnreadable"


@pytest.mark.asyncio
async def test_checking_the_models_runs_off_the_event_loop_with_a_time_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slow check (what an unbounded config once was) neither blocks the loop, which also
    answers /healthz, nor holds the round: the models fail alone with ModelCheckTimeout."""
    import asyncio
    import time

    def slow(*args: Any) -> Any:
        time.sleep(0.5)
        raise AssertionError("the round must not wait for this")

    monkeypatch.setattr(model_delivery, "resolve_models", slow)
    monkeypatch.setattr(model_delivery, "MODEL_CHECK_SECONDS", 0.2)
    client = ModelClient({})
    loop = loop_with(client, {"models": MODELS[:1]}, ENV)
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    beating = asyncio.ensure_future(heartbeat())
    await loop.round({"a": node("a")}, [], {})
    beating.cancel()
    assert ticks >= 10, "the event loop kept running while the models were checked"
    status = client.statuses[-1]
    assert status["models"][0]["reason"] == "ModelCheckTimeout"
    assert len(client.created) == 1, "the roofline is profiled without the models"


@pytest.mark.asyncio
async def test_models_reach_the_pods_in_a_mounted_config_map_not_in_argv() -> None:
    """A 158 KB config once made every pod fail with "Argument list too long"."""
    client = ModelClient({})
    config = {**TINY_LLAMA, "padding": "x" * 60_000}
    spec = {"models": [{"name": f"m{i}", "config": config} for i in range(3)]}
    loop = loop_with(client, spec, ENV)
    await loop.round({"a": node("a"), "b": node("b")}, [], {})
    assert len(client.config_map_writes) == 1, "one ConfigMap per model set, not per pod"
    for pod in client.created:
        command = pod["spec"]["containers"][0]["command"]
        assert len(" ".join(command)) < 1000
        assert command[command.index("--models-file") + 1] == "/etc/roofline/models/models.json"
        assert [m["name"] for m in client.models_of(pod)] == ["m0", "m1", "m2"]
    (name,) = client.config_map_writes
    # Another model set writes another ConfigMap and deletes the old one.
    loop.body = {**loop.body, "spec": {**loop.body["spec"], "models": spec["models"][:1]}}
    await loop.round({"a": node("a")}, [], {})
    assert client.config_map_deletes == [name]
    await release_profile(loop.runtime, "fleet", loop.body)
    assert client.config_map_deletes == [name, client.config_map_writes[-1]]


@pytest.mark.asyncio
async def test_a_config_over_the_size_limit_fails_its_model_alone() -> None:
    client = ModelClient({})
    big = {**TINY_LLAMA, "padding": "x" * 70_000}
    spec = {"models": [{"name": "big", "config": big}, MODELS[0]]}
    loop = loop_with(client, spec, ENV)
    await loop.round({"a": node("a")}, [], {})
    assert [m["name"] for m in client.models_of(client.created[0])] == ["tiny"]
    (entry,) = [m for m in client.statuses[-1]["models"] if m["name"] == "big"]
    assert entry["reason"] == "InvalidModel"
    assert "bytes, at most 65536" in entry["message"]


@pytest.mark.asyncio
async def test_a_quantized_config_map_model_fails_alone_and_the_node_is_still_profiled() -> None:
    """A bitsandbytes config in the models ConfigMap: that model fails with the format named in
    its status entry and ``ModelsReady``, the pod profiles the node's roofline with the other
    model, and no plan of it (at 16 or 32 bits) is ever asked for."""
    nf4 = {**TINY_LLAMA, "quantization_config": QUANTIZATION_CONFIGS["bitsandbytes"]}
    client = ModelClient({("ns", "cfg"): {"config.json": json.dumps(nf4)}})
    loop = loop_with(client, {"models": MODELS[:2]}, ENV)
    await loop.round({"a": node("a")}, [], {})
    (pod,) = client.created
    assert [m["name"] for m in client.models_of(pod)] == ["tiny"]
    (entry,) = [m for m in client.statuses[-1]["models"] if m["name"] == "mapped"]
    assert entry["reason"] == "InvalidModel"
    refusal = "quantization_config declares quant_method 'bitsandbytes': the plan does not read"
    assert refusal in entry["message"]
    ready = {c["type"]: c for c in client.statuses[-1]["conditions"]}["ModelsReady"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidModel")
    assert refusal in ready["message"]


@pytest.mark.asyncio
async def test_a_format_and_a_cache_dtype_reach_the_pod_the_status_and_the_metrics() -> None:
    """The spec names an AWQ format for a config that declares none and an FP8 cache; the
    ConfigMap's config declares its own AWQ format; a third names a format other than its
    config's and fails alone."""
    awq = {**TINY_LLAMA, "quantization_config": QUANTIZATION_CONFIGS["awq"]}
    client = ModelClient({("ns", "cfg"): {"config.json": json.dumps(awq)}})
    models = [
        {**MODELS[0], "weightFormat": "awq-int4", "kvCacheDtype": "fp8"},
        {**MODELS[1], "kvCacheDtype": "auto"},
        {"name": "other", "config": awq, "weightFormat": "gptq-int4"},
    ]
    loop = loop_with(client, {"models": models}, ENV)
    await loop.round({"a": node("a")}, [], {})
    tiny, mapped = client.models_of(client.created[0])
    assert (tiny["weightFormat"], tiny["kvCacheDtype"]) == ("awq-int4-g128", "fp8")
    assert "weightFormat" not in mapped
    assert "kvCacheDtype" not in mapped
    summary = {m["name"]: m for m in client.statuses[-1]["models"]}
    assert (summary["tiny"]["weightFormat"], summary["tiny"]["kvCacheDtype"]) == (
        "awq-int4-g128",
        "fp8",
    )
    assert summary["mapped"]["weightFormat"] == "awq-int4-g128"
    assert "kvCacheDtype" not in summary["mapped"]
    assert summary["other"]["reason"] == "InvalidModel"
    assert summary["other"]["message"].startswith(
        "spec.models[2].weightFormat gptq-int4-g128: spec.models[2].config declares awq-int4-g128"
    )
    get = loop.runtime.metrics.registry.get_sample_value
    labels = {"profile": "fleet", "weight_format": "awq-int4"}
    assert get("roofline_model_format_info", {**labels, "model": "tiny", "kv_cache_dtype": "fp8"})
    assert get(
        "roofline_model_format_info", {**labels, "model": "mapped", "kv_cache_dtype": "auto"}
    )
    assert (
        get("roofline_model_format_info", {**labels, "model": "other", "kv_cache_dtype": "auto"})
        is None
    )


@pytest.mark.asyncio
async def test_a_quantized_model_of_a_float32_profile_fails_alone() -> None:
    client = ModelClient({})
    models = [MODELS[0], {"name": "awq", "preset": "qwen3-8b", "weightFormat": "int8-w8a8"}]
    loop = loop_with(client, {"models": models, "dtype": "float32"}, ENV)
    await loop.round({"a": node("a")}, [], {})
    assert [m["name"] for m in client.models_of(client.created[0])] == ["tiny"]
    (entry,) = [m for m in client.statuses[-1]["models"] if m["name"] == "awq"]
    assert entry["reason"] == "InvalidModel"
    assert "int8-w8a8 weights under spec.dtype float32" in entry["message"]


@pytest.mark.asyncio
async def test_a_squatted_models_config_map_fails_the_models_and_is_never_mounted() -> None:
    """The ConfigMap of the name the profile derives, created by someone else first: its
    models are refused with the conflict in status, its pods run without models (the roofline
    goes on), and once the name is free the nodes are profiled again with them."""
    client = ModelClient({})
    loop = loop_with(client, {"models": MODELS[:1]}, ENV)
    squatter = {
        "metadata": {"name": "", "namespace": "ns", "uid": "theirs"},
        "data": {"models.json": "[]"},
    }
    original = client.create_config_map

    async def squatted(body: Mapping[str, Any]) -> dict[str, Any] | None:
        squatter["metadata"]["name"] = body["metadata"]["name"]
        return squatter

    client.create_config_map = squatted  # type: ignore[method-assign]
    await loop.round({"a": node("a")}, [], {})
    (pod,) = client.created
    assert not [v for v in pod["spec"]["volumes"] if "configMap" in v], "nothing foreign mounted"
    ready = {c["type"]: c for c in client.statuses[-1]["conditions"]}["ModelsReady"]
    assert ready["reason"] == "ModelsConfigMapConflict"
    assert "exists and is not this profile's" in ready["message"]
    assert client.config_map_deletes == []

    client.create_config_map = original  # type: ignore[method-assign]
    await loop.round({"a": node("a"), "b": node("b")}, [], {})
    later = client.created[-1]
    assert pod_facts(later).node == "b"
    assert [m["name"] for m in client.models_of(later)] == ["tiny"]
    assert pod_facts(later).spec_hash != pod_facts(pod).spec_hash, "a re-profile with models"


@pytest.mark.asyncio
async def test_the_models_config_map_replaced_after_a_round_is_caught_before_the_next_pod() -> None:
    """The operator's own immutable ConfigMap, deleted and created again as a mutable
    look-alike with the profile's owner reference and a broken models file: the next round
    mounts nothing of it, fails the models alone, and the next node is profiled as usual."""
    client = ModelClient({})
    loop = loop_with(client, {"models": MODELS[:1]}, ENV)
    await loop.round({"a": node("a")}, [], {})
    ((key, own),) = client.objects.items()
    client.objects[key] = {
        **own,
        "metadata": {**own["metadata"], "uid": "theirs"},
        "immutable": False,
        "data": {"models.json": "[{"},
    }
    client.config_maps[key] = {"models.json": "[{"}
    await loop.round({"a": node("a"), "b": node("b")}, [], {})
    later = client.created[-1]
    assert pod_facts(later).node == "b"
    assert not [v for v in later["spec"]["volumes"] if "configMap" in v], "nothing mounted"
    ready = {c["type"]: c for c in client.statuses[-1]["conditions"]}["ModelsReady"]
    assert ready["reason"] == "ModelsConfigMapConflict"
    assert "it is mutable" in ready["message"]
    assert client.config_map_deletes == []
