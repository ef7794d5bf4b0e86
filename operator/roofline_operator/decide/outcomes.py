"""What a profiler pod's state means: still running, a result, or a failure with a reason.

Everything is read from the watched pod object (phase, container state, termination message), so
judging a thousand pods costs no API request.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline_operator.core.names import FailureReason
from roofline_operator.core.node_results import NodeResult, from_compact
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.asked import refusal
from roofline_operator.decide.pods import PodFacts
from roofline_profiler.core.errors import first_line
from roofline_profiler.core.limits import DEFAULT_BATCHES
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.compact_relations import check_relations

#: Longest failure message kept in status; a termination message can be 4 KiB.
MAX_MESSAGE_CHARS = 300


@dataclass(frozen=True)
class InFlight:
    """The pod is pending or running within its time limits."""


@dataclass(frozen=True)
class Succeeded:
    result: NodeResult


@dataclass(frozen=True)
class Failed:
    reason: FailureReason
    message: str


@dataclass(frozen=True)
class Unschedulable:
    """The pod stayed Pending without a node past ``pendingTimeoutSeconds``.

    Not a failure: on a serving node the GPUs are simply taken. ``message`` is the scheduler's
    own verdict (``0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``).
    """

    message: str


Outcome = InFlight | Succeeded | Failed | Unschedulable


def _succeeded(pod: PodFacts, spec: ProfileSpec, now: float, gpus: int | None) -> Outcome:
    """The pod's result, read through the validating decoder: every number plausible, its
    time near ``now`` and not before the pod's creation, no more devices than GPUs requested,
    its sweep the one the spec asked for, its fields consistent (``compact_relations.py``), its
    backend, dtype and decode shape the ones the pod was asked for (``asked.py``).
    Anything else fails this node alone, with a message naming the field."""
    message = pod.terminated.message if pod.terminated else None
    try:
        profile = decode_compact(message or "", now=now, gpus=gpus)
        if not set(profile.batches) <= set(spec.batches or DEFAULT_BATCHES):
            raise CompactDecodeError("result: field 'b' holds batches the spec did not ask for")
        check_relations(profile, not_before=pod.created_at)
        refused = refusal(profile, pod.asked)
        if refused is None:
            asked = pod.asked.device if pod.asked is not None else None
            return Succeeded(from_compact(profile, pod.spec_hash, asked))
    except CompactDecodeError as exc:
        return Failed(
            FailureReason.INVALID_RESULT, first_line(exc, "invalid result", MAX_MESSAGE_CHARS)
        )
    reason, why = refused
    return Failed(reason, first_line(why, "invalid result", MAX_MESSAGE_CHARS))


def _failed(pod: PodFacts) -> Outcome:
    terminated = pod.terminated
    if pod.reason == "DeadlineExceeded":
        return Failed(FailureReason.TIMEOUT, "the pod exceeded its active deadline")
    if terminated is not None and terminated.reason == "OOMKilled":
        return Failed(FailureReason.OOM_KILLED, "the profiler ran out of memory (OOMKilled)")
    exit_code = terminated.exit_code if terminated else None
    fallback = f"exit code {exit_code}" if exit_code is not None else (pod.reason or "pod failed")
    return Failed(
        FailureReason.POD_FAILED,
        first_line(terminated.message if terminated else None, fallback, MAX_MESSAGE_CHARS),
    )


def classify_pod(pod: PodFacts, spec: ProfileSpec, now: float, gpus: int | None = None) -> Outcome:
    """Judge ``pod`` at time ``now`` against the profile's time limits; a result may list at
    most ``gpus`` devices (the GPUs the pod requested), when given.

    ``timeoutSeconds`` counts from the container's start, ``pendingTimeoutSeconds`` from the pod's
    creation: a pod that cannot get the node's GPUs (serving holds them) ends :class:`Unschedulable`
    and frees its slot, instead of waiting forever.
    """
    if pod.phase == "Succeeded":
        return _succeeded(pod, spec, now, gpus)
    if pod.phase == "Failed":
        return _failed(pod)
    if pod.phase == "Running" and pod.started_at is not None:
        if now - pod.started_at > spec.timeout_seconds:
            return Failed(
                FailureReason.TIMEOUT, f"the profiler ran longer than {spec.timeout_seconds}s"
            )
        return InFlight()
    if pod.phase == "Pending" and pod.created_at is not None:
        waited = now - pod.created_at
        if waited > spec.pending_timeout_seconds:
            return _pending_too_long(pod, spec)
    return InFlight()


def _pending_too_long(pod: PodFacts, spec: ProfileSpec) -> Outcome:
    """A pod the scheduler could not place is :class:`Unschedulable`; one bound to the node
    whose container never started (an image it cannot pull) has failed."""
    after = f"after {spec.pending_timeout_seconds}s"
    if not pod.bound:
        why = first_line(pod.scheduler_message, "", MAX_MESSAGE_CHARS)
        return Unschedulable(f"pod not scheduled {after}" + (f": {why}" if why else ""))
    why = first_line(pod.waiting_reason, "", MAX_MESSAGE_CHARS)
    return Failed(
        FailureReason.NOT_STARTED, f"pod not started {after}" + (f": {why}" if why else "")
    )
