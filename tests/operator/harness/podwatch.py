"""Every state a namespace's pods pass through, kept after the pods are deleted.

The operator deletes a finished profiler pod in the round that reads it, so a test that wants
the pod as the kubelet finished it (its termination message, its container's image and user)
cannot poll for it. :class:`PodHistory` follows the namespace with a list and a watch on a thread
of its own, as a controller does, and keeps each pod's last state by uid.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

from .controlplane import ApiClient

WATCH_SECONDS = 20


class PodHistory:
    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.pods: dict[str, dict[str, Any]] = {}
        #: Why the watch was restarted, each time (a test may print them when it fails).
        self.restarts: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="pod-history", daemon=True)

    def start(self) -> PodHistory:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=WATCH_SECONDS + 10)

    def _follow(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while not self._stopping.is_set():
            try:
                listed = self.api.request("GET", path)
                for pod in listed["items"]:
                    self._keep(pod)
                version = listed["metadata"]["resourceVersion"]
                while not self._stopping.is_set():
                    version = self._watch(path, version)
            except Exception as error:  # any broken stream: relist, as a controller does
                self.restarts.append(f"{type(error).__name__}: {error}")
                self._stopping.wait(0.5)

    def _watch(self, path: str, version: str) -> str:
        url = (
            f"{self.api.server}{path}?watch=1&resourceVersion={version}"
            f"&timeoutSeconds={WATCH_SECONDS}"
        )
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(
            request, context=self.api.context, timeout=WATCH_SECONDS + 10
        ) as stream:
            for line in stream:
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise KeyError("watch expired: relist")
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    self._keep(event["object"])
        return version

    def _keep(self, pod: dict[str, Any]) -> None:
        with self._lock:
            self.pods[pod["metadata"]["uid"]] = pod

    def find(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Pods (their last state) that satisfy ``predicate``, oldest first."""
        with self._lock:
            found = [p for p in self.pods.values() if predicate(p)]
        return sorted(found, key=lambda p: p["metadata"]["creationTimestamp"])


def terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The first container's ``state.terminated``, if it has ended."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    if not statuses:
        return None
    found: dict[str, Any] | None = statuses[0].get("state", {}).get("terminated")
    return found
