"""What all handlers of one operator process share: config, metrics, the API client, wake-ups,
and the caches of nodes and profiler pods.

Kopf hands every object a shallow copy of the memo, so this object is built once before the
operator starts and only its members change afterwards; every copy sees the same members.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from roofline_operator.core.cache import ObjectCache
from roofline_operator.core.names import LABEL_MANAGED_BY, MANAGED_BY
from roofline_operator.core.nodes import NodeFacts, node_facts
from roofline_operator.decide.model_sources import ServedFormat
from roofline_operator.decide.peers import FleetView
from roofline_operator.decide.pods import PodFacts, pod_facts
from roofline_operator.decide.records import NodeRecord
from roofline_operator.run.config import OperatorConfig
from roofline_operator.run.kubeapi import ApiError, KubeClient, session_for
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records
from roofline_operator.run.server import Health

#: The label selector of every profiler pod (the pod cache holds these only).
PROFILER_POD_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
#: Profile rounds relist the nodes and pods when the caches' last list is this old: a watch that
#: restarts after 410 Gone never reports what was deleted in its gap (``cache.py``).
RELIST_SECONDS = 600.0


class Wakeups:
    """One event per profile; watch handlers set them to cut a profile's sleep short."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def event(self, profile: str) -> asyncio.Event:
        return self._events.setdefault(profile, asyncio.Event())

    def wake(self, profile: str | None) -> None:
        if profile and profile in self._events:
            self._events[profile].set()

    def wake_all(self) -> None:
        for event in self._events.values():
            event.set()

    def forget(self, profile: str) -> None:
        self._events.pop(profile, None)


@dataclass
class Caches:
    """The nodes and the profiler pods, by name, fed by watch events (``handlers.py``) and
    primed by one paginated LIST each (``cache.py`` explains the race between the two)."""

    nodes: ObjectCache[str, NodeFacts] = field(default_factory=ObjectCache)
    pods: ObjectCache[tuple[str, str], PodFacts] = field(default_factory=ObjectCache)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: ``time.monotonic()`` when each cache's last priming list was merged.
    listed_at: dict[str, float] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.nodes.ready.is_set() and self.pods.ready.is_set()

    async def prime(
        self,
        client: KubeClient,
        namespaces: tuple[str, ...],
        relist_seconds: float | None = None,
    ) -> None:
        """List the nodes and the profiler pods of ``namespaces`` once, and again when a list is
        older than ``relist_seconds`` (never, by default); otherwise return at once.

        Called by whoever needs the caches (a profile's round, with a relist period; the
        finalizer, without); an API error leaves a cache as it was for the next caller to retry.
        """
        async with self.lock:
            await self._list(client, self.nodes, ["nodes"], None, _node_entry, relist_seconds)
            paths = [f"namespaces/{ns}/pods" for ns in namespaces]
            await self._list(
                client, self.pods, paths, PROFILER_POD_SELECTOR, _pod_entry, relist_seconds
            )

    async def _list(
        self,
        client: KubeClient,
        cache: ObjectCache[Any, Any],
        paths: list[str],
        selector: str | None,
        entry: Callable[[Mapping[str, Any]], tuple[Any, Any]],
        relist_seconds: float | None,
    ) -> None:
        """Prime ``cache`` from one paginated LIST of each of ``paths`` (under ``/api/v1/``),
        when it is unprimed or its last list is ``relist_seconds`` old."""
        kind = paths[0].rsplit("/", 1)[-1]
        listed_at = self.listed_at.get(kind)
        fresh = listed_at is not None and (
            relist_seconds is None or time.monotonic() - listed_at < relist_seconds
        )
        if cache.ready.is_set() and fresh:
            return
        cache.start_priming()
        listed: list[tuple[Any, Any]] = []
        for path in paths:
            async for page in client.list_pages(f"/api/v1/{path}", selector):
                listed.extend(map(entry, page))
        cache.finish_priming(listed)
        self.listed_at[kind] = time.monotonic()

    def pods_of(self, profile: str) -> list[PodFacts]:
        return [p for p in self.pods.values() if p.profile == profile]


def pod_key(pod: PodFacts) -> tuple[str, str]:
    return (pod.namespace, pod.name)


def _node_entry(body: Mapping[str, Any]) -> tuple[str, NodeFacts]:
    facts = node_facts(body)
    return facts.name, facts


def _pod_entry(body: Mapping[str, Any]) -> tuple[tuple[str, str], PodFacts]:
    facts = pod_facts(body)
    return pod_key(facts), facts


@dataclass
class ApiState:
    connection: kopf.ConnectionInfo | None = None
    client: KubeClient | None = None
    #: The connection the client was built from; a new login rebuilds it.
    built_from: kopf.ConnectionInfo | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class Runtime:
    config: OperatorConfig
    metrics: OperatorMetrics
    health: Health = field(default_factory=Health)
    wakeups: Wakeups = field(default_factory=Wakeups)
    api: ApiState = field(default_factory=ApiState)
    caches: Caches = field(default_factory=Caches)
    server: list[Any] = field(default_factory=list)
    #: Background tasks of the process (readiness), cancelled at cleanup.
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: The models ConfigMaps each profile wrote, ``(namespace, name)`` to their UID: its
    #: finalizer deletes them (by UID: never another object that took the name).
    models_config_maps: dict[str, dict[tuple[str, str], str]] = field(default_factory=dict)

    async def client(self) -> KubeClient:
        """The shared API client, (re)built from the latest credentials Kopf logged in with."""
        async with self.api.lock:
            info = self.api.connection
            if info is None:
                raise ApiError(503, "not logged in yet")
            if self.api.client is None or self.api.built_from is not info:
                if self.api.client is not None:
                    await self.api.client.close()
                self.api.client = KubeClient(
                    session_for(info), info.server, self.config.api_concurrency
                )
                self.api.built_from = info
            return self.api.client

    def publish_snapshot(
        self,
        profile: str,
        records: Mapping[str, NodeRecord],
        spec_hash: str,
        formats: Mapping[str, ServedFormat] | None = None,
        fleet: FleetView | None = None,
    ) -> None:
        """The gauges of the profile from now on; ``formats``: its valid models, each with
        how it is served."""
        models = formats or {}
        snapshot = snapshot_from_records(profile, records, spec_hash, tuple(models), fleet, models)
        self.metrics.collector.update(snapshot)

    async def close(self) -> None:
        if self.api.client is not None:
            await self.api.client.close()
            self.api.client = None
