"""Getting a profile's models to its pods: read their ConfigMaps, check them off the event loop,
write the ConfigMap the pods mount, and check it is still the profile's own each round.

The I/O side of ``model_sources`` (which stays pure). Every failure here fails the models it
concerns, never the round: a ConfigMap read the API refuses (403) or fails (5xx) fails the models
that need it, and a check that overruns :data:`MODEL_CHECK_SECONDS` fails the models of that
round, while the roofline is profiled and published as usual.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.model_sources import (
    ModelResolution,
    UnreadableConfigMap,
    build_models_config_map,
    config_maps_needed,
    foreign_config_map,
    resolve_models,
    timed_out,
)
from roofline_operator.run.kubeapi import ApiError, KubeClient

#: How long a ConfigMap read for a model's config is reused before it is read again.
CONFIG_MAP_CACHE_SECONDS = 30.0
#: Longest time a round waits for its models to be checked. The check runs in a worker thread,
#: off the event loop that also answers /healthz and every other profile, and every config field
#: it reads is bounded (``roofline_profiler.core.limits``), so this is a backstop, not a budget.
MODEL_CHECK_SECONDS = 10.0

ConfigMapData = dict[str, str] | UnreadableConfigMap | None


async def read_config_map(client: KubeClient, namespace: str, name: str) -> ConfigMapData:
    """A model's ConfigMap; a refused or failed read fails the models that need it, not the
    round (which would publish nothing at all)."""
    try:
        return await client.get_config_map(namespace, name)
    except ApiError as exc:
        return UnreadableConfigMap(exc.status, exc.message)


#: The models ConfigMaps one profile wrote: ``(namespace, name)`` to the object's UID.
WrittenConfigMaps = dict[tuple[str, str], str]


@dataclass(frozen=True)
class Delivery:
    """Where the pods find their models: the ConfigMap's name (``None`` without models), or
    why it cannot be written."""

    config_map: str | None = None
    conflict: str | None = None


class ModelDelivery:
    """One profile's model ConfigMaps: those it reads (cached a while), those it wrote."""

    def __init__(self, profile: str, written: WrittenConfigMaps) -> None:
        self.profile = profile
        #: ``(namespace, name)`` to when it was read and its data.
        self.config_maps: dict[tuple[str, str], tuple[float, ConfigMapData]] = {}
        #: The models ConfigMaps this profile wrote, with their UIDs (shared with its finalizer).
        self.written = written

    async def resolve(
        self, client: KubeClient, spec: ProfileSpec, namespace: str, now: float
    ) -> ModelResolution:
        """Check the spec's models, reading the ConfigMaps they name (cached for a while)."""
        needed = config_maps_needed(spec.models, namespace)
        for key in list(self.config_maps):
            if key not in needed or now - self.config_maps[key][0] > CONFIG_MAP_CACHE_SECONDS:
                del self.config_maps[key]
        missing = [key for key in needed if key not in self.config_maps]
        found = await asyncio.gather(*(read_config_map(client, ns, name) for ns, name in missing))
        for key, data in zip(missing, found, strict=True):
            self.config_maps[key] = (now, data)
        contents = {key: data for key, (_, data) in self.config_maps.items()}
        check = asyncio.to_thread(resolve_models, spec.models, namespace, contents, spec.dtype)
        try:
            return await asyncio.wait_for(check, MODEL_CHECK_SECONDS)
        except asyncio.TimeoutError:
            return timed_out(spec.models, MODEL_CHECK_SECONDS)

    async def deliver(
        self, client: KubeClient, uid: str, namespace: str, models: ModelResolution
    ) -> Delivery:
        """Make sure the ConfigMap that carries the valid models to the pods is the profile's
        own, every round before a pod may mount it (:meth:`verified`); delete this profile's
        ConfigMaps of earlier model sets.

        A ConfigMap of that name that is not the profile's (``foreign_config_map``) is neither
        mounted nor deleted: the delivery reports the conflict instead, which fails the models
        alone (the roofline is profiled as usual, without them).
        """
        body = build_models_config_map(self.profile, uid, namespace, models)
        wanted = None if body is None else (namespace, str(body["metadata"]["name"]))
        delivery = Delivery(None if wanted is None else wanted[1])
        if body is not None and wanted is not None:
            why = await self.verified(client, body, wanted)
            if why is not None:
                where = f"ConfigMap {namespace}/{wanted[1]}"
                delivery = Delivery(conflict=f"{where} exists and is not this profile's ({why})")
        for stale in [key for key in self.written if key != wanted]:
            await client.delete_config_map(*stale, self.written.pop(stale))
        return delivery

    async def verified(
        self, client: KubeClient, body: dict[str, Any], wanted: tuple[str, str]
    ) -> str | None:
        """Read the models ConfigMap as it is now, create it when it is missing (the first
        round of a model set, or the operator's own deleted since), and check it; why it is
        not the profile's own, or ``None``.

        Checked each round, not only when created: the operator's own immutable one can be
        deleted and created again with other content under its name at any time. One GET per
        round of a profile with models."""
        stored = await client.get_config_map_object(*wanted)
        if stored is None:
            stored = await client.create_config_map(body)
        if stored is None:
            self.written.pop(wanted, None)
            return "it is gone"
        why = foreign_config_map(stored, body)
        found_uid = str((stored.get("metadata") or {}).get("uid", ""))
        if why is None:
            self.written[wanted] = found_uid
        elif self.written.get(wanted) != found_uid:
            # Not the object this profile created: never deleted by it.
            self.written.pop(wanted, None)
        return why
