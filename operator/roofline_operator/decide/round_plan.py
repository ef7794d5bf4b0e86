"""One reconcile round of a profile, as a pure function of the observed world.

Level-triggered: the round compares what should be (every selected node profiled under the
current spec, labels in place) with what is (indexed nodes and pods, the records from status) and
returns the actions that close the gap. Running it twice on the same world yields no new actions,
which is what makes restarts, duplicate events and lagging watches harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from roofline_operator.core.names import LABEL_PROFILE, FailureReason, NodeState
from roofline_operator.core.nodes import NodeFacts, labels_match, select_nodes, unavailable_reason
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.attempts import (
    adopt_pod,
    due_at,
    fail_node,
    mark_unschedulable,
    start_cycle,
)
from roofline_operator.decide.hysteresis import Publication, record_profile
from roofline_operator.decide.labels import (
    LabelClaim,
    label_owners,
    label_patch,
    label_safe,
    node_labels_for,
)
from roofline_operator.decide.outcomes import (
    Failed,
    InFlight,
    Succeeded,
    Unschedulable,
    classify_pod,
)
from roofline_operator.decide.pods import (
    PodDefaults,
    PodFacts,
    ProfileRef,
    build_profiler_pod,
    profiler_pod_name,
)
from roofline_operator.decide.records import NodeRecord, record_annotation_key, record_to_annotation

#: How long a pod we created may stay invisible in the watch before one GET asks whether it
#: exists; a pod the GET finds gets this long again (the watch lags), one it does not is gone.
POD_APPEARANCE_GRACE_SECONDS = 30.0
#: How soon the round after one that asked for GETs comes, to act on their answers.
POD_CHECK_WAKE_SECONDS = 1.0
#: GETs of unseen pods per round, oldest launch first. One found pod proves the watch lags for
#: every pod launched no earlier (``PodLookups.lagging_since``), so a few answer for thousands.
POD_CHECKS_PER_ROUND = 10


@dataclass(frozen=True)
class PodCheck:
    """A GET to send: a pod the watch has not shown within the appearance grace."""

    namespace: str
    name: str
    #: When its record launched it (the round's time, before the create was sent).
    launched_at: float


@dataclass(frozen=True)
class PodLookups:
    """What the GETs of unseen pods answered (``apply.PlanApplier.check_pods``)."""

    #: Pods a GET found, by name, with when it found them.
    found: Mapping[str, float] = field(default_factory=dict)
    #: Pods a GET did not find.
    missing: frozenset[str] = frozenset()
    #: ``(launched_at, found_at)`` of the earliest-launched pod the latest GETs found. A watch
    #: shows pods in the order they were created, and a later round's creates start after an
    #: earlier round's completed, so a watch that has not shown that pod has not shown any pod
    #: launched since either: they all get the grace again from ``found_at``.
    lagging_since: tuple[float, float] | None = None


#: Pod phases after which a pod holds no GPU and its result is final.
FINISHED_PHASES = ("Succeeded", "Failed")
#: Shortest pause the round asks for, so that deadlines a hair in the future are not spun on.
MIN_WAKE_SECONDS = 0.05


@dataclass(frozen=True)
class RoundInput:
    profile: ProfileRef
    created_at: float
    spec: ProfileSpec
    spec_hash: str
    namespace: str
    image: str
    nodes: Mapping[str, NodeFacts]
    pods: Sequence[PodFacts]
    records: Mapping[str, NodeRecord]
    #: Every profile's label claim (this profile's own is ignored), to decide who owns a shared
    #: node's labels.
    claims: Sequence[LabelClaim]
    #: Pods this operator already asked to delete, whether or not the watch shows it yet.
    deleted: frozenset[str]
    now: float
    #: The ConfigMap holding the profile's valid models, for the pods to mount; ``None``
    #: without models.
    models_config_map: str | None = None
    #: What GETs of pods the watch does not show answered.
    pod_lookups: PodLookups = field(default_factory=PodLookups)
    #: A record's annotation text (``records.record_to_annotation``, possibly memoized).
    annotation_of: Callable[[NodeRecord], str | None] = record_to_annotation
    #: What the operator's configuration adds to every profiler pod (pull secrets, account).
    pod_defaults: PodDefaults = field(default_factory=PodDefaults)


@dataclass
class RoundPlan:
    records: dict[str, NodeRecord]
    creates: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[tuple[str, str]] = field(default_factory=list)
    #: Finished pods whose result this round read: deleted by collection, before any create.
    finished: list[PodFacts] = field(default_factory=list)
    label_patches: dict[str, dict[str, str | None]] = field(default_factory=dict)
    #: This profile's record annotation each node should carry, where it differs from what the
    #: node shows (``None``: remove it); sent in the same patch as the node's labels.
    record_annotations: dict[str, str | None] = field(default_factory=dict)
    #: This profile's record annotation of every node (``None``: none), for backends that write
    #: whole objects (NFD ``NodeFeature``) rather than node patches.
    annotation_texts: dict[str, str | None] = field(default_factory=dict)
    #: Pods the watch has not shown in time: one GET each tells a lagging watch from a lost pod.
    pod_checks: list[PodCheck] = field(default_factory=list)
    #: The whole label set each considered node should carry (``None``: none of ours), for
    #: backends that write the set rather than a patch (NFD ``NodeFeature`` objects).
    label_sets: dict[str, dict[str, str] | None] = field(default_factory=dict)
    failures: list[tuple[str, Failed]] = field(default_factory=list)
    #: Nodes whose pod the scheduler could not place in time (busy GPUs): tried again later.
    unschedulable: list[tuple[str, Unschedulable]] = field(default_factory=list)
    profiled: list[str] = field(default_factory=list)
    #: Nodes whose new profile changed a published number materially (``hysteresis.py``).
    changes: list[tuple[str, Publication]] = field(default_factory=list)
    #: Nodes whose new profile was held back for interference (``hysteresis.py``).
    held: list[tuple[str, Publication]] = field(default_factory=list)
    #: Selected nodes whose labels another, older profile owns, with that owner.
    conflicts: dict[str, str] = field(default_factory=dict)
    #: Seconds until the next deadline (timeout, retry, re-profile), if any.
    wake_in: float | None = None

    def wake_at(self, seconds: float) -> None:
        seconds = max(seconds, MIN_WAKE_SECONDS)
        self.wake_in = seconds if self.wake_in is None else min(self.wake_in, seconds)


def _is_due(record: NodeRecord, inp: RoundInput, plan: RoundPlan) -> bool:
    """Whether a node that has no pod should get one now; registers its next deadline if not."""
    due = due_at(record, inp.spec, inp.spec_hash, inp.now)
    if due is None:
        return False
    if due <= inp.now:
        return True
    plan.wake_at(due - inp.now)
    return False


def _follow_pod(
    record: NodeRecord, pod: PodFacts | None, inp: RoundInput, plan: RoundPlan
) -> NodeRecord:
    """Advance a PROFILING record by what its pod shows."""
    if pod is None:
        return _follow_unseen_pod(record, inp, plan)
    outcome = classify_pod(pod, inp.spec, inp.now, record.gpus)
    if isinstance(outcome, InFlight):
        _register_pod_deadline(pod, inp, plan)
        return record
    if pod.phase in FINISHED_PHASES:
        plan.finished.append(pod)
    else:
        plan.deletes.append((pod.namespace, pod.name))
    if isinstance(outcome, Succeeded):
        plan.profiled.append(record.name)
        threshold = inp.spec.change_threshold_percent
        record, publication = record_profile(record, outcome.result, threshold)
        if publication.changes:
            plan.changes.append((record.name, publication))
        if publication.held:
            plan.held.append((record.name, publication))
        return replace(
            record,
            state=NodeState.PROFILED,
            pod=None,
            pod_namespace=None,
            reason=None,
            message=None,
            next_attempt_at=None,
        )
    if isinstance(outcome, Unschedulable):
        plan.unschedulable.append((record.name, outcome))
        return mark_unschedulable(record, outcome, inp.spec, inp.now)
    plan.failures.append((record.name, outcome))
    return fail_node(record, outcome, inp.spec, inp.now)


def _follow_unseen_pod(record: NodeRecord, inp: RoundInput, plan: RoundPlan) -> NodeRecord:
    """A PROFILING record whose pod the watch does not show: wait out the appearance grace,
    then let one GET decide; only a pod the API server does not have either is gone.

    A watch can lag far behind the creates (10,000 pods created at once); taking that lag for
    lost pods would fail and re-create them all, which lags the watch further.
    """
    pod = record.pod or ""
    lookups = inp.pod_lookups
    if pod in lookups.missing:
        failure = Failed(FailureReason.POD_GONE, f"pod {record.pod} disappeared")
        plan.failures.append((record.name, failure))
        return fail_node(record, failure, inp.spec, inp.now)
    launched = record.last_attempt_at or inp.now
    since = max(launched, lookups.found.get(pod, 0.0))
    if lookups.lagging_since is not None and launched >= lookups.lagging_since[0]:
        since = max(since, lookups.lagging_since[1])
    if inp.now - since < POD_APPEARANCE_GRACE_SECONDS:
        plan.wake_at(since + POD_APPEARANCE_GRACE_SECONDS - inp.now)
        return record
    plan.pod_checks.append(PodCheck(record.pod_namespace or inp.namespace, pod, launched))
    plan.wake_at(POD_CHECK_WAKE_SECONDS)
    return record


def _register_pod_deadline(pod: PodFacts, inp: RoundInput, plan: RoundPlan) -> None:
    if pod.phase == "Running" and pod.started_at is not None:
        plan.wake_at(pod.started_at + inp.spec.timeout_seconds - inp.now + 0.01)
    elif pod.phase == "Pending" and pod.created_at is not None:
        plan.wake_at(pod.created_at + inp.spec.pending_timeout_seconds - inp.now + 0.01)


def _launch(record: NodeRecord, inp: RoundInput, plan: RoundPlan) -> NodeRecord:
    attempt = record.attempts + 1
    plan.creates.append(
        build_profiler_pod(
            profile=inp.profile,
            spec=inp.spec,
            node=record.name,
            gpus=record.gpus,
            attempt=attempt,
            spec_hash=inp.spec_hash,
            namespace=inp.namespace,
            image=inp.image,
            models_config_map=inp.models_config_map,
            defaults=inp.pod_defaults,
        )
    )
    return replace(
        record,
        state=NodeState.PROFILING,
        attempts=attempt,
        last_attempt_at=inp.now,
        next_attempt_at=None,
        pod=profiler_pod_name(inp.profile.name, record.name, inp.spec_hash, attempt),
        pod_namespace=inp.namespace,
    )


def _retain_unavailable(record: NodeRecord, inp: RoundInput, plan: RoundPlan) -> NodeRecord | None:
    """The record of a node that left the selection but still exists and matches the profile's
    labels (NotReady, cordoned or tainted, no allocatable GPUs for now): kept, with its labels and
    record annotation, for ``spec.retainUnavailableFor``, so an outage loses no publication.

    ``None`` when the node is gone, no longer matches, has nothing published, or was unavailable
    for longer: its record goes, as before.
    """
    node = inp.nodes.get(record.name)
    if node is None or record.result is None:
        return None
    if not labels_match(inp.spec.selection, node.labels):
        return None
    since = record.unavailable_since if record.unavailable_since is not None else inp.now
    until = since + inp.spec.retain_unavailable_seconds
    if until <= inp.now:
        return None
    plan.wake_at(until - inp.now)
    return replace(
        record,
        state=NodeState.UNAVAILABLE,
        unavailable_since=since,
        pod=None,
        pod_namespace=None,
        next_attempt_at=None,
        reason="Unavailable",
        message=f"node {record.name} {unavailable_reason(node, inp.spec.selection)}",
    )


def _returned(record: NodeRecord) -> NodeRecord:
    """A retained node selected again: its publication stands, as if it never left."""
    return replace(
        record,
        state=NodeState.PROFILED,
        unavailable_since=None,
        reason=None,
        message=None,
    )


def _plan_labels(
    inp: RoundInput, selected: Mapping[str, int], records: Mapping[str, NodeRecord], plan: RoundPlan
) -> None:
    ours = inp.profile.name
    own = LabelClaim(ours, inp.created_at, inp.spec.selection if inp.spec.label_nodes else None)
    claims = [c for c in inp.claims if c.name != ours]
    owners = label_owners([*claims, own], inp.nodes.values())
    for name, node in inp.nodes.items():
        record = records.get(name)
        owner = owners.get(name)
        if inp.spec.label_nodes and name in selected and owner not in (None, ours):
            plan.conflicts[name] = str(owner)
        desired = None
        # A retained unavailable node is selected by no one, and keeps the labels it had.
        retained = record is not None and record.state is NodeState.UNAVAILABLE
        owns = owner == ours or (owner is None and retained)
        if owns and record is not None and record.result is not None:
            result = record.result
            desired = node_labels_for(result.worst_gpu(), ours, result.device_or(inp.spec.device))
        elif node.labels.get(LABEL_PROFILE) != label_safe(ours):
            continue
        plan.label_sets[name] = desired
        patch = label_patch(node.labels, desired)
        if patch is not None:
            plan.label_patches[name] = patch


def _plan_record_annotations(
    inp: RoundInput, records: Mapping[str, NodeRecord], plan: RoundPlan
) -> None:
    """Each node's record annotation of this profile: its record's publication, none for nodes
    without a record (no longer selected) or without a result."""
    key = record_annotation_key(inp.profile.name)
    for name, node in inp.nodes.items():
        record = records.get(name)
        desired = inp.annotation_of(record) if record is not None else None
        plan.annotation_texts[name] = desired
        if node.records.get(key) != desired:
            plan.record_annotations[name] = desired


def plan_round(inp: RoundInput) -> RoundPlan:
    """Decide this round's pod creates and deletes, label patches and new records."""
    selected = select_nodes(inp.nodes.values(), inp.spec.selection)
    plan = RoundPlan(records={})
    live: dict[str, list[PodFacts]] = {}
    busy = 0
    for pod in inp.pods:
        if pod.deleting or pod.name in inp.deleted:
            busy += 1
        else:
            live.setdefault(pod.node, []).append(pod)
    for name, record in inp.records.items():
        if name in selected:
            continue
        retained = _retain_unavailable(record, inp, plan)
        if retained is not None:
            plan.records[name] = retained
            plan.deletes.extend((p.namespace, p.name) for p in live.pop(name, []))
            continue
        if record.state is NodeState.PROFILING and name not in inp.nodes:
            plan.failures.append((name, Failed(FailureReason.NODE_GONE, f"node {name} is gone")))
        plan.deletes.extend((p.namespace, p.name) for p in live.pop(name, []))
    for pods in [live.pop(n) for n in list(live) if n not in selected]:
        plan.deletes.extend((p.namespace, p.name) for p in pods)

    queue: list[NodeRecord] = []
    for name, gpus in selected.items():
        pods = live.get(name, [])
        record = inp.records.get(name) or NodeRecord(name=name, gpus=gpus)
        if record.state is NodeState.UNAVAILABLE:
            record = _returned(record)
        if record.gpus != gpus:
            record = replace(record, gpus=gpus)
        record = adopt_pod(record, pods, inp.spec_hash, inp.now)
        current = next((p for p in pods if p.name == record.pod), None)
        plan.deletes.extend((p.namespace, p.name) for p in pods if p is not current)
        if record.state is NodeState.PROFILING:
            record = _follow_pod(record, current, inp, plan)
        if record.state is not NodeState.PROFILING and _is_due(record, inp, plan):
            record = start_cycle(record, inp.spec_hash)
            queue.append(record)
        plan.records[name] = record

    active = busy + sum(r.state is NodeState.PROFILING for r in plan.records.values())
    queue.sort(key=lambda r: (r.result is not None, r.next_attempt_at or 0.0, r.name))
    for record in queue[: max(inp.spec.max_parallel - active, 0)]:
        plan.records[record.name] = _launch(record, inp, plan)
    plan.pod_checks.sort(key=lambda c: (c.launched_at, c.name))
    del plan.pod_checks[POD_CHECKS_PER_ROUND:]
    _plan_labels(inp, selected, plan.records, plan)
    _plan_record_annotations(inp, plan.records, plan)
    return plan
