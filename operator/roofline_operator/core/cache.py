"""The operator's own in-memory caches of the nodes and of its profiler pods.

Kopf indexes would hold the same facts, but Kopf 1.45 makes an index's start-up quadratic: while
an index is not ready, every newly listed object checks the readiness toggle of every object
listed so far, which takes minutes at 10,000 nodes. These caches are plain dicts, fed by the
``kopf.on.event`` handlers, and become ready once one paginated LIST of their own (``prime``)
has been merged in; readers wait for :attr:`ObjectCache.ready`.

Events and the priming list race: the list is a snapshot taken at some moment, while watch events
keep arriving. The rule is *an event seen while priming wins over the list*. The watch delivers
every change in order, so a listed state newer than such an event arrives later as an event of
its own, and a listed state older than it is stale; in particular a deletion seen while priming
leaves a tombstone, so the list cannot resurrect the object. Tombstones are dropped once the
list is merged (later events are applied as they come).

A ready cache can be primed again, by the same rule: a periodic relist. When a watch restarts
after its resource version expired (410 Gone), the new watch reports what exists, never what was
deleted in the gap; a relist drops those objects, which would otherwise stay until a restart.

Pure module apart from the :class:`asyncio.Event`: no Kubernetes client, no Kopf.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ObjectCache(Generic[K, V]):
    """Objects by key (a node name, a pod's namespace and name), fed by events and one list."""

    def __init__(self) -> None:
        self._objects: dict[K, V] = {}
        #: Keys an event touched while priming: the list must not overwrite them.
        self._touched: set[K] = set()
        self._priming = False
        self.ready = asyncio.Event()

    def upsert(self, key: K, value: V) -> None:
        """A watch event (or the listing Kopf does on its own) showed ``value`` for ``key``."""
        self._objects[key] = value
        if self._priming:
            self._touched.add(key)

    def delete(self, key: K) -> None:
        """A watch event showed ``key`` deleted; while priming, this is a tombstone."""
        self._objects.pop(key, None)
        if self._priming:
            self._touched.add(key)

    def start_priming(self) -> None:
        """From now until :meth:`finish_priming`, events mark the keys the list must leave alone.

        Events before this call are older than the list's snapshot, so the list may overwrite
        them; forgetting their marks keeps a restarted priming (after a failed list) correct.
        A ready cache stays ready (and readable) while it is primed again.
        """
        self._touched.clear()
        self._priming = True

    def finish_priming(self, listed: Iterable[tuple[K, V]]) -> None:
        """Merge the complete priming list and mark the cache ready.

        Keys absent from the list and untouched by events while priming are gone (deleted before
        the list's snapshot, their deletion event lost or not yet seen): they are dropped.
        """
        if not self._priming:
            raise RuntimeError("finish_priming() without start_priming()")
        listed_keys: set[K] = set()
        for key, value in listed:
            listed_keys.add(key)
            if key not in self._touched:
                self._objects[key] = value
        for key in [k for k in self._objects if k not in listed_keys and k not in self._touched]:
            del self._objects[key]
        self._touched.clear()
        self._priming = False
        self.ready.set()

    def get(self, key: K) -> V | None:
        return self._objects.get(key)

    def values(self) -> Iterator[V]:
        return iter(list(self._objects.values()))

    def snapshot(self) -> dict[K, V]:
        """A copy, so a round works on one consistent view while events keep arriving."""
        return dict(self._objects)

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects
