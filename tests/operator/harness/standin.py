"""The scheduler and kubelet of a real control plane's test nodes, run by the tests.

A real kube-apiserver has no nodes here: there is no container runtime, no kubelet and no
kube-scheduler. These stand-ins take their place through the API alone, with the admin's
credentials: the scheduler binds each pending pod pinned to a node (``pods/binding``, as
kube-scheduler does) when that node has the extended resources it asks for, and otherwise writes
``PodScheduled=False`` with reason ``Unschedulable``; the kubelet is the emulator's
:class:`FakeKubelet` (the same per-node fault modes, real profiler processes and termination
messages) writing pod status through ``pods/status`` and finishing deletions with a zero grace
period, as a kubelet does once the container is gone. They follow pods with a real list+watch
that resumes from its last resourceVersion, relists after ``410 Gone`` and rides out an API
server restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
import urllib.error
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from .controlplane import ApiClient, ApiRequestError
from .faults import FaultBook, FaultMode
from .kubelet import FakeKubelet
from .resources import ApiError
from .scheduler import (
    AFFINITY_MISMATCH,
    _pinned_node,
    extended_requests,
    insufficient,
    unschedulable_condition,
    unschedulable_message,
)

SMP = "application/strategic-merge-patch+json"
RETRY_SECONDS = 0.5
#: How long a status write keeps retrying while the API server is down (restart tests).
UNAVAILABLE_SECONDS = 90.0


class RemotePods:
    """The slice of the emulator's store the kubelet writes through, over the real API."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def find_type(self, plural: str, group: str = "") -> str:
        return plural

    def _call(
        self, method: str, path: str, body: Mapping[str, Any] | None, content_type: str
    ) -> Any:
        deadline = time.monotonic() + UNAVAILABLE_SECONDS
        while True:
            try:
                return self.api.request(method, path, body, content_type)
            except ApiRequestError as error:
                if (error.status < 500 and error.status != 429) or time.monotonic() > deadline:
                    raise ApiError(error.status, "Refused", error.body) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
                if time.monotonic() > deadline:
                    raise
            time.sleep(RETRY_SECONDS)

    def patch(
        self,
        pods: str,
        namespace: str,
        name: str,
        content_type: str,
        body: Mapping[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        if subresource:
            path += f"/{subresource}"
        result: dict[str, Any] = self._call("PATCH", path, body, content_type)
        return result

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """A namespaced core object (the ConfigMaps a pod mounts); ``ApiError`` if missing."""
        found: dict[str, Any] = self._call(
            "GET", f"/api/v1/namespaces/{namespace}/{plural}/{name}", None, "application/json"
        )
        return found

    def remove_now(self, pods: str, namespace: str, name: str) -> None:
        with contextlib.suppress(ApiError):
            self._call(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                "application/json",
            )

    def bind(self, namespace: str, name: str, node: str) -> None:
        self._call(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
            "application/json",
        )


def _terminal(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


class StandInNodes:
    """Scheduler and kubelet for every node of a real cluster, on a thread of their own."""

    def __init__(self, api: ApiClient, faults: FaultBook, workdir: Path) -> None:
        self.api = api
        self.pods_api = RemotePods(api)
        self.faults = faults
        self.logs: dict[tuple[str, str], str] = {}
        self.kubelet = FakeKubelet(self.pods_api, faults, self.logs, workdir)  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="nodes", daemon=True)
        self._task: asyncio.Future[None] | None = None
        self.pods: dict[str, dict[str, Any]] = {}
        self.watch_restarts = Counter[str]()
        self.errors: list[str] = []

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> StandInNodes:
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self.loop)  # type: ignore[assignment]
        return self

    def stop(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # TLS transports finish closing on the loop's next turns (aiohttp's advice: a short
            # sleep after closing a session), else they are garbage-collected unclosed.
            await asyncio.sleep(0.25)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout=30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            self.loop.close()

    # ---------------------------------------------------------------- list + watch
    async def _run(self) -> None:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.api.context),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        ) as session:
            scheduling = asyncio.create_task(self._schedule_forever())
            try:
                while True:
                    try:
                        await self._list_and_watch(session)
                    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as error:
                        self.watch_restarts[type(error).__name__] += 1
                    await asyncio.sleep(RETRY_SECONDS)
            finally:
                scheduling.cancel()
                for task in self.kubelet.tasks.values():
                    task.cancel()
                await asyncio.gather(
                    scheduling, *self.kubelet.tasks.values(), return_exceptions=True
                )

    async def _list_and_watch(self, session: aiohttp.ClientSession) -> None:
        async with session.get(f"{self.api.server}/api/v1/pods") as rsp:
            rsp.raise_for_status()
            listed = await rsp.json()
        seen = {p["metadata"]["uid"] for p in listed["items"]}
        for uid in [u for u in self.pods if u not in seen]:
            self._observe(self.pods[uid], deleted=True)
        for pod in listed["items"]:
            self._observe(pod, deleted=False)
        version = listed["metadata"]["resourceVersion"]
        while True:
            url = (
                f"{self.api.server}/api/v1/pods?watch=1&allowWatchBookmarks=true"
                f"&resourceVersion={version}&timeoutSeconds=60"
            )
            async with session.get(url) as rsp:
                rsp.raise_for_status()
                async for line in rsp.content:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        self.watch_restarts["410 Gone"] += 1
                        return  # relist
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self._observe(event["object"], event["type"] == "DELETED")

    def _observe(self, pod: dict[str, Any], deleted: bool) -> None:
        uid = pod["metadata"]["uid"]
        if deleted:
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = pod
        try:
            self.kubelet.observe(pod, deleted)
        except Exception as error:
            self.errors.append(f"{type(error).__name__}: {error}")

    # ---------------------------------------------------------------- scheduling
    async def _schedule_forever(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.schedule_once)
            except Exception as error:
                self.errors.append(f"scheduler: {type(error).__name__}: {error}")
            await asyncio.sleep(RETRY_SECONDS)

    def schedule_once(self) -> None:
        pods = list(self.pods.values())
        in_use: dict[str, Counter[str]] = {}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node and not _terminal(pod):
                in_use.setdefault(node, Counter()).update(extended_requests(pod))
        pending = [
            p
            for p in pods
            if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        if not pending:
            return
        # One LIST per pass rather than a GET per pod: a thousand pods wait at once at scale.
        listed = self.api.request("GET", "/api/v1/nodes")["items"]
        nodes = {n["metadata"]["name"]: n for n in listed}
        for pod in sorted(pending, key=lambda p: p["metadata"]["creationTimestamp"]):
            self._schedule(pod, in_use, nodes)

    def _schedule(
        self,
        pod: dict[str, Any],
        in_use: dict[str, Counter[str]],
        nodes: dict[str, dict[str, Any]],
    ) -> None:
        meta = pod["metadata"]
        target = _pinned_node(pod)
        node = nodes.get(target) if target else None
        wanted = extended_requests(pod)
        if node is None:
            message = unschedulable_message({AFFINITY_MISMATCH: 1}, 1)
        else:
            allocatable = node.get("status", {}).get("allocatable", {})
            used = in_use.setdefault(node["metadata"]["name"], Counter())
            short = [r for r, q in wanted.items() if int(str(allocatable.get(r, 0))) - used[r] < q]
            if self.faults.mode(node["metadata"]["name"]) is FaultMode.NEVER_SCHEDULE:
                short = short or list(wanted) or ["nvidia.com/gpu"]
            if not short:
                used.update(wanted)
                with contextlib.suppress(ApiError):  # gone or bound meanwhile
                    self.pods_api.bind(meta["namespace"], meta["name"], node["metadata"]["name"])
                return
            message = unschedulable_message({insufficient(short[0]): 1}, 1)
        condition = unschedulable_condition(pod, message)
        if condition is None:
            return
        with contextlib.suppress(ApiError):
            self.pods_api.patch(
                "pods",
                meta["namespace"],
                meta["name"],
                SMP,
                {"status": {"conditions": [condition]}},
                subresource="status",
            )
