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
)
from roofline_operator.run import model_delivery
from roofline_operator.run.kubeapi import ApiError
from roofline_operator.run.model_delivery import (
    CONFIG_MAP_CACHE_SECONDS,
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

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        self.reads.append((namespace, name))
        if (namespace, name) in self.refused:
            raise self.refused[(namespace, name)]
        return self.data.get((namespace, name))

    async def create_config_map(self, body: dict[str, Any]) -> None:
        self.created.append(body)

    async def delete_config_map(self, namespace: str, name: str) -> None:
        self.deleted.append((namespace, name))


def cfg_client() -> ConfigMapClient:
    return ConfigMapClient({(NAMESPACE, "cfg"): {"config.json": json.dumps(TINY_LLAMA)}})


def resolve(
    delivery: ModelDelivery, client: ConfigMapClient, the_spec: ProfileSpec, now: float
) -> ModelResolution:
    return asyncio.run(delivery.resolve(client, the_spec, NAMESPACE, now))  # type: ignore[arg-type]


def deliver(
    delivery: ModelDelivery, client: ConfigMapClient, models: ModelResolution
) -> str | None:
    return asyncio.run(delivery.deliver(client, "uid-1", NAMESPACE, models))  # type: ignore[arg-type]


def test_a_refused_read_becomes_an_unreadable_config_map_not_an_error() -> None:
    client = cfg_client()
    client.refused[(NAMESPACE, "cfg")] = ApiError(403, "configmaps is forbidden")
    data = asyncio.run(read_config_map(client, NAMESPACE, "cfg"))  # type: ignore[arg-type]
    assert data == UnreadableConfigMap(403, "configmaps is forbidden")


def test_a_config_map_is_read_once_then_again_only_after_the_cache_period() -> None:
    client, delivery = cfg_client(), ModelDelivery("fleet", set())
    first = resolve(delivery, client, MAPPED, now=100.0)
    assert [m.spec.name for m in first.valid] == ["mapped"]
    resolve(delivery, client, MAPPED, now=100.0 + CONFIG_MAP_CACHE_SECONDS)
    assert client.reads == [(NAMESPACE, "cfg")]
    resolve(delivery, client, MAPPED, now=100.0 + CONFIG_MAP_CACHE_SECONDS + 1)
    assert client.reads == [(NAMESPACE, "cfg")] * 2


def test_a_config_map_no_model_needs_any_more_is_forgotten() -> None:
    client, delivery = cfg_client(), ModelDelivery("fleet", set())
    resolve(delivery, client, MAPPED, now=100.0)
    resolve(delivery, client, INLINE, now=101.0)
    assert delivery.config_maps == {}


def test_an_unreadable_config_map_fails_its_model_alone() -> None:
    client, delivery = cfg_client(), ModelDelivery("fleet", set())
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
    resolution = resolve(ModelDelivery("fleet", set()), cfg_client(), INLINE, now=100.0)
    assert resolution.valid == ()
    assert (resolution.failures or {})["tiny"].reason == "ModelCheckTimeout"


def test_the_models_config_map_is_written_once_per_model_set() -> None:
    client, written = cfg_client(), set[tuple[str, str]]()
    delivery = ModelDelivery("fleet", written)
    models = resolve(delivery, client, INLINE, now=100.0)
    name = deliver(delivery, client, models)
    assert deliver(delivery, client, models) == name
    (body,) = client.created
    assert body["metadata"]["name"] == name
    assert json.loads(body["data"][MODELS_FILE_KEY])[0]["name"] == "tiny"
    assert written == {(NAMESPACE, name)}
    assert client.deleted == []


def test_a_new_model_set_replaces_the_config_map_of_the_old_one() -> None:
    client, written = cfg_client(), set[tuple[str, str]]()
    delivery = ModelDelivery("fleet", written)
    old = deliver(delivery, client, resolve(delivery, client, INLINE, now=100.0))
    new = deliver(delivery, client, resolve(delivery, client, MAPPED, now=101.0))
    assert old != new
    assert client.deleted == [(NAMESPACE, old)]
    assert written == {(NAMESPACE, new)}


def test_without_valid_models_no_config_map_is_left() -> None:
    client, written = cfg_client(), set[tuple[str, str]]()
    delivery = ModelDelivery("fleet", written)
    old = deliver(delivery, client, resolve(delivery, client, INLINE, now=100.0))
    assert deliver(delivery, client, ModelResolution()) is None
    assert client.deleted == [(NAMESPACE, old)]
    assert written == set()
