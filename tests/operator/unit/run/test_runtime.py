"""The shared caches are listed once, and listed again only when a relist period has passed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from roofline_operator.run import runtime
from roofline_operator.run.runtime import Caches


class ListingClient:
    """Serves LISTs of nodes and pods from dicts and counts them."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.lists: list[str] = []

    async def list_pages(
        self, path: str, selector: str | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        self.lists.append(path)
        if path == "/api/v1/nodes":
            yield [{"metadata": {"name": name}} for name in self.nodes]
        else:
            yield []


def prime(caches: Caches, client: ListingClient, relist_seconds: float | None = None) -> None:
    namespaces = ("roofline-system", "team-a")
    asyncio.run(caches.prime(client, namespaces, relist_seconds))  # type: ignore[arg-type]


def test_the_caches_are_listed_once_without_a_relist_period() -> None:
    caches, client = Caches(), ListingClient(["a", "b"])
    prime(caches, client)
    prime(caches, client)
    assert client.lists == [
        "/api/v1/nodes",
        "/api/v1/namespaces/roofline-system/pods",
        "/api/v1/namespaces/team-a/pods",
    ], "pods are listed in the profiler namespaces only, never cluster-wide"
    assert caches.ready
    assert sorted(caches.nodes.snapshot()) == ["a", "b"]


def test_a_relist_after_its_period_drops_a_node_whose_deletion_the_watch_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = {"t": 1000.0}
    monkeypatch.setattr(runtime.time, "monotonic", lambda: now["t"])
    caches, client = Caches(), ListingClient(["a", "b"])
    prime(caches, client, relist_seconds=600)
    client.nodes = ["a"]  # "b" was deleted during a watch gap: no event ever said so
    now["t"] += 599
    prime(caches, client, relist_seconds=600)
    assert sorted(caches.nodes.snapshot()) == ["a", "b"], "not due yet"
    now["t"] += 1
    prime(caches, client, relist_seconds=600)
    assert sorted(caches.nodes.snapshot()) == ["a"]
    assert len(client.lists) == 6
