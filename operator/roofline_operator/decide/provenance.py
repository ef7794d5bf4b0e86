"""Which pods a profile may believe: only the profiler pods the operator itself created.

Anyone who may create a pod somewhere can give it our labels and annotations, name any profile,
node, attempt and spec digest, and write any termination message. What a tenant cannot forge is
where the pod lives and who owns it: pods in the profiler namespace are created by the operator
alone (its RBAC, no one else's), the owner reference carries the profile's UID, and the name is
derived from the annotations (``pods.profiler_pod_name``), so a pod whose annotations were
edited after its creation no longer matches its name. A pod that fails any of the three is
*foreign*: it is never adopted, its result never read, it is never deleted (it is not ours to
delete), and it is counted and reported once an hour per profile.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from roofline_operator.decide.pods import PodFacts, ProfileRef, profiler_pod_name

#: At most one Warning Event about foreign pods per profile in this many seconds.
FOREIGN_EVENT_INTERVAL_SECONDS = 3600.0
#: Foreign pods a profile remembers (to count each once); older ones are forgotten first.
MAX_REMEMBERED_FOREIGN_PODS = 10_000


def foreign_reason(pod: PodFacts, profile: ProfileRef, namespaces: Iterable[str]) -> str | None:
    """Why ``pod`` is not one of ``profile``'s profiler pods; ``None`` when it is."""
    if pod.namespace not in set(namespaces):
        return f"it runs in namespace {pod.namespace!r}, not in the profiler namespace"
    if not profile.uid or profile.uid not in pod.owner_uids:
        return "no owner reference names the profile's UID"
    if pod.name != profiler_pod_name(profile.name, pod.node, pod.spec_hash, pod.attempt):
        return "its name is not the one its annotations derive"
    return None


@dataclass(frozen=True)
class Partition:
    """A profile's pods as the watch shows them, split by provenance."""

    own: list[PodFacts]
    #: ``(pod, reason)`` of every pod that only claims to be ours.
    foreign: list[tuple[PodFacts, str]]


def partition(
    pods: Sequence[PodFacts], profile: ProfileRef, namespaces: Iterable[str]
) -> Partition:
    allowed = frozenset(namespaces)
    own: list[PodFacts] = []
    foreign: list[tuple[PodFacts, str]] = []
    for pod in pods:
        reason = foreign_reason(pod, profile, allowed)
        if reason is None:
            own.append(pod)
        else:
            foreign.append((pod, reason))
    return Partition(own, foreign)


@dataclass
class ForeignPodLog:
    """Which foreign pods a profile has already counted, and when it last reported them."""

    seen: dict[tuple[str, str], None] = field(default_factory=dict)
    last_event_at: float | None = None
    #: Foreign pods counted but not yet reported in an Event.
    unreported: int = 0

    def record(self, foreign: Sequence[tuple[PodFacts, str]], now: float) -> tuple[int, bool]:
        """``(pods seen for the first time, whether to post a Warning Event now)``.

        An Event is due while some counted pod is unreported and none was posted in the last
        :data:`FOREIGN_EVENT_INTERVAL_SECONDS`.
        """
        new = 0
        for pod, _ in foreign:
            key = (pod.namespace, pod.name)
            if key not in self.seen:
                self.seen[key] = None
                new += 1
        while len(self.seen) > MAX_REMEMBERED_FOREIGN_PODS:
            del self.seen[next(iter(self.seen))]
        self.unreported += new
        quiet = (
            self.last_event_at is None or now - self.last_event_at >= FOREIGN_EVENT_INTERVAL_SECONDS
        )
        announce = self.unreported > 0 and quiet and bool(foreign)
        if announce:
            self.last_event_at = now
            self.unreported = 0
        return new, announce


def describe(foreign: Sequence[tuple[PodFacts, str]], limit: int = 3) -> str:
    """One line naming a few foreign pods and why each was ignored."""
    shown = "; ".join(f"{p.namespace}/{p.name}: {reason}" for p, reason in foreign[:limit])
    more = len(foreign) - limit
    return f"{shown}; and {more} more" if more > 0 else shown
