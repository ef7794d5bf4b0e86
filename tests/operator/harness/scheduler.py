"""A fake kube-scheduler: binds pending pods where their affinity, taints and GPUs allow.

The profiler pod requests the node's GPUs and is pinned by a required node affinity, so whether it
runs depends on what else holds those GPUs. The scheduler accounts extended resources (such as
``nvidia.com/gpu``) of every bound, unfinished pod against the node's allocatable, and leaves a pod
that does not fit ``Pending`` with ``PodScheduled=False``/``Unschedulable``, which is what the
operator must turn into a per-node failure.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .defaulting import now_rfc3339
from .faults import FaultBook, FaultMode
from .resources import ApiError
from .store import ObjectStore

#: Unschedulable pods are retried this often, as the real scheduler's backoff queue does.
RETRY_SECONDS = 0.5
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
#: The reasons kube-scheduler gives, in its words.
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def unschedulable_message(reasons: Mapping[str, int], total: int) -> str:
    """kube-scheduler's ``FailedScheduling`` message (v1.35, as the real node shows it): the
    filter reasons by count, then what preemption found. Freeing resources could make room
    ("No preemption victims found" when nothing of lower priority holds them); a taint or an
    affinity could not."""
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    preemption: Counter[str] = Counter()
    for reason, count in reasons.items():
        if reason.startswith("Insufficient "):
            preemption["No preemption victims found for incoming pod"] += count
        else:
            preemption["Preemption is not helpful for scheduling"] += count
    after = ", ".join(f"{n} {r}" for r, n in sorted(preemption.items()))
    return (
        f"0/{total} nodes are available: {detail}. no new claims to deallocate, "
        f"preemption: 0/{total} nodes are available: {after}."
    )


def extended_requests(pod: Mapping[str, Any]) -> Counter[str]:
    """Requested extended resources (``vendor/name``); CPU and memory are not accounted here."""
    total: Counter[str] = Counter()
    for container in pod.get("spec", {}).get("containers", []):
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in merged.items():
            if "/" in name:
                total[name] += int(str(quantity))
    return total


def _expression_matches(expression: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "In")
    wanted = expression.get("values") or []
    if operator == "In":
        return key in values and values[key] in wanted
    if operator == "NotIn":
        return values.get(key) not in wanted
    if operator == "Exists":
        return key in values
    if operator == "DoesNotExist":
        return key not in values
    return False


def _affinity_allows(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = pod.get("spec", {})
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not required:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    return any(
        all(_expression_matches(e, labels) for e in term.get("matchExpressions", []))
        and all(_expression_matches(e, fields) for e in term.get("matchFields", []))
        for term in required.get("nodeSelectorTerms", [])
    )


def _pinned_node(pod: Mapping[str, Any]) -> str | None:
    """The node a pod's required affinity names by ``matchFields`` ``metadata.name In [one]``
    in its only term (how profiler pods are pinned), else ``None``."""
    required = (
        pod.get("spec", {})
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    terms = (required or {}).get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return None
    for field in terms[0].get("matchFields") or []:
        values = field.get("values") or []
        if (
            field.get("key") == "metadata.name"
            and field.get("operator") == "In"
            and len(values) == 1
        ):
            return str(values[0])
    return None


def _tolerates(pod: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    for toleration in pod.get("spec", {}).get("tolerations") or []:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (
            None,
            "",
            taint["key"],
        ):
            return True
        if toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def _taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    taints = [
        t for t in node.get("spec", {}).get("taints") or [] if t.get("effect") != "PreferNoSchedule"
    ]
    if node.get("spec", {}).get("unschedulable"):
        taints.append({"key": _UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
    return taints


def _is_active(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")


def unschedulable_condition(pod: Mapping[str, Any], message: str) -> dict[str, Any] | None:
    """The ``PodScheduled=False`` condition a scheduler posts for ``message``; ``None`` when the
    pod already carries that verdict (posting it again would only wake every watcher)."""
    conditions = pod.get("status", {}).get("conditions", [])
    current: dict[str, Any] = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    if current.get("message") == message:
        return None
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": now_rfc3339(),
    }


class FakeScheduler:
    """Keeps, from its pod watch, the pending pods and the active pods bound to each node, so a
    pass costs what it schedules, not a listing of every pod and node (10,000 nodes and pods)."""

    def __init__(self, store: ObjectStore, faults: FaultBook) -> None:
        self.store = store
        self.faults = faults
        self.pods = store.find_type("pods")
        self.nodes = store.find_type("nodes")
        #: Unbound, active pods not being deleted, by (namespace, name).
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}
        #: Active pods bound to each node, with their extended resource requests.
        self.on_node: dict[str, dict[tuple[str, str], Counter[str]]] = {}
        self.node_of: dict[tuple[str, str], str] = {}

    def observe(self, pod: Mapping[str, Any], deleted: bool) -> None:
        """Track one pod event: pending or bound, active or finished."""
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        self.pending.pop(key, None)
        previous = self.node_of.pop(key, None)
        if previous is not None:
            self.on_node[previous].pop(key, None)
        if deleted or not _is_active(pod):
            return
        node = pod.get("spec", {}).get("nodeName")
        if node:
            self.on_node.setdefault(node, {})[key] = extended_requests(pod)
            self.node_of[key] = node
        elif not meta.get("deletionTimestamp"):
            self.pending[key] = dict(pod)

    def _free(self, name: str, node: Mapping[str, Any]) -> Counter[str]:
        if self.faults.mode(name) is FaultMode.NEVER_SCHEDULE:
            return Counter()
        allocatable = node.get("status", {}).get("allocatable", {})
        free = Counter({k: int(str(v)) for k, v in allocatable.items() if "/" in k})
        for requests in self.on_node.get(name, {}).values():
            free.subtract(requests)
        return free

    def _node_count(self) -> int:
        return sum(1 for key in self.store.objects if key[:2] == ("", "nodes"))

    def _candidates(self, pod: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], bool]:
        """The nodes worth checking for ``pod``, and whether the rest fail its affinity: a pinned
        pod has one candidate, its named node, instead of every node of the cluster."""
        pinned = _pinned_node(pod)
        if pinned is None:
            return {n["metadata"]["name"]: n for n in self.store.list(self.nodes, None)}, False
        try:
            return {pinned: self.store.get(self.nodes, None, pinned)}, True
        except ApiError:
            return {}, True

    def schedule_once(self) -> int:
        """One pass over unbound pods, oldest first; returns how many were bound."""
        pending = sorted(self.pending.values(), key=lambda p: p["metadata"]["creationTimestamp"])
        free: dict[str, Counter[str]] = {}
        bound = 0
        for pod in pending:
            wanted = extended_requests(pod)
            reasons: Counter[str] = Counter()
            candidates, pinned = self._candidates(pod)
            chosen = None
            for name, node in candidates.items():
                if name not in free:
                    free[name] = self._free(name, node)
                if not _affinity_allows(pod, node):
                    reasons[AFFINITY_MISMATCH] += 1
                elif any(not _tolerates(pod, t) for t in _taints(node)):
                    reasons[UNTOLERATED_TAINT] += 1
                elif any(free[name][r] < q for r, q in wanted.items()):
                    short = next(r for r, q in wanted.items() if free[name][r] < q)
                    reasons[insufficient(short)] += 1
                else:
                    chosen = name
                    break
            if chosen is not None:
                free[chosen].subtract(wanted)
                self._bind(pod, chosen)
                bound += 1
            else:
                total = self._node_count() if pinned else len(candidates)
                if total > len(candidates):
                    reasons[AFFINITY_MISMATCH] += total - len(candidates)
                self._unschedulable(pod, unschedulable_message(reasons, total))
        return bound

    def _bind(self, pod: Mapping[str, Any], node: str) -> None:
        meta = pod["metadata"]
        self.store.patch(
            self.pods,
            meta["namespace"],
            meta["name"],
            "application/merge-patch+json",
            {"spec": {"nodeName": node}},
        )
        condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()}
        self._set_condition(meta, condition)

    def _set_condition(self, meta: Mapping[str, Any], condition: dict[str, Any]) -> None:
        """Write PodScheduled through the status subresource, as the real scheduler does."""
        self.store.patch(
            self.pods,
            meta["namespace"],
            meta["name"],
            "application/strategic-merge-patch+json",
            {"status": {"conditions": [condition]}},
            subresource="status",
        )

    def _unschedulable(self, pod: Mapping[str, Any], message: str) -> None:
        condition = unschedulable_condition(pod, message)
        if condition is not None:
            self._set_condition(pod["metadata"], condition)

    async def run(self) -> None:
        subscription = self.store.subscribe(self.pods, None, None, None)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    event = await asyncio.wait_for(subscription.queue.get(), timeout=RETRY_SECONDS)
                    self.observe(event.object, event.type == "DELETED")
                while not subscription.queue.empty():
                    event = subscription.queue.get_nowait()
                    self.observe(event.object, event.type == "DELETED")
                self.schedule_once()
        finally:
            self.store.events.unsubscribe(subscription)
