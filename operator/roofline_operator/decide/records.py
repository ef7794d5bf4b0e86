"""Per-node records: the operator's memory of each node, and their two durable copies.

What must survive a restart is a node's *publication*: the published result, the latest and the
previous profile's numbers, when the published numbers last moved and the latest material change
(``hysteresis.py``). It lives in an annotation on the Node itself
(``record.roofline.dev/<profile>``, or on the node's NodeFeature object with that label backend),
written in the same patch as the node's labels, so it costs no extra request and scales with the
nodes, not with one object: a real API server stores at most about 1.5 MiB per object, which a
status listing every node of a 10,000-node pool would exceed. ``status.nodes[]`` lists full
entries for a bounded number of nodes (``status.py``); a restarted operator rebuilds its records
from both, the newer result winning (and from ``status.nodes[]`` alone after an upgrade from a
version without annotations).
Only the sweep's step times live in memory alone (they are for metrics).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from roofline_operator.core import node_results
from roofline_operator.core.names import ANNOTATION_RECORD_PREFIX, NodeState, format_time
from roofline_operator.core.node_results import Headline, NodeResult
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.decide import sizes
from roofline_operator.decide.labels import label_safe
from roofline_profiler.core import plausibility
from roofline_profiler.core.errors import printable
from roofline_profiler.wire.compact import MAX_WARNINGS


@dataclass(frozen=True)
class NodeRecord:
    name: str
    gpus: int
    state: NodeState = NodeState.QUEUED
    #: Attempts in the current cycle (since the last success, spec change or re-profile).
    attempts: int = 0
    #: Those of the attempts whose pod the scheduler could not place: they name pods like the
    #: others but do not count against ``maxAttempts`` (a busy node is not a broken one).
    unschedulable: int = 0
    #: Spec digest the current cycle's attempts measure.
    cycle_hash: str = ""
    pod: str | None = None
    pod_namespace: str | None = None
    last_attempt_at: float | None = None
    next_attempt_at: float | None = None
    reason: str | None = None
    message: str | None = None
    #: The published result: labels, status headline numbers and gauges show its numbers, which
    #: move only when a profile differs by more than the uncertainty (``hysteresis.py``).
    result: NodeResult | None = None
    #: The latest profile's numbers as measured (they differ from the published ones when the
    #: profile stayed within noise).
    measured: Headline | None = None
    #: The numbers of the profile before the latest one.
    previous: Headline | None = None
    #: Unix seconds of the profile whose numbers the published ones last took.
    published_at: float | None = None
    #: The latest profile's material change (``bandwidth 4.31→3.62 TB/s (−16%)``), if any.
    change: str | None = None
    #: The latest profile's warning codes (every GPU's, each once).
    warnings: tuple[str, ...] = ()
    #: Whether the latest profile was held back: it warned of interference and the one before it
    #: did not, so the published numbers stayed as they were (``hysteresis.py``).
    held: bool = False
    #: Unix seconds since the node left the selection while still matching its labels
    #: (``NodeState.UNAVAILABLE``); ``None`` while it is available.
    unavailable_since: float | None = None


def record_to_status(record: NodeRecord) -> dict[str, Any]:
    """The ``status.nodes[]`` entry of a record (camelCase, no ``None`` values)."""
    entry: dict[str, Any] = {
        "name": record.name,
        "state": record.state.value,
        "gpus": record.gpus,
        "attempts": record.attempts,
        "unschedulableAttempts": record.unschedulable or None,
        "cycleHash": record.cycle_hash,
        "pod": record.pod,
        "podNamespace": record.pod_namespace,
        "reason": record.reason,
        "message": record.message,
        "lastAttemptTime": format_time(record.last_attempt_at),
        "nextAttemptTime": format_time(record.next_attempt_at),
        "unavailableSince": format_time(record.unavailable_since),
    }
    if record.result is not None:
        entry.update(node_results.to_status(record.result))
        entry.update(_publication_to_status(record, record.result))
    return {k: v for k, v in entry.items() if v is not None}


def _provisional(result: NodeResult) -> list[str] | None:
    """The published numbers too uncertain to hold on to, on any GPU (``hysteresis.py``)."""
    found = {q for gpu in result.gpus for q in node_results.provisional_quantities(gpu)}
    return sorted(found) or None


def _publication_to_status(record: NodeRecord, result: NodeResult) -> dict[str, Any]:
    """``publishedTime``, ``measured`` (only when it differs from the published numbers),
    ``previous``, ``materialChange``, ``warnings``, ``heldBack`` and ``provisional`` (only when
    set)."""
    fields: dict[str, Any] = {
        "publishedTime": format_time(record.published_at or result.profiled_at),
        "materialChange": record.change,
        "warnings": list(record.warnings) or None,
        "heldBack": record.held or None,
        "provisional": _provisional(result),
    }
    measured = record.measured
    if measured is not None and measured != node_results.headline_of(result):
        fields["measured"] = node_results.headline_to_status(measured)
    if record.previous is not None:
        fields["previous"] = node_results.headline_to_status(record.previous)
    return fields


#: Longest record annotation read back: four budgets, so records written whole by an older
#: version (up to 7.7 KB) still restore.
MAX_RECORD_ANNOTATION_BYTES = 4 * sizes.RECORD_ANNOTATION_BUDGET_BYTES
#: Longest free text a restored record keeps (a failure message, a material change).
MAX_RESTORED_TEXT_CHARS = 1000
#: Most warning codes a record keeps: every GPU's (``NodeResult.warnings``), each GPU sending
#: at most :data:`~roofline_profiler.wire.compact.MAX_WARNINGS`. Whatever the writer keeps,
#: both restores read back (the entry's size budget, ``sizes.py``, bounds the bytes).
MAX_RECORD_WARNINGS = MAX_WARNINGS * plausibility.MAX_DEVICES


def record_from_status(raw: Mapping[str, Any], now: float | None = None) -> NodeRecord | None:
    """Rebuild a record from its status entry (or record annotation); ``None`` for an entry too
    damaged to trust: every number, time and string is read through the plausibility table."""
    try:
        return _record_from_status(raw, now)
    except (KeyError, TypeError, ValueError):
        return None


def _record_from_status(raw: Mapping[str, Any], now: float | None) -> NodeRecord:
    result = node_results.from_status(raw, now)
    measured = node_results.headline_from_status(raw.get("measured"), now)
    if measured is None and result is not None:
        measured = node_results.headline_of(result)
    warnings = raw.get("warnings") or []
    if not isinstance(warnings, list) or len(warnings) > MAX_RECORD_WARNINGS:
        raise plausibility.ImplausibleValue("field 'warnings' is not a list of codes")

    def text(key: str) -> str | None:
        found = plausibility.optional_text(raw.get(key), key, MAX_RESTORED_TEXT_CHARS)
        return None if found is None else printable(found)

    return NodeRecord(
        name=plausibility.optional_text(raw["name"], "name", 253) or "",
        gpus=plausibility.integer(raw.get("gpus", 1), "gpu units", "gpus"),
        state=NodeState(raw.get("state", NodeState.QUEUED.value)),
        attempts=plausibility.integer(raw.get("attempts", 0), "attempts", "attempts"),
        unschedulable=plausibility.integer(
            raw.get("unschedulableAttempts", 0), "attempts", "unschedulableAttempts"
        ),
        cycle_hash=text("cycleHash") or "",
        pod=text("pod"),
        # Not read back: the pod is looked for where the spec says (``reconcile.pod_namespaces``).
        pod_namespace=None,
        last_attempt_at=node_results.restored_time(raw.get("lastAttemptTime"), "lastAttempt", now),
        next_attempt_at=node_results.restored_time(raw.get("nextAttemptTime"), "nextAttempt", None),
        reason=text("reason"),
        message=text("message"),
        result=result,
        measured=measured,
        previous=node_results.headline_from_status(raw.get("previous"), now),
        published_at=node_results.restored_time(raw.get("publishedTime"), "publishedTime", now),
        change=text("materialChange"),
        warnings=tuple(
            plausibility.text(code, plausibility.WARNING_CODE, "warnings") for code in warnings
        ),
        held=raw.get("heldBack") is True,
        unavailable_since=node_results.restored_time(
            raw.get("unavailableSince"), "unavailableSince", now
        ),
    )


def records_from_status(
    status: Mapping[str, Any] | None, now: float | None = None
) -> dict[str, NodeRecord]:
    entries = (status or {}).get("nodes") or []
    if not isinstance(entries, list):
        return {}
    records = (record_from_status(e, now) for e in entries if isinstance(e, Mapping))
    return {r.name: r for r in records if r is not None}


def record_annotation_key(profile: str) -> str:
    """``record.roofline.dev/<profile>``: the name part of an annotation key has the syntax and
    the 63-character limit of a label value, hence :func:`label_safe`."""
    return ANNOTATION_RECORD_PREFIX + label_safe(profile)


def record_to_annotation(record: NodeRecord) -> str | None:
    """The publication of ``record`` as compact JSON; ``None`` while it holds no result.

    The same fields as its ``status.nodes[]`` entry, minus the attempt's (state, attempts, pod,
    reason, times): those belong to one operator's round, a restart starts them afresh. Fitted to
    :data:`~roofline_operator.decide.sizes.RECORD_ANNOTATION_BUDGET_BYTES` (``sizes.py``).
    """
    if record.result is None:
        return None
    entry = {
        **node_results.to_status(record.result),
        **_publication_to_status(record, record.result),
    }
    entry = {k: v for k, v in entry.items() if v is not None}
    entry = sizes.fit(entry, sizes.RECORD_ANNOTATION_BUDGET_BYTES)
    return json.dumps(entry, separators=(",", ":"), sort_keys=True)


class AnnotationMemo:
    """:func:`record_to_annotation` for every node each round, without re-encoding the ones
    whose publication did not change (the same objects as last time: records are immutable)."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[tuple[Any, ...], tuple[Any, ...], str | None]] = {}

    def text_of(self, record: NodeRecord) -> str | None:
        objects = (record.result, record.measured, record.previous)
        values = (record.published_at, record.change, record.warnings, record.held)
        cached = self._texts.get(record.name)
        if (
            cached is not None
            and all(a is b for a, b in zip(cached[0], objects, strict=True))
            and cached[1] == values
        ):
            return cached[2]
        text = record_to_annotation(record)
        self._texts[record.name] = (objects, values, text)
        return text


#: The keys of a status entry that belong to one operator's attempts (``record_to_status``), not
#: to the publication: a record annotation carries none of them, and none is read from one.
ATTEMPT_KEYS = frozenset(
    {
        "state",
        "attempts",
        "unschedulableAttempts",
        "cycleHash",
        "pod",
        "podNamespace",
        "reason",
        "message",
        "lastAttemptTime",
        "nextAttemptTime",
        "unavailableSince",
    }
)


def record_from_annotation(
    name: str, gpus: int, text: str, now: float | None = None
) -> NodeRecord | None:
    """A ``Profiled`` record rebuilt from :func:`record_to_annotation`; ``None`` if damaged.

    Whoever may patch the Node (its own kubelet included) may write this text, so it is read
    like a profiler's result: bounded in size and depth, every field plausible, and only the
    publication's fields. An attempt's fields written into it (a pod and its namespace above
    all, which would widen the namespaces whose pods the profile believes) are ignored.
    """
    try:
        raw = plausibility.load_json(text, MAX_RECORD_ANNOTATION_BYTES, "record annotation")
    except ValueError:
        return None
    if not isinstance(raw, Mapping):
        return None
    publication = {k: v for k, v in raw.items() if k not in ATTEMPT_KEYS}
    restored = record_from_status({**publication, "name": name, "gpus": gpus}, now)
    if restored is None or restored.result is None:
        return None
    return replace(
        restored,
        state=NodeState.PROFILED,
        cycle_hash=restored.result.spec_hash,
        last_attempt_at=restored.result.profiled_at,
    )


def restore_records(
    from_status: Mapping[str, NodeRecord],
    nodes: Iterable[NodeFacts],
    profile: str,
    now: float | None = None,
) -> dict[str, NodeRecord]:
    """A restarted operator's records: ``status.nodes[]`` entries, and every node annotation of
    ``profile``; where both hold a result, the annotation's publication is taken when its result
    is newer (the status patch of the round that wrote it may not have happened)."""
    key = record_annotation_key(profile)
    restored = dict(from_status)
    for node in nodes:
        text = node.records.get(key)
        if text is None:
            continue
        known = restored.get(node.name)
        gpus = known.gpus if known is not None else 1
        annotated = record_from_annotation(node.name, gpus, text, now)
        if annotated is None or annotated.result is None:
            continue
        if known is None:
            restored[node.name] = annotated
        elif known.result is None or known.result.profiled_at < annotated.result.profiled_at:
            restored[node.name] = replace(
                known,
                result=annotated.result,
                measured=annotated.measured,
                previous=annotated.previous,
                published_at=annotated.published_at,
                change=annotated.change,
                warnings=annotated.warnings,
                held=annotated.held,
            )
    return restored
