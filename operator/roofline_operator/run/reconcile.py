"""The reconcile loop of one RooflineProfile: observe, plan, apply, publish, wait.

It runs inside a Kopf daemon for as long as the profile exists. A round observes the cached
world (no API reads; ``cache.py``), lets :func:`plan_round` decide, applies the plan
(``apply.PlanApplier``: the requests, concurrently), and publishes: the whole status in one merge
patch, Events (``round_events.py``), metrics.
It then sleeps until the next deadline, the resync period, or a watch event about its pods, the
nodes or the profiles, whichever comes first. What the finalizer does when the profile goes is
in ``release.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from roofline_operator.core.names import parse_time
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.core.spec import ProfileSpec, check_namespace, parse_spec
from roofline_operator.core.spec_fields import SpecError
from roofline_operator.decide import peer_status, peers, provenance
from roofline_operator.decide.attempts import fail_node
from roofline_operator.decide.labels import LabelClaim
from roofline_operator.decide.model_sources import ModelResolution
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.node_features import BACKEND_NODE_FEATURE
from roofline_operator.decide.outcomes import Failed
from roofline_operator.decide.pods import PodFacts, ProfileRef
from roofline_operator.decide.records import (
    AnnotationMemo,
    NodeRecord,
    records_from_status,
    restore_records,
)
from roofline_operator.decide.round_plan import RoundInput, RoundPlan, plan_round
from roofline_operator.decide.status import build_status, merge_patch
from roofline_operator.run.apply import PlanApplier
from roofline_operator.run.kubeapi import ApiError, KubeClient, list_node_features
from roofline_operator.run.model_delivery import Delivery, ModelDelivery
from roofline_operator.run.round_events import ProfileEvents
from roofline_operator.run.runtime import RELIST_SECONDS, Runtime

#: Pause after a round that raised, before the next try.
ERROR_RETRY_SECONDS = 5.0
#: Status keys the operator owns; anything else (``status.kopf``) belongs to Kopf.
OWNED_STATUS_KEYS = (
    "summary",
    "nodes",
    "models",
    "classes",
    "conditions",
    "observedGeneration",
)


@dataclass(frozen=True)
class Observation:
    """What a round observed: the input of its plan, and the spec's models as resolved (their
    failures and the valid ones are published with the round)."""

    round_input: RoundInput
    models: ModelResolution


class ProfileLoop:
    """The in-memory side of one profile: its records, what was last written, its applier."""

    def __init__(self, runtime: Runtime, name: str, body: Mapping[str, Any], logger: Any) -> None:
        self.runtime = runtime
        self.name = name
        self.body = body
        self.logger = logger
        status = dict(body.get("status") or {})
        self.records: dict[str, NodeRecord] = records_from_status(status, time.time())
        #: Whether the records were completed from the node annotations (once the caches are).
        self.restored = False
        self.annotations = AnnotationMemo()
        self.written: dict[str, Any] = {k: status[k] for k in OWNED_STATUS_KEYS if k in status}
        #: The nodes last announced as slower than their peers (``SlowerThanPeers``), so that the
        #: Warning Event names each once, not once a round; a restart reads them from the status.
        self.slower: frozenset[str] = peer_status.slower_from_status(status)
        #: The nodes last announced as labelled another product than they measured.
        self.mismatched: frozenset[str] = peer_status.mismatched_from_status(status)
        config = runtime.config
        features = (
            config.operator_namespace if config.node_label_backend == BACKEND_NODE_FEATURE else None
        )
        self.applier = PlanApplier(name, runtime.metrics, logger, features)
        written = runtime.models_config_maps.setdefault(name, {})
        self.models = ModelDelivery(name, written)
        self.foreign = provenance.ForeignPodLog()
        #: The profiler namespaces of this profile's valid specs since this process started.
        self.spec_namespaces: set[str] = set()
        runtime.metrics.start_profile(name)

    async def run(
        self, stopped: kopf.DaemonStopped, claims: Mapping[str, Iterable[LabelClaim]]
    ) -> None:
        wakeup = self.runtime.wakeups.event(self.name)
        config = self.runtime.config
        caches = self.runtime.caches
        while not stopped:
            wakeup.clear()
            began = time.monotonic()
            try:
                client = await self.runtime.client()
                await caches.prime(client, config.profiler_namespaces, RELIST_SECONDS)
                if not self.restored:
                    await self.restore(client)
                nodes = caches.nodes.snapshot()
                wake_in = await self.round(nodes, caches.pods_of(self.name), first_of(claims))
            except (ApiError, asyncio.TimeoutError) as exc:
                self.runtime.metrics.reconcile_errors.labels(self.name).inc()
                self.logger.warning("Reconcile round failed, retrying: %s", exc)
                wake_in = ERROR_RETRY_SECONDS
            except Exception:
                # A level-triggered loop survives its own bugs: the next round starts from the
                # observed world again, and the error counter makes the failure visible.
                self.runtime.metrics.reconcile_errors.labels(self.name).inc()
                self.logger.exception("Reconcile round crashed, retrying")
                wake_in = ERROR_RETRY_SECONDS
            took = time.monotonic() - began
            resync = config.resync_seconds
            timeout = resync if wake_in is None else min(wake_in, resync)
            await _wait_any(wakeup.wait(), stopped.wait(), timeout=timeout)
            window = batch_window(config.batch_window_seconds, took, timeout)
            if window and not stopped:
                await _wait_any(stopped.wait(), timeout=window)

    async def restore(self, client: KubeClient) -> None:
        """Complete the records from the nodes' record annotations (or, with the NodeFeature
        backend, from this profile's NodeFeature objects): ``status.nodes[]`` lists only some."""
        if self.applier.node_features_namespace is None:
            carriers: Iterable[NodeFacts] = self.runtime.caches.nodes.values()
        else:
            found = await list_node_features(
                client, self.applier.node_features_namespace, self.name
            )
            self.applier.found_node_features({f.node: f.name for f in found})
            carriers = [f.carrier for f in found]
        self.records = restore_records(self.records, carriers, self.name, time.time())
        self.restored = True

    async def round(
        self,
        nodes: Mapping[str, NodeFacts],
        pods: list[PodFacts],
        claims: Mapping[str, LabelClaim],
    ) -> float | None:
        """One round: observe, plan, apply, publish; returns the seconds until the next
        deadline, if any. An invalid spec is published as such and nothing else is done."""
        now = time.time()
        client = await self.runtime.client()
        try:
            spec = self.valid_spec()
        except SpecError as exc:
            await self.write_status(client, {}, "", str(exc), now)
            return None
        observed = await self.observe(client, spec, nodes, pods, claims, now)
        plan = plan_round(observed.round_input)
        rejected = await self.apply(client, observed.round_input, plan)
        await self.publish(client, observed, plan, rejected)
        return seconds_to_next_deadline(plan, rejected, now)

    def valid_spec(self) -> ProfileSpec:
        """The profile's spec, parsed; :class:`SpecError` if it is invalid or names a namespace
        the operator does not watch."""
        spec = parse_spec(self.body.get("spec") or {})
        check_namespace(spec, self.runtime.config.profiler_namespaces)
        return spec

    async def observe(
        self,
        client: KubeClient,
        spec: ProfileSpec,
        nodes: Mapping[str, NodeFacts],
        pods: list[PodFacts],
        claims: Mapping[str, LabelClaim],
        now: float,
    ) -> Observation:
        """What the round plans from: the spec's models (resolved, and delivered to the pods'
        ConfigMap), the profile's own pods, and what the applier knows that the watch does not
        show yet (pods asked to go, GETs of unseen pods)."""
        namespace = spec.namespace or self.runtime.config.namespace
        models = await self.models.resolve(client, spec, namespace, now)
        uid = str((self.body.get("metadata") or {}).get("uid", ""))
        delivery = await self.models.deliver(client, uid, namespace, models)
        if delivery.conflict is not None:
            models = models.undelivered(delivery.conflict)
        spec_hash = spec.measurement_hash(models_hash(spec, models, delivery))
        pods = self.own_pods(spec, pods, now)
        deleted = self.applier.observe(pods)
        profiling = {r.pod for r in self.records.values() if r.pod is not None}
        metadata = self.body.get("metadata") or {}
        config = self.runtime.config
        round_input = RoundInput(
            profile=self.profile_ref(),
            created_at=parse_time(metadata.get("creationTimestamp")) or 0.0,
            spec=spec,
            spec_hash=spec_hash,
            namespace=namespace,
            image=config.profiler_image,
            pod_defaults=config.pod_defaults,
            nodes=nodes,
            pods=pods,
            records=self.records,
            claims=list(claims.values()),
            deleted=deleted,
            now=now,
            models_config_map=delivery.config_map,
            pod_lookups=self.applier.pod_lookups(profiling),
            annotation_of=self.annotations.text_of,
        )
        return Observation(round_input, models)

    async def apply(
        self, client: KubeClient, inp: RoundInput, plan: RoundPlan
    ) -> list[tuple[str, Failed]]:
        """Send the plan's requests and keep its records; a pod the API refused fails its node
        now, not a round later. Returns the refused pods' nodes and failures."""
        versions = {name: facts.resource_version for name, facts in inp.nodes.items()}
        watched = self.runtime.caches.pods.values()
        rejected = await self.applier.apply(client, plan, inp.now, versions, watched)
        await self.applier.check_pods(client, plan.pod_checks, inp.now)
        for node, failure in rejected:
            plan.records[node] = fail_node(plan.records[node], failure, inp.spec, inp.now)
        self.records = plan.records
        return rejected

    async def publish(
        self,
        client: KubeClient,
        observed: Observation,
        plan: RoundPlan,
        rejected: list[tuple[str, Failed]],
    ) -> None:
        """Tell what the round did: Events and counters, the status, the metrics snapshot."""
        inp, models = observed.round_input, observed.models
        self.events().announce_round(plan, [*plan.failures, *rejected])
        device = inp.spec.device
        fleet = peers.fleet_view(
            peers.members(self.records, inp.spec_hash, device),
            inp.spec.outlier_threshold_percent,
            peers.mismatches(self.records, inp.nodes, inp.spec_hash, device),
        )
        self.slower = self.events().announce_slower(fleet, self.slower)
        self.mismatched = self.events().announce_mismatches(fleet, self.mismatched)
        formats = models.formats()
        view = ModelsView(inp.spec.models, models.failures or {}, inp.spec.gpu_hour_cost, formats)
        await self.write_status(client, plan.conflicts, inp.spec_hash, None, inp.now, view, fleet)
        self.runtime.publish_snapshot(self.name, self.records, inp.spec_hash, formats, fleet)

    def events(self) -> ProfileEvents:
        """Where this profile's Events go (read at each use: the body changes between rounds)."""
        return ProfileEvents(self.body, self.name, self.runtime.metrics)

    def own_pods(self, spec: ProfileSpec, pods: list[PodFacts], now: float) -> list[PodFacts]:
        """The pods this operator created for this profile (``provenance.py``); the others are
        counted once each, and reported in at most one Warning Event an hour."""
        found = provenance.partition(pods, self.profile_ref(), self.pod_namespaces(spec))
        if found.foreign:
            new, announce = self.foreign.record(found.foreign, now)
            self.runtime.metrics.foreign_pods.labels(self.name).inc(new)
            if announce:
                self.events().announce_foreign_pods(found.foreign)
        return found.own

    def profile_ref(self) -> ProfileRef:
        metadata = self.body.get("metadata") or {}
        return ProfileRef(name=self.name, uid=str(metadata.get("uid", "")))

    def pod_namespaces(self, spec: ProfileSpec) -> set[str]:
        """The namespaces whose pods the profile believes: its spec's (or the operator's
        ``--namespace``), and those of its earlier specs this process ran (a spec that moved
        the namespace leaves pods behind in the old one). Each passed ``check_namespace``
        against the operator's flags; none comes from a record, which a Node's writer or a
        status editor may have written."""
        self.spec_namespaces.add(spec.namespace or self.runtime.config.namespace)
        return set(self.spec_namespaces)

    async def write_status(
        self,
        client: KubeClient,
        conflicts: Mapping[str, str],
        spec_hash: str,
        spec_error: str | None,
        now: float,
        models: ModelsView | None = None,
        fleet: peers.FleetView | None = None,
    ) -> None:
        """Write the status if it changed: one merge patch per round, whatever the node count."""
        generation = (self.body.get("metadata") or {}).get("generation")
        status = build_status(
            records=self.records,
            spec_hash=spec_hash,
            conflicts=conflicts,
            spec_error=spec_error,
            previous_conditions=self.written.get("conditions") or [],
            generation=generation,
            now=now,
            models=models,
            max_nodes=self.runtime.config.status_max_nodes,
            peers=fleet,
            previous_nodes=self.written.get("nodes") or [],
        )
        patch = merge_patch(self.written, status)
        if not patch:
            return
        await client.patch_profile_status(self.name, patch)
        self.written = status


def models_hash(spec: ProfileSpec, models: ModelResolution, delivery: Delivery) -> str:
    """What the pods' models add to the spec digest: the content of ConfigMap-sourced models
    (a changed ConfigMap re-profiles, like a changed spec), and whether they could be
    delivered at all (so the nodes profiled without them are profiled again once they can)."""
    uses_config_maps = any(m.config_map is not None for m in spec.models)
    digest = models.digest() if uses_config_maps else ""
    return digest if delivery.conflict is None else f"{digest}-undelivered"


def batch_window(configured: float, round_seconds: float, timeout: float) -> float:
    """How long to gather events after a wake-up before the next round.

    At least the configured window, and at least as long as the last round took (capped by the
    round's own next deadline): a round costs time in proportion to the nodes, and events arrive
    in proportion to them too, so without this a large cluster would run rounds back to back and
    spend its CPU replanning instead of handling the events. Rounds then take at most about half
    the operator's time, whatever the cluster's size.
    """
    if configured <= 0:
        return 0.0
    return max(configured, min(round_seconds, timeout))


def retry_times(plan: RoundPlan, rejected: list[tuple[str, Failed]]) -> list[float]:
    """When the nodes whose pod the API refused are due again (none once out of attempts)."""
    times = (plan.records[node].next_attempt_at for node, _ in rejected)
    return [at for at in times if at is not None]


def seconds_to_next_deadline(
    plan: RoundPlan, rejected: list[tuple[str, Failed]], now: float
) -> float | None:
    """The plan's own next deadline or a refused pod's retry, whichever comes first."""
    retries = [at - now for at in retry_times(plan, rejected)]
    return min([w for w in (plan.wake_in, *retries) if w is not None], default=None)


async def _wait_any(*waits: Awaitable[Any], timeout: float) -> None:
    """Wait until any of ``waits`` completes or ``timeout`` passes; cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def first_of(index: Mapping[Any, Iterable[Any]]) -> dict[Any, Any]:
    """A Kopf index (key to a store of values) as a plain dict of each key's first value."""
    flat: dict[Any, Any] = {}
    for key, store in index.items():
        for value in store:
            flat[key] = value
            break
    return flat
