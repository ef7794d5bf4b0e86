"""Applying one round's plan: pod creates and deletes, finished-pod collections, node patches
(labels and the record annotation together), and the GETs of pods the watch has not shown yet.

The requests go out concurrently; the API server refusing a pod becomes that node's failure,
any other API error is counted and the next round (level-triggered) tries again. What this side
remembers between rounds is only what the watch cannot tell yet: pods already asked to go, node
patches just sent, and what the GETs of unseen pods answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from roofline_operator.core.names import ANNOTATION_NODE, FailureReason
from roofline_operator.decide.node_features import build_node_feature, node_feature_name
from roofline_operator.decide.outcomes import MAX_MESSAGE_CHARS, Failed
from roofline_operator.decide.pods import PodCollection, PodFacts, finished_pod_collections
from roofline_operator.decide.records import record_annotation_key
from roofline_operator.decide.round_plan import PodCheck, PodLookups, RoundPlan
from roofline_operator.run.kubeapi import ApiError, KubeClient
from roofline_operator.run.metrics import OperatorMetrics
from roofline_profiler.core.errors import first_line

#: Longest a sent node patch suppresses an identical one while the node watch shows no newer
#: version of the node (a watch that lost the event; a large cluster's watch lags by tens of
#: seconds, so the version, not a short timer, tells when the node's state is known).
LABEL_PATCH_MEMORY_SECONDS = 300.0

#: A node patch: its labels' merge patch and its annotations' (either may be empty).
NodePatch = tuple[dict[str, str | None], dict[str, str | None]]
#: Answers to a DELETE-collection that mean "not allowed here": fall back to one delete per pod.
COLLECTION_REFUSED = (403, 405)

logger = logging.getLogger(__name__)


class PlanApplier:
    """Sends the plans of one profile; keeps what the watches do not show yet."""

    def __init__(
        self,
        profile: str,
        metrics: OperatorMetrics,
        log: Any,
        node_features_namespace: str | None = None,
    ) -> None:
        self.profile = profile
        self.metrics = metrics
        self.log = log
        #: Pods this operator asked to delete, until the pod watch stops showing them.
        self.deleted: set[str] = set()
        #: Node patches sent recently, so a lagging node watch does not cause a second patch.
        #: Per node: when its last patch was sent, the patch, and the node's resourceVersion the
        #: round that sent it saw.
        self.sent_labels: dict[str, tuple[float, NodePatch, str]] = {}
        #: Pods the watch did not show: when a GET found each, those it did not find, and the
        #: lag the latest found ones prove (``round_plan.PodLookups``).
        self.pods_found: dict[str, float] = {}
        self.pods_missing: set[str] = set()
        self.lagging_since: tuple[float, float] | None = None
        #: Whether finished pods go by DELETE-collection; off once the API refuses it (no RBAC).
        self.collect_finished = True
        #: With the NodeFeature backend: its namespace, and the label set last written per node
        #: (``None``: deleted). Nodes are then never patched.
        self.node_features_namespace = node_features_namespace
        #: This profile's NodeFeature of each node as last written (``{}``: it exists, content
        #: unknown; ``None``: deleted).
        self.node_features: dict[str, dict[str, str] | None] = {}
        #: Objects of this profile under another name (an older version's), to delete.
        self.legacy_names: dict[str, str] = {}

    def observe(self, pods: list[PodFacts]) -> frozenset[str]:
        """Forget deleted pods the watch no longer shows; the rest the planner must not count."""
        self.deleted &= {p.name for p in pods}
        return frozenset(self.deleted)

    def node_patches(self, plan: RoundPlan) -> dict[str, NodePatch]:
        """One patch per node: its label patch and its record annotation, together."""
        key = record_annotation_key(self.profile)
        patches: dict[str, NodePatch] = {}
        for node in dict.fromkeys([*plan.label_patches, *plan.record_annotations]):
            annotations = (
                {key: plan.record_annotations[node]} if node in plan.record_annotations else {}
            )
            patches[node] = (dict(plan.label_patches.get(node) or {}), annotations)
        return patches

    def skip_repeated_node_patches(
        self, patches: dict[str, NodePatch], now: float, versions: Mapping[str, str]
    ) -> dict[str, NodePatch]:
        """Drop the patches already sent whose effect the node watch has not shown yet.

        A patch is sent again only once the watch has delivered a newer version of the node
        (``versions``: each node's resourceVersion as the round saw it) that still needs it —
        someone else changed the labels back — or after :data:`LABEL_PATCH_MEMORY_SECONDS`.
        """
        for node in list(self.sent_labels):
            sent_at, patch, version = self.sent_labels[node]
            seen_since = versions.get(node, version) != version
            expired = now - sent_at > LABEL_PATCH_MEMORY_SECONDS
            if expired or seen_since or node not in patches:
                del self.sent_labels[node]
            elif patches[node] == patch:
                del patches[node]
        for node, patch in patches.items():
            self.sent_labels[node] = (now, patch, versions.get(node, ""))
        return patches

    def pod_lookups(self, profiling: set[str]) -> PodLookups:
        """What the GETs of unseen pods answered, for the pods still awaited (the rest is
        forgotten: their records moved on)."""
        self.pods_found = {n: t for n, t in self.pods_found.items() if n in profiling}
        self.pods_missing &= profiling
        return PodLookups(dict(self.pods_found), frozenset(self.pods_missing), self.lagging_since)

    async def check_pods(self, client: KubeClient, checks: list[PodCheck], now: float) -> None:
        """One GET per pod the watch has not shown in time: found means the watch lags."""
        found: list[PodCheck] = []

        async def check(pod: PodCheck) -> None:
            if await client.get_pod(pod.namespace, pod.name) is None:
                self.pods_missing.add(pod.name)
            else:
                self.pods_found[pod.name] = now
                found.append(pod)

        results = await asyncio.gather(*map(check, checks), return_exceptions=True)
        if found:
            self.lagging_since = (min(p.launched_at for p in found), now)
        self._count_failures(results, "pod check(s)")

    def _count_failures(self, results: list[Any], what: str) -> None:
        """Re-raise a result that is a bug; count and log the API errors among ``node_results``."""
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, ApiError):
                raise error
        if errors:
            self.metrics.reconcile_errors.labels(self.profile).inc(len(errors))
            self.log.warning("%d %s failed, e.g. %s", len(errors), what, errors[0])

    async def apply(
        self,
        client: KubeClient,
        plan: RoundPlan,
        now: float,
        versions: Mapping[str, str] | None = None,
        watched: Iterable[PodFacts] = (),
    ) -> list[tuple[str, Failed]]:
        """Send the plan's requests concurrently; return the nodes whose pod was refused.
        ``watched`` (every pod the watch shows) keeps look-alikes out of the collections."""
        rejected: list[tuple[str, Failed]] = []

        async def create(pod: dict[str, Any]) -> None:
            node = pod["metadata"]["annotations"][ANNOTATION_NODE]
            try:
                if await client.create_pod(pod):
                    self.metrics.pods_launched.labels(self.profile).inc()
            except ApiError as exc:
                why = first_line(exc.message, f"HTTP {exc.status}", MAX_MESSAGE_CHARS)
                rejected.append((node, Failed(FailureReason.POD_REJECTED, why)))

        async def delete(namespace: str, name: str) -> None:
            await client.delete_pod(namespace, name)
            self.deleted.add(name)

        async def label(node: str, patch: NodePatch) -> None:
            try:
                await client.patch_node_labels(node, *patch)
            except ApiError:
                self.sent_labels.pop(node, None)  # not sent after all: send it again next round
                raise

        deletes = dict.fromkeys(plan.deletes)
        collections: list[PodCollection] = []
        singles = list(plan.finished)
        if self.collect_finished:
            collections, singles = finished_pod_collections(self.profile, plan.finished, watched)
        deletes.update(dict.fromkeys((p.namespace, p.name) for p in singles))
        # Collections go first: a pod created afterwards can then never match their selectors.
        results = await asyncio.gather(
            *(self.collect(client, c) for c in collections), return_exceptions=True
        )
        jobs: list[Awaitable[Any]] = [create(pod) for pod in plan.creates]
        jobs += [delete(ns, name) for ns, name in deletes]
        if self.node_features_namespace is None:
            patches = self.skip_repeated_node_patches(self.node_patches(plan), now, versions or {})
            jobs += [label(node, patch) for node, patch in patches.items()]
        else:
            jobs += self.node_feature_jobs(client, plan, self.node_features_namespace)
        results += await asyncio.gather(*jobs, return_exceptions=True)
        self._count_failures(results, "request(s)")
        return rejected

    def node_feature_jobs(
        self, client: KubeClient, plan: RoundPlan, namespace: str
    ) -> list[Awaitable[Any]]:
        """Write this profile's NodeFeature of each node whose labels or record annotation
        changed; delete those no longer wanted. What was written is remembered, so nfd-master's
        lag costs no repeated writes.

        An object is wanted while the node should carry this profile's labels *or* its record
        annotation: a profile that does not own the labels (or has ``labelNodes: false``) still
        keeps its durable record, in an object without labels.
        """
        key = record_annotation_key(self.profile)
        wanted: dict[str, dict[str, str]] = {}
        for node in dict.fromkeys([*plan.label_sets, *plan.annotation_texts]):
            content = dict(plan.label_sets.get(node) or {})
            if text := plan.annotation_texts.get(node):
                content[key] = text
            if content:
                wanted[node] = content
        gone = [n for n, written in self.node_features.items() if written is not None]
        gone += [
            n
            for n, labels in plan.label_sets.items()
            if labels is None and n not in self.node_features
        ]
        gone = [n for n in dict.fromkeys(gone) if n not in wanted]

        async def write(node: str, written: dict[str, str]) -> None:
            labels = {k: v for k, v in written.items() if k != key}
            annotations = {key: written[key]} if key in written else {}
            body = build_node_feature(node, labels, self.profile, namespace, annotations)
            self.node_features[node] = written
            try:
                await client.write_node_feature(body)
                if (legacy := self.legacy_names.pop(node, None)) is not None:
                    await client.delete_node_feature(namespace, legacy)
            except ApiError:
                self.node_features.pop(node, None)  # not written after all: try again
                raise

        async def delete(node: str) -> None:
            self.node_features[node] = None
            names = [node_feature_name(self.profile, node)]
            if (legacy := self.legacy_names.pop(node, None)) is not None:
                names.append(legacy)
            try:
                await asyncio.gather(*(client.delete_node_feature(namespace, n) for n in names))
            except ApiError:
                self.node_features.pop(node, None)
                raise

        jobs: list[Awaitable[Any]] = [
            write(node, content)
            for node, content in wanted.items()
            if self.node_features.get(node) != content
        ]
        return jobs + [delete(node) for node in gone]

    def found_node_features(self, names: Mapping[str, str]) -> None:
        """The NodeFeature objects of this profile that exist (node to object name), as a
        restarted operator lists them: each is rewritten or deleted once, and one under a name
        of an older version is replaced."""
        for node, name in names.items():
            self.node_features.setdefault(node, {})
            if name != node_feature_name(self.profile, node):
                self.legacy_names[node] = name

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
                        self.profile,
                        exc,
                    )
                self.collect_finished = False
        await asyncio.gather(*(client.delete_pod(collection.namespace, n) for n in collection.pods))
        self.deleted.update(collection.pods)
