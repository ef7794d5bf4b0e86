"""Rounds of one profile as tests build them: the round's input, the pods it created as the watch
shows them, those pods finished, and whole profiling cycles of one node ending in a given result.

Shared by the round planner's tests, the publication tests and the host-state hysteresis tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tests.operator.unit.operator_builders import device, node, profile, spec, succeeded_pod
from tests.profiler.headline_builders import with_number_intervals, with_values

from roofline_operator.core.nodes import NodeFacts
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.labels import LabelClaim
from roofline_operator.decide.pods import PodFacts, ProfileRef, pod_facts
from roofline_operator.decide.records import NodeRecord
from roofline_operator.decide.round_plan import RoundInput, RoundPlan, plan_round
from roofline_profiler.wire.compact import CompactDevice, encode_compact

NOW = 10_000.0
DEFAULT_SPEC = spec(maxParallel=2, retryBackoffSeconds=10, maxAttempts=2)
REPROFILE = spec(reprofileInterval="1h", maxParallel=2)


def world(
    nodes: Sequence[NodeFacts],
    *,
    the_spec: ProfileSpec | None = None,
    pods: Sequence[PodFacts] = (),
    records: dict[str, NodeRecord] | None = None,
    claims: Sequence[LabelClaim] = (),
    deleted: frozenset[str] = frozenset(),
    now: float = NOW,
) -> RoundInput:
    chosen = the_spec or DEFAULT_SPEC
    return RoundInput(
        profile=ProfileRef("fleet", "uid-1"),
        created_at=500.0,
        spec=chosen,
        spec_hash=chosen.measurement_hash(),
        namespace="roofline-system",
        image="roofline:test",
        nodes={n.name: n for n in nodes},
        pods=pods,
        records=records or {},
        claims=claims,
        deleted=deleted,
        now=now,
    )


def created_pods(plan: RoundPlan, at: float = NOW) -> list[PodFacts]:
    """The planned pods as the watch would show them right after creation."""
    pods = []
    for body in plan.creates:
        body = {**body, "metadata": {**body["metadata"], "creationTimestamp": None}}
        pods.append(replace(pod_facts(body), created_at=at))
    return pods


def finished(pod: PodFacts, message: str | None = None, **changes: Any) -> PodFacts:
    done = succeeded_pod(pod.name, pod.node, pod.spec_hash, pod.attempt, message=message)
    return replace(done, **changes)


def with_intervals(
    d: CompactDevice, relative: float = 0.01, batches: tuple[int, int] | None = None
) -> CompactDevice:
    def around(value: float) -> tuple[float, float]:
        return (value * (1 - relative), value * (1 + relative))

    mb = d.recommended_min_batch
    return with_number_intervals(
        d,
        bandwidth_bytes_per_second=around(d.bandwidth_bytes_per_second),
        peak_flops_per_second=around(d.peak_flops_per_second),
        ridge_point=around(d.ridge_point),
        recommended_min_batch=batches or (mb, mb),
    )


def message(
    bandwidth: float, at: float, relative: float = 0.01, warnings: tuple[str, ...] = ()
) -> str:
    """A one-GPU result whose peak stays put, so the ridge point follows the bandwidth."""
    peak = 180.0 * 4.3e12
    d = replace(
        with_values(
            device(bandwidth=bandwidth), peak_flops_per_second=peak, ridge_point=peak / bandwidth
        ),
        warnings=warnings,
    )
    return encode_compact(profile(with_intervals(d, relative), created_at=at))


def profile_once(records: dict[str, NodeRecord], text: str, now: float) -> RoundPlan:
    """One profiling cycle of node ``a``: a pod is launched, then finishes with ``text``."""
    launch = plan_round(world([node("a")], the_spec=REPROFILE, records=records, now=now))
    (pod,) = created_pods(launch, at=now)
    done = finished(pod, message=text)
    return plan_round(
        world([node("a")], the_spec=REPROFILE, pods=[done], records=launch.records, now=now + 30)
    )


def reprofile(first: RoundPlan, text: str, at: float) -> RoundPlan:
    """The next profiling cycle of node ``a``, labelled by ``first``, finishing with ``text``."""
    labelled = {k: v for k, v in first.label_patches["a"].items() if v}
    launch = plan_round(
        world([node("a", labels=labelled)], the_spec=REPROFILE, records=first.records, now=at)
    )
    (pod,) = created_pods(launch, at=at)
    done = finished(pod, message=text)
    return plan_round(
        world(
            [node("a", labels=labelled)],
            the_spec=REPROFILE,
            pods=[done],
            records=launch.records,
            now=at + 30,
        )
    )
