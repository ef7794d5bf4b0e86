"""The Kubernetes Events a reconcile round posts on its profile, with the counters they go with.

Events are aggregated: one per failure reason per round, one ``DeviceChanged``, one
``ProfileHeldBack``, one ``Unschedulable`` and one ``Profiled`` naming the nodes concerned, so a
fleet of thousands of nodes costs a handful of Events a round, not one per node. Per-node lines
go to this module's logger instead, not to Kopf's per-object one, which would post each line as
an Event too.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import kopf

from roofline_operator.core.names import FailureReason
from roofline_operator.decide import peers, product_label, provenance
from roofline_operator.decide.outcomes import Failed
from roofline_operator.decide.pods import PodFacts
from roofline_operator.decide.round_plan import RoundPlan
from roofline_operator.run.metrics import OperatorMetrics
from roofline_profiler.wire.warning_codes import HOST_STATE_CODE

#: The API server keeps an Event's message short; longer ones are cut here.
MAX_EVENT_MESSAGE_CHARS = 1000
#: Nodes an aggregated Event names before it only counts them.
NAMED_NODES = 5

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileEvents:
    """Where one profile's Events go (its object) and the counters that count what they tell."""

    body: Mapping[str, Any]
    profile: str
    metrics: OperatorMetrics

    def announce_round(self, plan: RoundPlan, failures: list[tuple[str, Failed]]) -> None:
        """Everything a round has to tell: failures, changed devices, held-back profiles,
        unschedulable pods, profiled nodes."""
        self.announce_failures(failures)
        self.announce_changes(plan)
        self.announce_held(plan)
        self.announce_unschedulable(plan)
        self.announce_profiled(plan)

    def announce_failures(self, failures: list[tuple[str, Failed]]) -> None:
        """Failure counters, one log line per node, and one Warning Event per failure reason."""
        by_reason: dict[FailureReason, list[str]] = defaultdict(list)
        for node, failure in failures:
            self.metrics.failures.labels(self.profile, failure.reason.value).inc()
            by_reason[failure.reason].append(node)
            logger.warning(
                "Profile %s: node %s failed (%s): %s",
                self.profile,
                node,
                failure.reason.value,
                failure.message,
            )
        for reason, nodes in by_reason.items():
            first = next(f.message for n, f in failures if f.reason is reason)
            message = f"{len(nodes)} node(s) failed ({', '.join(nodes[:NAMED_NODES])}): {first}"
            self._warn(reason.value, message)

    def announce_changes(self, plan: RoundPlan) -> None:
        """One ``DeviceChanged`` Event per round naming the nodes whose published numbers moved
        materially: a Warning when a GPU lost bandwidth or peak, else Normal."""
        if not plan.changes:
            return
        for _, publication in plan.changes:
            for change in publication.changes:
                self.metrics.device_changes.labels(self.profile, change.quantity).inc()
        message = "; ".join(f"node {node}: {p.describe()}" for node, p in plan.changes)
        degraded = any(
            c.quantity in ("bandwidth", "peak") and c.new < c.old
            for _, p in plan.changes
            for c in p.changes
        )
        logger.warning("Profile %s: %s", self.profile, message)
        self._event("Warning" if degraded else "Normal", "DeviceChanged", message)

    def announce_unschedulable(self, plan: RoundPlan) -> None:
        """One Normal ``Unschedulable`` Event per round naming the nodes whose pod could not be
        scheduled: busy GPUs are the normal state of a serving fleet, not a failure."""
        if not plan.unschedulable:
            return
        nodes = [node for node, _ in plan.unschedulable]
        message = (
            f"{len(nodes)} node(s) could not schedule a profiler pod "
            f"({', '.join(nodes[:NAMED_NODES])}), "
            f"tried again later: {plan.unschedulable[0][1].message}"
        )
        logger.info("Profile %s: %s", self.profile, message)
        self._event("Normal", "Unschedulable", message)

    def announce_held(self, plan: RoundPlan) -> None:
        """One ``ProfileHeldBack`` Warning Event per round naming the nodes whose new profile
        warned of interference and so moved no published number."""
        if not plan.held:
            return
        self.metrics.held_back.labels(self.profile).inc(len(plan.held))
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
        logger.warning("Profile %s: %s", self.profile, message)
        self._event("Warning", "ProfileHeldBack", message)

    def announce_profiled(self, plan: RoundPlan) -> None:
        """One Normal ``Profiled`` Event per round naming the nodes that published a profile."""
        if not plan.profiled:
            return
        more = " ..." if len(plan.profiled) > NAMED_NODES else ""
        names = ", ".join(plan.profiled[:NAMED_NODES]) + more
        message = f"Profiled {len(plan.profiled)} node(s): {names}"
        kopf.event(cast(kopf.Body, self.body), type="Normal", reason="Profiled", message=message)

    def announce_slower(self, view: peers.FleetView, announced: frozenset[str]) -> frozenset[str]:
        """One ``SlowerThanPeers`` Warning Event per round in which nodes became slower than
        their peers, naming them; returns the nodes slower now (a node that recovers and falls
        behind again is news again)."""
        slower = frozenset(view.slower_nodes())
        new = sorted(slower - announced)
        if new:
            lines = "; ".join(
                f"node {n}: {peers.describe(view.standings[n])}" for n in new[:NAMED_NODES]
            )
            more = f"; and {len(new) - NAMED_NODES} more node(s)" if len(new) > NAMED_NODES else ""
            message = (
                f"{lines}{more}: more than {view.threshold_percent}% below the median of their "
                "GPU class beyond the uncertainty (check clocks, power and thermal throttling, "
                "links and driver settings)"
            )
            logger.warning("Profile %s: %s", self.profile, message)
            self._warn("SlowerThanPeers", message)
        return slower

    def announce_mismatches(
        self, view: peers.FleetView, announced: frozenset[str]
    ) -> frozenset[str]:
        """One ``ProductLabelMismatch`` Warning Event per round in which nodes were found whose
        ``nvidia.com/gpu.product`` label disagrees with the product they measured, naming both
        values; returns the nodes mismatched now (each announced once while it lasts)."""
        mismatched = frozenset(view.mismatches)
        new = sorted(mismatched - announced)
        if new:
            lines = "; ".join(
                product_label.describe(n, view.mismatches[n]) for n in new[:NAMED_NODES]
            )
            more = f"; and {len(new) - NAMED_NODES} more node(s)" if len(new) > NAMED_NODES else ""
            message = (
                f"{lines}{more} (check GPU Feature Discovery on the node, and who else may "
                "write its labels)"
            )
            logger.warning("Profile %s: %s", self.profile, message)
            self._warn("ProductLabelMismatch", message)
        return mismatched

    def announce_foreign_pods(self, foreign: Sequence[tuple[PodFacts, str]]) -> None:
        """A Warning ``ForeignPodIgnored`` naming a few pods that carry the profile's labels but
        that the operator did not create (``provenance.py`` says when one is due)."""
        message = (
            f"ignored {len(foreign)} pod(s) that carry this profile's labels but "
            f"were not created by the operator: {provenance.describe(foreign)}"
        )
        logger.warning("Profile %s: %s", self.profile, message)
        self._warn("ForeignPodIgnored", message)

    def _warn(self, reason: str, message: str) -> None:
        kopf.warn(
            cast(kopf.Body, self.body), reason=reason, message=message[:MAX_EVENT_MESSAGE_CHARS]
        )

    def _event(self, type: str, reason: str, message: str) -> None:
        kopf.event(
            cast(kopf.Body, self.body),
            type=type,
            reason=reason,
            message=message[:MAX_EVENT_MESSAGE_CHARS],
        )
