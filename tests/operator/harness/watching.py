"""Watch streams: a bounded event history and per-request subscriptions.

Kopf lists, then watches from the list's ``resourceVersion``, and on reconnect resumes from the
last version it saw; when that version has been compacted away the server answers ``410 Gone`` and
Kopf relists. Selectors apply to watches as to lists, with the API server's transitions: an object
that stops matching arrives as ``DELETED``, one that starts matching as ``ADDED``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .resources import ApiError

#: Events kept for resuming watches; older resourceVersions get 410 Gone, as after compaction.
HISTORY_LENGTH = 200_000


@dataclass(frozen=True)
class WatchEvent:
    revision: int
    type: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]
    old: dict[str, Any] | None
    group: str = ""
    plural: str = ""


@dataclass(eq=False)
class Subscription:
    group: str
    plural: str
    namespace: str | None
    predicate: Callable[[Mapping[str, Any]], bool] | None
    queue: asyncio.Queue[WatchEvent] = field(default_factory=asyncio.Queue)

    def offer(self, event: WatchEvent) -> None:
        if (event.group, event.plural) != (self.group, self.plural):
            return
        namespace = event.object["metadata"].get("namespace")
        if self.namespace and namespace != self.namespace:
            return
        if self.predicate is None:
            self.queue.put_nowait(event)
            return
        now = self.predicate(event.object) and event.type != "DELETED"
        before = event.old is not None and self.predicate(event.old)
        if (event.type == "DELETED" and before) or (now and before):
            self.queue.put_nowait(event)
        elif now:
            self.queue.put_nowait(WatchEvent(event.revision, "ADDED", event.object, None))
        elif before:
            self.queue.put_nowait(WatchEvent(event.revision, "DELETED", event.object, event.old))


class EventLog:
    def __init__(self) -> None:
        self.revision = 0
        self.history: deque[WatchEvent] = deque(maxlen=HISTORY_LENGTH)
        self.subscriptions: set[Subscription] = set()

    def publish(
        self,
        group: str,
        plural: str,
        kind: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        self.revision += 1
        event = WatchEvent(self.revision, kind, obj, old, group, plural)
        self.history.append(event)
        for subscription in list(self.subscriptions):
            subscription.offer(event)

    def subscribe(self, subscription: Subscription, since: int | None) -> None:
        if since is not None:
            oldest = self.history[0].revision if self.history else self.revision + 1
            if since < oldest - 1 and since < self.revision:
                raise ApiError(410, "Expired", f"too old resource version: {since} ({oldest - 1})")
            for event in self.history:
                if event.revision > since:
                    subscription.offer(event)
        self.subscriptions.add(subscription)

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions.discard(subscription)
