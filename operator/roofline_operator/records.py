"""Per-node records: the operator's memory of each node, stored in ``status.nodes``.

The status is the durable copy: a restarted operator rebuilds its records from it, so results
survive restarts without re-profiling, and so do the published numbers, the latest and the
previous profile's numbers and the latest material change (``hysteresis.py``). Only the sweep's
step times live in memory alone (they are for metrics, and ``status`` must stay small for a
thousand nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roofline_operator import results
from roofline_operator.names import NodeState, format_time, parse_time
from roofline_operator.results import Headline, NodeResult


@dataclass(frozen=True)
class NodeRecord:
    name: str
    gpus: int
    state: NodeState = NodeState.QUEUED
    #: Attempts in the current cycle (since the last success, spec change or re-profile).
    attempts: int = 0
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


def record_to_status(record: NodeRecord) -> dict[str, Any]:
    """The ``status.nodes[]`` entry of a record (camelCase, no ``None`` values)."""
    entry: dict[str, Any] = {
        "name": record.name,
        "state": record.state.value,
        "gpus": record.gpus,
        "attempts": record.attempts,
        "cycleHash": record.cycle_hash,
        "pod": record.pod,
        "podNamespace": record.pod_namespace,
        "reason": record.reason,
        "message": record.message,
        "lastAttemptTime": format_time(record.last_attempt_at),
        "nextAttemptTime": format_time(record.next_attempt_at),
    }
    if record.result is not None:
        entry.update(results.to_status(record.result))
        entry.update(_publication_to_status(record, record.result))
    return {k: v for k, v in entry.items() if v is not None}


def _publication_to_status(record: NodeRecord, result: NodeResult) -> dict[str, Any]:
    """``publishedTime``, ``measured`` (only when it differs from the published numbers),
    ``previous`` and ``materialChange``."""
    fields: dict[str, Any] = {
        "publishedTime": format_time(record.published_at or result.profiled_at),
        "materialChange": record.change,
    }
    measured = record.measured
    if measured is not None and measured != results.headline_of(result):
        fields["measured"] = results.headline_to_status(measured)
    if record.previous is not None:
        fields["previous"] = results.headline_to_status(record.previous)
    return fields


def record_from_status(raw: Mapping[str, Any]) -> NodeRecord | None:
    """Rebuild a record from its status entry; ``None`` for an entry too damaged to trust."""
    try:
        result = results.from_status(raw)
        measured = results.headline_from_status(raw.get("measured"))
        if measured is None and result is not None:
            measured = results.headline_of(result)
        return NodeRecord(
            name=str(raw["name"]),
            gpus=int(raw.get("gpus", 1)),
            state=NodeState(raw.get("state", NodeState.QUEUED.value)),
            attempts=int(raw.get("attempts", 0)),
            cycle_hash=str(raw.get("cycleHash", "")),
            pod=raw.get("pod"),
            pod_namespace=raw.get("podNamespace"),
            last_attempt_at=parse_time(raw.get("lastAttemptTime")),
            next_attempt_at=parse_time(raw.get("nextAttemptTime")),
            reason=raw.get("reason"),
            message=raw.get("message"),
            result=result,
            measured=measured,
            previous=results.headline_from_status(raw.get("previous")),
            published_at=parse_time(raw.get("publishedTime")),
            change=raw.get("materialChange"),
        )
    except (KeyError, TypeError, ValueError):
        return None


def records_from_status(status: Mapping[str, Any] | None) -> dict[str, NodeRecord]:
    entries = (status or {}).get("nodes") or []
    records = (record_from_status(e) for e in entries if isinstance(e, Mapping))
    return {r.name: r for r in records if r is not None}
