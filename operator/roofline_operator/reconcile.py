"""The reconcile loop of one RooflineProfile: observe, plan, apply, publish, wait.

It runs inside a Kopf daemon for as long as the profile exists. A round observes the cached
world (no API reads; ``cache.py``), lets :func:`plan_round` decide, applies the plan
(``apply.PlanApplier``: the requests, concurrently), and publishes: the whole status in one merge
patch, Events, metrics.
It then sleeps until the next deadline, the resync period, or a watch event about its pods, the
nodes or the profiles, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

import kopf

from roofline_operator import provenance
from roofline_operator.apply import PlanApplier
from roofline_operator.kubeapi import ApiError, KubeClient
from roofline_operator.labels import LabelClaim, label_patch, label_safe
from roofline_operator.model_delivery import ModelDelivery
from roofline_operator.model_status import ModelsView
from roofline_operator.names import LABEL_PROFILE, FailureReason, parse_time
from roofline_operator.node_features import (
    BACKEND_NODE_FEATURE,
    NFD_NODE_NAME_LABEL,
    profile_selector,
)
from roofline_operator.nodes import NodeFacts
from roofline_operator.outcomes import Failed
from roofline_operator.pods import PodFacts, ProfileRef
from roofline_operator.records import (
    AnnotationMemo,
    NodeRecord,
    record_annotation_key,
    records_from_status,
    restore_records,
)
from roofline_operator.round_plan import RoundInput, RoundPlan, fail_node, plan_round
from roofline_operator.runtime import RELIST_SECONDS, Runtime
from roofline_operator.spec import ProfileSpec, SpecError, check_namespace, parse_spec
from roofline_operator.status import build_status, merge_patch
from roofline_profiler.sanity import HOST_STATE_CODE

#: Pause after a round that raised, before the next try.
ERROR_RETRY_SECONDS = 5.0
#: Status keys the operator owns; anything else (``status.kopf``) belongs to Kopf.
OWNED_STATUS_KEYS = ("summary", "nodes", "models", "conditions", "observedGeneration")

#: Per-node lines go to this logger, not to Kopf's per-object one, which would post each line as
#: an Event; the engine posts its own Events, one per failure reason per round.
logger = logging.getLogger(__name__)


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
        config = runtime.config
        features = (
            config.operator_namespace if config.node_label_backend == BACKEND_NODE_FEATURE else None
        )
        self.applier = PlanApplier(name, runtime.metrics, logger, features)
        written = runtime.models_config_maps.setdefault(name, set())
        self.models = ModelDelivery(name, written)
        self.foreign = provenance.ForeignPodLog()
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
        """One round; returns the seconds until the next deadline, if any."""
        now = time.time()
        client = await self.runtime.client()
        # Observe.
        try:
            spec = parse_spec(self.body.get("spec") or {})
            check_namespace(spec, self.runtime.config.profiler_namespaces)
        except SpecError as exc:
            await self.publish(client, {}, "", str(exc), now)
            return None
        namespace = spec.namespace or self.runtime.config.namespace
        models = await self.models.resolve(client, spec, namespace, now)
        uses_config_maps = any(m.config_map is not None for m in spec.models)
        spec_hash = spec.measurement_hash(models.digest() if uses_config_maps else "")
        uid = str((self.body.get("metadata") or {}).get("uid", ""))
        models_config_map = await self.models.deliver(client, uid, namespace, models)
        pods = self.own_pods(spec, pods, now)
        deleted = self.applier.observe(pods)
        profiling = {r.pod for r in self.records.values() if r.pod is not None}
        lookups = self.applier.pod_lookups(profiling)
        # Plan.
        inp = self._input(spec, spec_hash, nodes, pods, claims, deleted, now)
        plan = plan_round(
            replace(
                inp,
                models_config_map=models_config_map,
                pod_lookups=lookups,
                annotation_of=self.annotations.text_of,
            )
        )
        # Apply: a pod the API refused fails its node now, not a round later.
        versions = {name: facts.resource_version for name, facts in nodes.items()}
        rejected = await self.applier.apply(client, plan, now, versions)
        await self.applier.check_pods(client, plan.pod_checks, now)
        for node, failure in rejected:
            plan.records[node] = fail_node(plan.records[node], failure, spec, now)
        self.records = plan.records
        # Publish.
        self.count_and_announce(plan, [*plan.failures, *rejected])
        view = ModelsView(spec.models, models.failures or {}, spec.gpu_hour_cost)
        await self.publish(client, plan.conflicts, spec_hash, None, now, view)
        planned = tuple(m.spec.name for m in models.valid)
        self.runtime.publish_snapshot(self.name, self.records, spec_hash, planned)
        retries = [at - now for at in retry_times(plan, rejected)]
        return min([w for w in (plan.wake_in, *retries) if w is not None], default=None)

    def own_pods(self, spec: ProfileSpec, pods: list[PodFacts], now: float) -> list[PodFacts]:
        """The pods this operator created for this profile (``provenance.py``); the others are
        counted once each, and reported in at most one Warning Event an hour."""
        found = provenance.partition(pods, self.profile_ref(), self.pod_namespaces(spec))
        if found.foreign:
            new, announce = self.foreign.record(found.foreign, now)
            self.runtime.metrics.foreign_pods.labels(self.name).inc(new)
            if announce:
                message = (
                    f"ignored {len(found.foreign)} pod(s) that carry this profile's labels but "
                    f"were not created by the operator: {provenance.describe(found.foreign)}"
                )
                logger.warning("Profile %s: %s", self.name, message)
                kopf.warn(
                    cast(kopf.Body, self.body), reason="ForeignPodIgnored", message=message[:1000]
                )
        return found.own

    def profile_ref(self) -> ProfileRef:
        metadata = self.body.get("metadata") or {}
        return ProfileRef(name=self.name, uid=str(metadata.get("uid", "")))

    def pod_namespaces(self, spec: ProfileSpec) -> set[str]:
        """The profiler namespace, and any namespace a record's pod was launched in (a spec
        that moved the namespace leaves pods behind in the old one)."""
        namespaces = {spec.namespace or self.runtime.config.namespace}
        namespaces.update(r.pod_namespace for r in self.records.values() if r.pod_namespace)
        return namespaces

    def _input(
        self,
        spec: ProfileSpec,
        spec_hash: str,
        nodes: Mapping[str, NodeFacts],
        pods: list[PodFacts],
        claims: Mapping[str, LabelClaim],
        deleted: frozenset[str],
        now: float,
    ) -> RoundInput:
        metadata = self.body.get("metadata") or {}
        return RoundInput(
            profile=self.profile_ref(),
            created_at=parse_time(metadata.get("creationTimestamp")) or 0.0,
            spec=spec,
            spec_hash=spec_hash,
            namespace=spec.namespace or self.runtime.config.namespace,
            image=self.runtime.config.profiler_image,
            pod_defaults=self.runtime.config.pod_defaults,
            nodes=nodes,
            pods=pods,
            records=self.records,
            claims=list(claims.values()),
            deleted=deleted,
            now=now,
        )

    def count_and_announce(self, plan: RoundPlan, failures: list[tuple[str, Failed]]) -> None:
        """Failure counters, and Events: one per failure reason per round, not one per node."""
        by_reason: dict[FailureReason, list[str]] = defaultdict(list)
        for node, failure in failures:
            self.runtime.metrics.failures.labels(self.name, failure.reason.value).inc()
            by_reason[failure.reason].append(node)
            logger.warning(
                "Profile %s: node %s failed (%s): %s",
                self.name,
                node,
                failure.reason.value,
                failure.message,
            )
        for reason, nodes in by_reason.items():
            first = next(f.message for n, f in failures if f.reason is reason)
            message = f"{len(nodes)} node(s) failed ({', '.join(nodes[:5])}): {first}"
            kopf.warn(cast(kopf.Body, self.body), reason=reason.value, message=message[:1000])
        self.announce_changes(plan)
        self.announce_held(plan)
        self.announce_unschedulable(plan)
        if plan.profiled:
            names = ", ".join(plan.profiled[:5]) + (" ..." if len(plan.profiled) > 5 else "")
            message = f"Profiled {len(plan.profiled)} node(s): {names}"
            kopf.event(
                cast(kopf.Body, self.body), type="Normal", reason="Profiled", message=message
            )

    def announce_changes(self, plan: RoundPlan) -> None:
        """One ``DeviceChanged`` Event per round naming the nodes whose published numbers moved
        materially: a Warning when a GPU lost bandwidth or peak, else Normal."""
        if not plan.changes:
            return
        for _, publication in plan.changes:
            for change in publication.changes:
                self.runtime.metrics.device_changes.labels(self.name, change.quantity).inc()
        message = "; ".join(f"node {node}: {p.describe()}" for node, p in plan.changes)
        degraded = any(
            c.quantity in ("bandwidth", "peak") and c.new < c.old
            for _, p in plan.changes
            for c in p.changes
        )
        logger.warning("Profile %s: %s", self.name, message)
        kopf.event(
            cast(kopf.Body, self.body),
            type="Warning" if degraded else "Normal",
            reason="DeviceChanged",
            message=message[:1000],
        )

    def announce_unschedulable(self, plan: RoundPlan) -> None:
        """One Normal ``Unschedulable`` Event per round naming the nodes whose pod could not be
        scheduled: busy GPUs are the normal state of a serving fleet, not a failure."""
        if not plan.unschedulable:
            return
        nodes = [node for node, _ in plan.unschedulable]
        message = (
            f"{len(nodes)} node(s) could not schedule a profiler pod ({', '.join(nodes[:5])}), "
            f"tried again later: {plan.unschedulable[0][1].message}"
        )
        logger.info("Profile %s: %s", self.name, message)
        kopf.event(
            cast(kopf.Body, self.body),
            type="Normal",
            reason="Unschedulable",
            message=message[:1000],
        )

    def announce_held(self, plan: RoundPlan) -> None:
        """One ``ProfileHeldBack`` Warning Event per round naming the nodes whose new profile
        warned of interference and so moved no published number."""
        if not plan.held:
            return
        self.runtime.metrics.held_back.labels(self.name).inc(len(plan.held))
        nodes = "; ".join(f"node {node}: {', '.join(p.held)}" for node, p in plan.held)
        message = (
            f"{nodes}: the profile warned of interference, so the published numbers stay; the "
            "next profile publishes if it persists (check what else ran on the node)"
        )
        if any(HOST_STATE_CODE in p.held for _, p in plan.held):
            message = (
                f"{nodes}: the profile warned of interference or of a host that changed state "
                "while it ran, so the published numbers stay; a level the next profile finds "
                "again publishes (check what else ran on the node, and its clocks and power)"
            )
        logger.warning("Profile %s: %s", self.name, message)
        kopf.event(
            cast(kopf.Body, self.body),
            type="Warning",
            reason="ProfileHeldBack",
            message=message[:1000],
        )

    async def publish(
        self,
        client: KubeClient,
        conflicts: Mapping[str, str],
        spec_hash: str,
        spec_error: str | None,
        now: float,
        models: ModelsView | None = None,
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
        )
        patch = merge_patch(self.written, status)
        if not patch:
            return
        await client.patch_profile_status(self.name, patch)
        self.written = status


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


@dataclass(frozen=True)
class FoundNodeFeature:
    """One of a profile's NodeFeature objects as listed: its name, its node, and its record
    annotation as the node it describes would carry it."""

    name: str
    node: str
    carrier: NodeFacts


async def list_node_features(
    client: KubeClient, namespace: str, profile: str
) -> list[FoundNodeFeature]:
    """A profile's NodeFeature objects (by their label selector)."""
    found = []
    key = record_annotation_key(profile)
    path = client.node_features_path(namespace)
    async for page in client.list_pages(path, profile_selector(profile)):
        for body in page:
            metadata = body.get("metadata") or {}
            node = (metadata.get("labels") or {}).get(NFD_NODE_NAME_LABEL)
            name = metadata.get("name")
            if not node or not name:
                continue
            text = (metadata.get("annotations") or {}).get(key)
            records = {key: str(text)} if text else {}
            found.append(
                FoundNodeFeature(str(name), str(node), NodeFacts(str(node), records=records))
            )
    return found


def release_namespaces(runtime: Runtime, body: Mapping[str, Any]) -> set[str]:
    """Where a profile being deleted may have pods: the configured namespace, its spec's, and
    those its status names."""
    namespaces = {runtime.config.namespace}
    with contextlib.suppress(SpecError):
        namespaces.add(parse_spec(body.get("spec") or {}).namespace or runtime.config.namespace)
    records = records_from_status(body.get("status") or {})
    namespaces.update(r.pod_namespace for r in records.values() if r.pod_namespace)
    return namespaces


async def release_profile(runtime: Runtime, name: str, body: Mapping[str, Any]) -> None:
    """Delete a profile's pods, remove the node labels it owns and its record annotations
    (the finalizer's work). Only pods the operator created are deleted (``provenance.py``)."""
    client = await runtime.client()
    caches = runtime.caches
    await caches.prime(client, runtime.config.profiler_namespaces)
    uid = str((body.get("metadata") or {}).get("uid", ""))
    own = provenance.partition(
        caches.pods_of(name), ProfileRef(name, uid), release_namespaces(runtime, body)
    ).own
    jobs: list[Awaitable[Any]] = [
        client.delete_pod(p.namespace, p.name) for p in own if not p.deleting
    ]
    config = runtime.config
    if config.node_label_backend == BACKEND_NODE_FEATURE:
        # One DELETE per object: no deletecollection, which the chart does not grant.
        namespace = config.operator_namespace
        for found in await list_node_features(client, namespace, name):
            jobs.append(client.delete_node_feature(namespace, found.name))
    else:
        key = record_annotation_key(name)
        for node in caches.nodes.values():
            patch = None
            if node.labels.get(LABEL_PROFILE) == label_safe(name):
                patch = label_patch(node.labels, None)
            annotations = {key: None} if key in node.records else {}
            if patch or annotations:
                jobs.append(client.patch_node_labels(node.name, patch or {}, annotations))
    jobs += [client.delete_config_map(*key) for key in runtime.models_config_maps.pop(name, ())]
    await asyncio.gather(*jobs)
    runtime.metrics.forget(name)
    runtime.wakeups.forget(name)
    runtime.wakeups.wake_all()
