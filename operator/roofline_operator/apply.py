"""Applying one round's plan: pod creates and deletes, finished-pod collections, label patches.

The requests go out concurrently; the API server refusing a pod becomes that node's failure,
any other API error is counted and the next round (level-triggered) tries again. What this side
remembers between rounds is only what the watch cannot tell yet: pods already asked to go, and
label patches just sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from roofline_operator.kubeapi import ApiError, KubeClient
from roofline_operator.metrics import OperatorMetrics
from roofline_operator.names import ANNOTATION_NODE, FailureReason
from roofline_operator.node_features import build_node_feature, node_feature_name
from roofline_operator.outcomes import MAX_MESSAGE_CHARS, Failed
from roofline_operator.planner import RoundPlan
from roofline_operator.pods import PodCollection, PodFacts, finished_pod_collections

#: How long a sent label patch suppresses an identical one while the node watch catches up.
LABEL_PATCH_MEMORY_SECONDS = 30.0
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
        #: Label patches sent recently, so a lagging node index does not cause a second patch.
        self.sent_labels: dict[str, tuple[float, dict[str, str | None]]] = {}
        #: Whether finished pods go by DELETE-collection; off once the API refuses it (no RBAC).
        self.collect_finished = True
        #: With the NodeFeature backend: its namespace, and the label set last written per node
        #: (``None``: deleted). Nodes are then never patched.
        self.node_features_namespace = node_features_namespace
        self.node_features: dict[str, dict[str, str] | None] = {}

    def observe(self, pods: list[PodFacts]) -> frozenset[str]:
        """Forget deleted pods the watch no longer shows; the rest the planner must not count."""
        self.deleted &= {p.name for p in pods}
        return frozenset(self.deleted)

    def skip_repeated_label_patches(self, plan: RoundPlan, now: float) -> None:
        for node in list(self.sent_labels):
            sent_at, patch = self.sent_labels[node]
            if now - sent_at > LABEL_PATCH_MEMORY_SECONDS or node not in plan.label_patches:
                del self.sent_labels[node]
            elif plan.label_patches[node] == patch:
                del plan.label_patches[node]
        for node, patch in plan.label_patches.items():
            self.sent_labels[node] = (now, patch)

    async def apply(
        self, client: KubeClient, plan: RoundPlan, now: float
    ) -> list[tuple[str, Failed]]:
        """Send the plan's requests concurrently; return the nodes whose pod was refused."""
        self.skip_repeated_label_patches(plan, now)
        rejected: list[tuple[str, Failed]] = []

        async def create(pod: dict[str, Any]) -> None:
            node = pod["metadata"]["annotations"][ANNOTATION_NODE]
            try:
                if await client.create_pod(pod):
                    self.metrics.pods_launched.labels(self.profile).inc()
            except ApiError as exc:
                why = exc.message[:MAX_MESSAGE_CHARS]
                rejected.append((node, Failed(FailureReason.POD_REJECTED, why)))

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
            collections = finished_pod_collections(self.profile, plan.finished)
        else:
            deletes.update(dict.fromkeys((p.namespace, p.name) for p in plan.finished))
        # Collections go first: a pod created afterwards can then never match their selectors.
        results = await asyncio.gather(
            *(self.collect(client, c) for c in collections), return_exceptions=True
        )
        jobs: list[Awaitable[Any]] = [create(pod) for pod in plan.creates]
        jobs += [delete(ns, name) for ns, name in deletes]
        if self.node_features_namespace is None:
            jobs += [label(node, patch) for node, patch in plan.label_patches.items()]
        else:
            jobs += self.node_feature_jobs(client, plan, self.node_features_namespace)
        results += await asyncio.gather(*jobs, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, ApiError):
                raise error
        if errors:
            self.metrics.reconcile_errors.labels(self.profile).inc(len(errors))
            self.log.warning("%d request(s) failed, e.g. %s", len(errors), errors[0])
        return rejected

    def node_feature_jobs(
        self, client: KubeClient, plan: RoundPlan, namespace: str
    ) -> list[Awaitable[Any]]:
        """Write the NodeFeature of each node whose label set changed; delete those no longer
        wanted. What was written is remembered, so nfd-master's lag costs no repeated writes."""
        wanted = {n: labels for n, labels in plan.label_sets.items() if labels is not None}
        gone = [n for n, labels in self.node_features.items() if labels and n not in wanted]
        gone += [
            n
            for n, labels in plan.label_sets.items()
            if labels is None and n not in self.node_features
        ]

        async def write(node: str, labels: dict[str, str]) -> None:
            body = build_node_feature(node, labels, self.profile, namespace)
            self.node_features[node] = labels
            try:
                await client.write_node_feature(body)
            except ApiError:
                self.node_features.pop(node, None)  # not written after all: try again
                raise

        async def delete(node: str) -> None:
            self.node_features[node] = None
            try:
                await client.delete_node_feature(namespace, node_feature_name(node))
            except ApiError:
                self.node_features.pop(node, None)
                raise

        jobs: list[Awaitable[Any]] = [
            write(node, labels)
            for node, labels in wanted.items()
            if self.node_features.get(node) != labels
        ]
        return jobs + [delete(node) for node in dict.fromkeys(gone)]

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
