"""The reconcile loop of one RooflineProfile: observe, plan, apply, publish, wait.

It runs inside a Kopf daemon for as long as the profile exists. A round reads the indexed world
(no API reads), lets :func:`plan_round` decide, performs the planned requests concurrently, and
writes the whole status with one merge patch. It then sleeps until the next deadline, the resync
period, or a watch event about its pods, the nodes or the profiles, whichever comes first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, cast

import kopf

from roofline_operator.kubeapi import ApiError, KubeClient
from roofline_operator.labels import LabelClaim, label_patch, label_safe
from roofline_operator.names import ANNOTATION_NODE, LABEL_PROFILE, FailureReason, parse_time
from roofline_operator.nodes import NodeFacts
from roofline_operator.outcomes import Failed
from roofline_operator.planner import RoundInput, RoundPlan, fail_node, plan_round
from roofline_operator.pods import (
    PodCollection,
    PodFacts,
    ProfileRef,
    finished_pod_collections,
)
from roofline_operator.records import NodeRecord, records_from_status
from roofline_operator.runtime import Runtime
from roofline_operator.spec import ProfileSpec, SpecError, parse_spec
from roofline_operator.status import build_status, merge_patch

#: Pause after a round that raised, before the next try.
ERROR_RETRY_SECONDS = 5.0
#: How long a sent label patch suppresses an identical one while the node watch catches up.
LABEL_PATCH_MEMORY_SECONDS = 30.0
#: Status keys the operator owns; anything else (``status.kopf``) belongs to Kopf.
OWNED_STATUS_KEYS = ("summary", "nodes", "conditions", "observedGeneration")
#: Answers to a DELETE-collection that mean "not allowed here": fall back to one delete per pod.
COLLECTION_REFUSED = (403, 405)

#: Per-node lines go to this logger, not to Kopf's per-object one, which would post each line as
#: an Event; the engine posts its own Events, one per failure reason per round.
logger = logging.getLogger(__name__)


def first_of(index: Mapping[Any, Iterable[Any]]) -> dict[Any, Any]:
    """A Kopf index (key to a store of values) as a plain dict of each key's first value."""
    flat: dict[Any, Any] = {}
    for key, store in index.items():
        for value in store:
            flat[key] = value
            break
    return flat


class ProfileLoop:
    """The in-memory side of one profile: its records, what was last written, pods deleted."""

    def __init__(self, runtime: Runtime, name: str, body: Mapping[str, Any], logger: Any) -> None:
        self.runtime = runtime
        self.name = name
        self.body = body
        self.logger = logger
        status = dict(body.get("status") or {})
        self.records: dict[str, NodeRecord] = records_from_status(status)
        self.written: dict[str, Any] = {k: status[k] for k in OWNED_STATUS_KEYS if k in status}
        self.deleted: set[str] = set()
        #: Label patches sent recently, so a lagging node index does not cause a second patch.
        self.sent_labels: dict[str, tuple[float, dict[str, str | None]]] = {}
        #: Whether finished pods go by DELETE-collection; off once the API refuses it (no RBAC).
        self.collect_finished = True
        runtime.metrics.start_profile(name)

    async def run(
        self,
        stopped: kopf.DaemonStopped,
        node_index: Mapping[str, Iterable[NodeFacts]],
        pod_index: Mapping[str, Iterable[PodFacts]],
        claim_index: Mapping[str, Iterable[LabelClaim]],
    ) -> None:
        wakeup = self.runtime.wakeups.event(self.name)
        config = self.runtime.config
        while not stopped:
            wakeup.clear()
            try:
                pods = list(pod_index.get(self.name, []))
                wake_in = await self.round(first_of(node_index), pods, first_of(claim_index))
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
            resync = config.resync_seconds
            timeout = resync if wake_in is None else min(wake_in, resync)
            await _wait_any(wakeup.wait(), stopped.wait(), timeout=timeout)
            if config.batch_window_seconds and not stopped:
                await _wait_any(stopped.wait(), timeout=config.batch_window_seconds)

    async def round(
        self,
        nodes: Mapping[str, NodeFacts],
        pods: list[PodFacts],
        claims: Mapping[str, LabelClaim],
    ) -> float | None:
        now = time.time()
        client = await self.runtime.client()
        try:
            spec = parse_spec(self.body.get("spec") or {})
        except SpecError as exc:
            await self.publish(client, {}, "", str(exc), now)
            return None
        spec_hash = spec.measurement_hash()
        self.deleted &= {p.name for p in pods}
        plan = plan_round(self._input(spec, spec_hash, nodes, pods, claims, now))
        self.skip_repeated_label_patches(plan, now)
        rejected = await self.apply(client, plan)
        for node, failure in rejected:
            plan.records[node] = fail_node(plan.records[node], failure, spec, now)
        self.records = plan.records
        self.count_and_announce(plan, [*plan.failures, *rejected])
        await self.publish(client, plan.conflicts, spec_hash, None, now)
        self.runtime.publish_snapshot(self.name, self.records, spec_hash)
        retries = [at - now for at in retry_times(plan, rejected)]
        return min([w for w in (plan.wake_in, *retries) if w is not None], default=None)

    def _input(
        self,
        spec: ProfileSpec,
        spec_hash: str,
        nodes: Mapping[str, NodeFacts],
        pods: list[PodFacts],
        claims: Mapping[str, LabelClaim],
        now: float,
    ) -> RoundInput:
        metadata = self.body.get("metadata") or {}
        return RoundInput(
            profile=ProfileRef(name=self.name, uid=str(metadata.get("uid", ""))),
            created_at=parse_time(metadata.get("creationTimestamp")) or 0.0,
            spec=spec,
            spec_hash=spec_hash,
            namespace=spec.namespace or self.runtime.config.namespace,
            image=self.runtime.config.profiler_image,
            nodes=nodes,
            pods=pods,
            records=self.records,
            claims=list(claims.values()),
            deleted=frozenset(self.deleted),
            now=now,
        )

    def skip_repeated_label_patches(self, plan: RoundPlan, now: float) -> None:
        for node in list(self.sent_labels):
            sent_at, patch = self.sent_labels[node]
            if now - sent_at > LABEL_PATCH_MEMORY_SECONDS or node not in plan.label_patches:
                del self.sent_labels[node]
            elif plan.label_patches[node] == patch:
                del plan.label_patches[node]
        for node, patch in plan.label_patches.items():
            self.sent_labels[node] = (now, patch)

    async def apply(self, client: KubeClient, plan: RoundPlan) -> list[tuple[str, Failed]]:
        """Send the plan's requests concurrently; return the nodes whose pod was refused."""
        rejected: list[tuple[str, Failed]] = []

        async def create(pod: dict[str, Any]) -> None:
            node = pod["metadata"]["annotations"][ANNOTATION_NODE]
            try:
                if await client.create_pod(pod):
                    self.runtime.metrics.pods_launched.labels(self.name).inc()
            except ApiError as exc:
                rejected.append((node, Failed(FailureReason.POD_REJECTED, exc.message[:300])))

        async def delete(namespace: str, name: str) -> None:
            await client.delete_pod(namespace, name)
            self.deleted.add(name)

        async def label(node: str, patch: dict[str, str | None]) -> None:
            try:
                await client.patch_node_labels(node, patch)
            except ApiError:
                self.sent_labels.pop(node, None)  # not sent after all: send it again next round
                raise

        deletes = dict.fromkeys(plan.deletes)
        collections: list[PodCollection] = []
        if self.collect_finished:
            collections = finished_pod_collections(self.name, plan.finished)
        else:
            deletes.update(dict.fromkeys((p.namespace, p.name) for p in plan.finished))
        # Collections go first: a pod created afterwards can then never match their selectors.
        results = await asyncio.gather(
            *(self.collect(client, c) for c in collections), return_exceptions=True
        )
        jobs: list[Awaitable[Any]] = [create(pod) for pod in plan.creates]
        jobs += [delete(ns, name) for ns, name in deletes]
        jobs += [label(node, patch) for node, patch in plan.label_patches.items()]
        results += await asyncio.gather(*jobs, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, ApiError):
                raise error
        if errors:
            self.runtime.metrics.reconcile_errors.labels(self.name).inc(len(errors))
            self.logger.warning("%d request(s) failed, e.g. %s", len(errors), errors[0])
        return rejected

    async def collect(self, client: KubeClient, collection: PodCollection) -> None:
        """Delete finished pods by collection; one by one if the API refuses collections."""
        if self.collect_finished:
            try:
                await client.delete_pods(
                    collection.namespace, collection.label_selector, collection.field_selector
                )
                self.deleted.update(collection.pods)
                return
            except ApiError as exc:
                if exc.status not in COLLECTION_REFUSED:
                    raise
                if self.collect_finished:
                    logger.warning(
                        "Profile %s: deleting finished pods by collection was refused (%s); "
                        "deleting them one by one (grant deletecollection on pods to save "
                        "requests)",
                        self.name,
                        exc,
                    )
                self.collect_finished = False
        await asyncio.gather(*(client.delete_pod(collection.namespace, n) for n in collection.pods))
        self.deleted.update(collection.pods)

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
        if plan.profiled:
            names = ", ".join(plan.profiled[:5]) + (" ..." if len(plan.profiled) > 5 else "")
            message = f"Profiled {len(plan.profiled)} node(s): {names}"
            kopf.event(
                cast(kopf.Body, self.body), type="Normal", reason="Profiled", message=message
            )

    async def publish(
        self,
        client: KubeClient,
        conflicts: Mapping[str, str],
        spec_hash: str,
        spec_error: str | None,
        now: float,
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
        )
        patch = merge_patch(self.written, status)
        if not patch:
            return
        await client.patch_profile_status(self.name, patch)
        self.written = status


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


async def release_profile(
    runtime: Runtime,
    name: str,
    node_index: Mapping[str, Iterable[NodeFacts]],
    pod_index: Mapping[str, Iterable[PodFacts]],
) -> None:
    """Delete a profile's pods and remove the node labels it owns (the finalizer's work)."""
    client = await runtime.client()
    jobs: list[Awaitable[Any]] = [
        client.delete_pod(p.namespace, p.name) for p in pod_index.get(name, []) if not p.deleting
    ]
    for node in first_of(node_index).values():
        if node.labels.get(LABEL_PROFILE) == label_safe(name):
            patch = label_patch(node.labels, None)
            if patch:
                jobs.append(client.patch_node_labels(node.name, patch))
    await asyncio.gather(*jobs)
    runtime.metrics.forget(name)
    runtime.wakeups.forget(name)
    runtime.wakeups.wake_all()
