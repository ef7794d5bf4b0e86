"""Getting a profile's models to its pods: ConfigMap reads cached a while, failures kept to the
models they concern, and one models ConfigMap per model set."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from tests.model_configs import TINY_LLAMA
from tests.operator.unit.operator_builders import spec

from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.model_sources import (
    MODELS_FILE_KEY,
    ModelResolution,
    UnreadableConfigMap,
    build_models_config_map,
)
from roofline_operator.run import model_delivery
from roofline_operator.run.kubeapi import ApiError
from roofline_operator.run.model_delivery import (
    CONFIG_MAP_CACHE_SECONDS,
    Delivery,
    ModelDelivery,
    read_config_map,
)

NAMESPACE = "roofline-system"
MAPPED = spec(models=[{"name": "mapped", "configMapRef": {"name": "cfg"}}])
INLINE = spec(models=[{"name": "tiny", "config": TINY_LLAMA}])


class ConfigMapClient:
    """Serves ConfigMaps from a dict (a missing one is ``None``), refuses those in ``refused``
    and remembers every read, write and delete."""

    def __init__(self, data: dict[tuple[str, str], dict[str, str]]) -> None:
        self.data = data
        self.refused: dict[tuple[str, str], ApiError] = {}
        self.reads: list[tuple[str, str]] = []
        self.created: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str]] = []
        #: The objects the API server stores, by ``(namespace, name)``; a create of an existing
        #: name answers with the stored one (as a 409 and a GET do).
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        #: The whole objects read (the models ConfigMap, checked each round).
        self.object_reads: list[tuple[str, str]] = []

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        self.reads.append((namespace, name))
        if (namespace, name) in self.refused:
            raise self.refused[(namespace, name)]
        return self.data.get((namespace, name))

    async def create_config_map(self, body: dict[str, Any]) -> dict[str, Any] | None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if key not in self.objects:
            self.created.append(body)
            uid = f"uid-{len(self.created)}"
            self.objects[key] = {**body, "metadata": {**body["metadata"], "uid": uid}}
        return self.objects[key]

    async def get_config_map_object(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.object_reads.append((namespace, name))
        return self.objects.get((namespace, name))

    async def delete_config_map(self, namespace: str, name: str, uid: str) -> None:
        stored = self.objects.get((namespace, name))
        if stored is not None and stored["metadata"]["uid"] == uid:
            del self.objects[(namespace, name)]
            self.deleted.append((namespace, name))


def cfg_client() -> ConfigMapClient:
    return ConfigMapClient({(NAMESPACE, "cfg"): {"config.json": json.dumps(TINY_LLAMA)}})


def resolve(
    delivery: ModelDelivery, client: ConfigMapClient, the_spec: ProfileSpec, now: float
) -> ModelResolution:
    return asyncio.run(delivery.resolve(client, the_spec, NAMESPACE, now))  # type: ignore[arg-type]


def delivered(
    delivery: ModelDelivery, client: ConfigMapClient, models: ModelResolution, uid: str = "p-1"
) -> Delivery:
    return asyncio.run(delivery.deliver(client, uid, NAMESPACE, models))  # type: ignore[arg-type]


def deliver(
    delivery: ModelDelivery, client: ConfigMapClient, models: ModelResolution
) -> str | None:
    return delivered(delivery, client, models).config_map


def test_a_refused_read_becomes_an_unreadable_config_map_not_an_error() -> None:
    client = cfg_client()
    client.refused[(NAMESPACE, "cfg")] = ApiError(403, "configmaps is forbidden")
    data = asyncio.run(read_config_map(client, NAMESPACE, "cfg"))  # type: ignore[arg-type]
    assert data == UnreadableConfigMap(403, "configmaps is forbidden")


def test_a_config_map_is_read_once_then_again_only_after_the_cache_period() -> None:
    client, delivery = cfg_client(), ModelDelivery("fleet", {})
    first = resolve(delivery, client, MAPPED, now=100.0)
    assert [m.spec.name for m in first.valid] == ["mapped"]
    resolve(delivery, client, MAPPED, now=100.0 + CONFIG_MAP_CACHE_SECONDS)
    assert client.reads == [(NAMESPACE, "cfg")]
    resolve(delivery, client, MAPPED, now=100.0 + CONFIG_MAP_CACHE_SECONDS + 1)
    assert client.reads == [(NAMESPACE, "cfg")] * 2


def test_a_config_map_no_model_needs_any_more_is_forgotten() -> None:
    client, delivery = cfg_client(), ModelDelivery("fleet", {})
    resolve(delivery, client, MAPPED, now=100.0)
    resolve(delivery, client, INLINE, now=101.0)
    assert delivery.config_maps == {}


def test_an_unreadable_config_map_fails_its_model_alone() -> None:
    client, delivery = cfg_client(), ModelDelivery("fleet", {})
    client.refused[(NAMESPACE, "cfg")] = ApiError(500, "etcdserver: request timed out")
    both = spec(
        models=[
            {"name": "mapped", "configMapRef": {"name": "cfg"}},
            {"name": "tiny", "config": TINY_LLAMA},
        ]
    )
    resolution = resolve(delivery, client, both, now=100.0)
    assert [m.spec.name for m in resolution.valid] == ["tiny"]
    assert (resolution.failures or {})["mapped"].reason == "ConfigMapUnreadable"


def test_a_check_that_overruns_its_bound_fails_every_model_of_the_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def slow(*args: object) -> ModelResolution:
        time.sleep(0.5)
        return ModelResolution()

    monkeypatch.setattr(model_delivery, "resolve_models", slow)
    monkeypatch.setattr(model_delivery, "MODEL_CHECK_SECONDS", 0.05)
    resolution = resolve(ModelDelivery("fleet", {}), cfg_client(), INLINE, now=100.0)
    assert resolution.valid == ()
    assert (resolution.failures or {})["tiny"].reason == "ModelCheckTimeout"


def test_the_models_config_map_is_written_once_per_model_set() -> None:
    client, written = cfg_client(), dict[tuple[str, str], str]()
    delivery = ModelDelivery("fleet", written)
    models = resolve(delivery, client, INLINE, now=100.0)
    name = deliver(delivery, client, models)
    assert deliver(delivery, client, models) == name
    (body,) = client.created
    assert body["metadata"]["name"] == name
    assert json.loads(body["data"][MODELS_FILE_KEY])[0]["name"] == "tiny"
    assert written == {(NAMESPACE, name): "uid-1"}
    assert client.deleted == []


def test_a_new_model_set_replaces_the_config_map_of_the_old_one() -> None:
    client, written = cfg_client(), dict[tuple[str, str], str]()
    delivery = ModelDelivery("fleet", written)
    old = deliver(delivery, client, resolve(delivery, client, INLINE, now=100.0))
    new = deliver(delivery, client, resolve(delivery, client, MAPPED, now=101.0))
    assert old != new
    assert client.deleted == [(NAMESPACE, old)]
    assert set(written) == {(NAMESPACE, new)}


def test_without_valid_models_no_config_map_is_left() -> None:
    client, written = cfg_client(), dict[tuple[str, str], str]()
    delivery = ModelDelivery("fleet", written)
    old = deliver(delivery, client, resolve(delivery, client, INLINE, now=100.0))
    assert deliver(delivery, client, ModelResolution()) is None
    assert client.deleted == [(NAMESPACE, old)]
    assert written == {}


def test_profiles_whose_names_slug_alike_never_share_a_models_config_map() -> None:
    """``fleet-a`` and ``fleet.a`` with the same models shared one; when either changed its
    models or went, it deleted the ConfigMap the other's pods mount."""
    client = cfg_client()
    first, second = ModelDelivery("fleet-a", {}), ModelDelivery("fleet.a", {})
    models = resolve(first, client, INLINE, now=100.0)
    one = delivered(first, client, models, uid="uid-of-fleet-a")
    other = delivered(second, client, models, uid="uid-of-fleet.a")
    assert one.config_map is not None
    assert other.config_map is not None
    assert one.config_map != other.config_map
    assert "uid-of-fleet-a" in one.config_map
    assert (one.conflict, other.conflict) == (None, None)
    delivered(first, client, ModelResolution(), uid="uid-of-fleet-a")
    assert client.deleted == [(NAMESPACE, one.config_map)]
    assert (NAMESPACE, other.config_map) in client.objects


def _squatted(client: ConfigMapClient, models: ModelResolution, **changes: Any) -> str:
    """A ConfigMap pre-created under the name the profile derives, with ``changes``."""
    body = build_models_config_map("fleet", "p-1", NAMESPACE, models)
    assert body is not None
    name = str(body["metadata"]["name"])
    metadata = {**body["metadata"], "uid": "theirs", **changes.pop("metadata", {})}
    client.objects[(NAMESPACE, name)] = {**body, **changes, "metadata": metadata}
    return name


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        pytest.param({"metadata": {"ownerReferences": []}}, "no owner reference", id="no-owner"),
        pytest.param(
            {"data": {MODELS_FILE_KEY: '[{"name":"evil","preset":"qwen3-8b"}]'}},
            "it holds other models",
            id="other-models",
        ),
        pytest.param({"immutable": False}, "it is mutable", id="mutable"),
        pytest.param({"immutable": None}, "it is mutable", id="immutable-unset"),
    ],
)
def test_a_config_map_someone_else_created_under_the_name_is_refused_and_never_deleted(
    changes: dict[str, Any], why: str
) -> None:
    """A 409 counted as success: whoever created the name first chose every pod's models (or
    failed every pod), and the profile deleted it later as its own."""
    client = cfg_client()
    delivery = ModelDelivery("fleet", {})
    models = resolve(delivery, client, INLINE, now=100.0)
    name = _squatted(client, models, **changes)
    outcome = delivered(delivery, client, models)
    assert outcome.config_map is None, "never mounted"
    assert outcome.conflict is not None
    assert f"ConfigMap {NAMESPACE}/{name} exists and is not this profile's" in outcome.conflict
    assert why in outcome.conflict
    delivered(delivery, client, ModelResolution())
    assert client.deleted == []
    assert (NAMESPACE, name) in client.objects


def test_the_profiles_own_config_map_found_after_a_restart_is_adopted_and_deleted_by_uid() -> None:
    client = cfg_client()
    models = resolve(ModelDelivery("fleet", {}), client, INLINE, now=100.0)
    name = _squatted(client, models)  # the same owner and content: written before the restart
    delivery = ModelDelivery("fleet", {})
    assert delivered(delivery, client, models) == Delivery(name)
    assert delivery.written == {(NAMESPACE, name): "theirs"}
    delivered(delivery, client, ModelResolution())
    assert client.deleted == [(NAMESPACE, name)]


def test_the_models_config_map_is_checked_every_round_before_the_pods_mount_it() -> None:
    client = cfg_client()
    delivery = ModelDelivery("fleet", {})
    models = resolve(delivery, client, INLINE, now=100.0)
    name = deliver(delivery, client, models)
    client.object_reads.clear()
    for _ in range(3):
        assert deliver(delivery, client, models) == name
    assert client.object_reads == [(NAMESPACE, name)] * 3
    assert len(client.created) == 1


def test_a_mutable_look_alike_with_the_profiles_uid_and_models_is_never_adopted() -> None:
    """Pre-created with the profile's UID (readable by tenants) and the exact models (derivable
    from the spec), then edited once adopted: the next pod would plan the injected models."""
    client = cfg_client()
    delivery = ModelDelivery("fleet", {})
    models = resolve(delivery, client, INLINE, now=100.0)
    name = _squatted(client, models, immutable=False)
    outcome = delivered(delivery, client, models)
    assert outcome.config_map is None
    assert outcome.conflict is not None
    assert "it is mutable" in outcome.conflict
    assert delivery.written == {}
    assert (NAMESPACE, name) in client.objects


def test_the_profiles_own_config_map_deleted_is_created_again_the_next_round() -> None:
    client, written = cfg_client(), dict[tuple[str, str], str]()
    delivery = ModelDelivery("fleet", written)
    models = resolve(delivery, client, INLINE, now=100.0)
    name = deliver(delivery, client, models)
    assert name is not None
    del client.objects[(NAMESPACE, name)]
    assert delivered(delivery, client, models) == Delivery(name)
    assert len(client.created) == 2
    assert written == {(NAMESPACE, name): "uid-2"}


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"data": {MODELS_FILE_KEY: "[{"}}, id="broken-models-file"),
        pytest.param(
            {"data": {MODELS_FILE_KEY: '[{"name":"evil","preset":"qwen3-8b"}]'}},
            id="other-models",
        ),
        pytest.param({"immutable": False}, id="mutable"),
    ],
)
def test_the_profiles_own_config_map_replaced_by_a_look_alike_fails_the_models_next_round(
    changes: dict[str, Any],
) -> None:
    """Deleted and created again under its name with the profile's owner reference: the round
    that finds it fails the models, and no pod mounts it; the look-alike is never deleted."""
    client, written = cfg_client(), dict[tuple[str, str], str]()
    delivery = ModelDelivery("fleet", written)
    models = resolve(delivery, client, INLINE, now=100.0)
    name = deliver(delivery, client, models)
    assert name is not None
    del client.objects[(NAMESPACE, name)]
    _squatted(client, models, **changes)
    outcome = delivered(delivery, client, models)
    assert outcome.config_map is None
    assert outcome.conflict is not None
    assert f"ConfigMap {NAMESPACE}/{name} exists and is not this profile's" in outcome.conflict
    assert written == {}
    delivered(delivery, client, ModelResolution())
    assert client.deleted == []
    assert (NAMESPACE, name) in client.objects


def test_once_the_look_alike_is_gone_the_models_are_delivered_again() -> None:
    client = cfg_client()
    delivery = ModelDelivery("fleet", {})
    models = resolve(delivery, client, INLINE, now=100.0)
    name = _squatted(client, models, immutable=False)
    assert delivered(delivery, client, models).conflict is not None
    del client.objects[(NAMESPACE, name)]
    assert delivered(delivery, client, models) == Delivery(name)
    assert delivery.written == {(NAMESPACE, name): "uid-1"}
