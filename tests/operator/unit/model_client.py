"""An in-memory API client that also serves ConfigMaps and NodeFeatures, and a profile's
reconcile loop on it: the reconcile tests with models and the fuzz test of model configs share
them."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import kopf
from prometheus_client import CollectorRegistry
from tests.operator.unit.recording_client import RecordingClient

from roofline_operator.run.config import load_config
from roofline_operator.run.kubeapi import ApiError
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.reconcile import ProfileLoop
from roofline_operator.run.runtime import Runtime

#: The operator's environment of these tests: profiler pods in namespace ``ns``.
ENV = {"ROOFLINE_NAMESPACE": "ns"}


class ModelClient(RecordingClient):
    def __init__(self, config_maps: Mapping[tuple[str, str], dict[str, str]]) -> None:
        super().__init__()
        self.config_maps = dict(config_maps)
        #: Whole ConfigMap objects by ``(namespace, name)``, for the ones created through it.
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.config_map_reads: list[tuple[str, str]] = []
        self.config_map_writes: list[str] = []
        self.config_map_deletes: list[str] = []
        #: ConfigMaps whose read fails with this error.
        self.refused: dict[tuple[str, str], ApiError] = {}
        self.features: dict[str, dict[str, Any]] = {}
        self.feature_deletes: list[str] = []

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        self.config_map_reads.append((namespace, name))
        if (namespace, name) in self.refused:
            raise self.refused[(namespace, name)]
        return self.config_maps.get((namespace, name))

    async def get_config_map_object(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace, name))

    async def create_config_map(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create it, or answer with the object that already has its name (as on a 409)."""
        metadata = body["metadata"]
        key = (metadata["namespace"], metadata["name"])
        if key in self.objects:
            return self.objects[key]
        self.config_maps[key] = dict(body["data"])
        self.objects[key] = {**body, "metadata": {**metadata, "uid": f"uid-{metadata['name']}"}}
        self.config_map_writes.append(metadata["name"])
        return self.objects[key]

    async def delete_config_map(self, namespace: str, name: str, uid: str) -> None:
        stored = self.objects.get((namespace, name))
        if stored is None or stored["metadata"]["uid"] != uid:
            return  # gone, or the precondition fails: the API server deletes nothing
        del self.objects[(namespace, name)]
        self.config_maps.pop((namespace, name), None)
        self.config_map_deletes.append(name)

    def models_of(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The models a pod reads: the ConfigMap it mounts, as the kubelet would."""
        namespace = pod["metadata"]["namespace"]
        (volume,) = [v for v in pod["spec"]["volumes"] if "configMap" in v]
        data = self.config_maps[(namespace, volume["configMap"]["name"])]
        models: list[dict[str, Any]] = json.loads(data["models.json"])
        return models

    async def write_node_feature(self, body: Mapping[str, Any]) -> None:
        self.features[body["metadata"]["name"]] = dict(body)

    async def delete_node_feature(self, namespace: str, name: str) -> None:
        self.feature_deletes.append(name)
        self.features.pop(name, None)

    def node_features_path(self, namespace: str) -> str:
        return f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{namespace}/nodefeatures"

    async def list_pages(
        self, path: str, label_selector: str | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        if path.startswith("/api/v1/"):  # the caches' priming lists
            yield []
            return
        assert path == self.node_features_path("op")
        assert label_selector is not None
        profile = label_selector.split("roofline.dev/profile=")[1]
        yield [
            f
            for f in self.features.values()
            if f["metadata"]["labels"]["roofline.dev/profile"] == profile
        ]


def loop_with(client: RecordingClient, spec: Mapping[str, Any], env: dict[str, str]) -> ProfileLoop:
    runtime = Runtime(config=load_config([], env), metrics=OperatorMetrics(CollectorRegistry()))
    runtime.api.connection = kopf.ConnectionInfo(server="http://cluster.invalid")
    runtime.api.built_from = runtime.api.connection
    runtime.api.client = client  # type: ignore[assignment]
    body = {
        "metadata": {"name": "fleet", "uid": "u", "generation": 1},
        "spec": {"nodeSelector": {"pool": "h200"}, **spec},
    }
    return ProfileLoop(runtime, "fleet", body, logging.getLogger("test"))
