"""An emulated cluster in a background thread: API server, scheduler, kubelet, and a kubeconfig.

Tests are ordinary synchronous functions that start real processes (the operator, ``kubectl``);
the cluster runs its own event loop in a thread so those processes and the test can block while
the API server keeps answering. Everything a test does to the cluster goes through :meth:`call`,
which runs on that loop, so the store is only ever touched from one thread.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import dataclasses
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from .apiserver import ApiServer, InjectedFault
from .defaulting import now_rfc3339
from .faults import FaultBook, FaultMode, SyntheticGpu
from .kubelet import FakeKubelet, PodRun
from .resources import ApiError
from .scheduler import FakeScheduler
from .store import ObjectStore
from .validation import MAX_LABEL_CHARS

T = TypeVar("T")
MERGE = "application/merge-patch+json"


def gpu_node(
    name: str,
    gpus: int = 1,
    resource: str = "nvidia.com/gpu",
    labels: Mapping[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: Iterable[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A Node as the kubelet and GPU Feature Discovery would register it.

    The hostname label is the node name when it fits a label value, else the name's first DNS
    label: a node named by a long FQDN has a short hostname.
    """
    hostname = name if len(name) <= MAX_LABEL_CHARS else name.split(".")[0][:MAX_LABEL_CHARS]
    capacity = {"cpu": "16", "memory": "128Gi", "pods": "110", resource: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": hostname,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": "NVIDIA-H200",
                **(labels or {}),
            },
        },
        "spec": {"unschedulable": unschedulable, "taints": [dict(t) for t in taints]},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastHeartbeatTime": now_rfc3339(),
                    "lastTransitionTime": now_rfc3339(),
                }
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.0",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
        },
    }


class ObjectReads:
    """What both clusters read the same way, on top of their own :meth:`get`."""

    def get(
        self, plural: str, name: str, namespace: str | None = None, group: str = ""
    ) -> dict[str, Any] | None:
        raise NotImplementedError

    def read(
        self, plural: str, name: str, namespace: str | None = None, group: str = ""
    ) -> dict[str, Any]:
        """Like :meth:`get`, for objects a test knows exist; their absence fails the test."""
        found = self.get(plural, name, namespace, group)
        if found is None:
            raise AssertionError(f"{plural} {namespace or ''}/{name} does not exist")
        return found


class Cluster(ObjectReads):
    def __init__(self, workdir: Path, default_mode: FaultMode = FaultMode.RUN_COMMAND) -> None:
        self.workdir = workdir
        self.loop = asyncio.new_event_loop()
        self.faults = FaultBook(default=default_mode)
        self.store: ObjectStore
        self.server: ApiServer
        self.kubelet: FakeKubelet
        self.scheduler: FakeScheduler
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._thread = threading.Thread(target=self.loop.run_forever, name="cluster", daemon=True)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> Cluster:
        self._thread.start()
        self.call_async(self._start)
        self.kubeconfig.write_text(yaml.safe_dump(self.kubeconfig_document()))
        return self

    async def _start(self) -> None:
        self.store = ObjectStore()
        self.server = ApiServer(self.store)
        self.kubelet = FakeKubelet(self.store, self.faults, self.server.pod_logs, self.workdir)
        self.scheduler = FakeScheduler(self.store, self.faults)
        self._runner = web.AppRunner(self.server.app, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._tasks = [
            asyncio.create_task(self.kubelet.run()),
            asyncio.create_task(self.scheduler.run()),
        ]

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.call_async(self._stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        # Open watch streams of clients that never hung up are cancelled, not abandoned.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> Cluster:
        return self if self._thread.is_alive() else self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- thread bridge
    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        async def run() -> T:
            return fn(*args, **kwargs)

        return self.call_async(run)

    def call_async(self, fn: Callable[[], Any], timeout: float = 60) -> Any:
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(fn(), self.loop)
        return future.result(timeout=timeout)

    # ---------------------------------------------------------------- access
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def kubeconfig_document(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulated", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "emulated"}}],
            "contexts": [
                {"name": "emulated", "context": {"cluster": "emulated", "user": "tester"}}
            ],
            "current-context": "emulated",
        }

    def _type(self, plural: str, group: str = "") -> Any:
        return self.store.find_type(plural, group)

    def get(
        self, plural: str, name: str, namespace: str | None = None, group: str = ""
    ) -> dict[str, Any] | None:
        def read() -> dict[str, Any] | None:
            try:
                return self.store.get(self._type(plural, group), namespace, name)
            except ApiError:
                return None

        return self.call(read)

    def list(
        self,
        plural: str,
        namespace: str | None = None,
        group: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        def matches(obj: Mapping[str, Any]) -> bool:
            have = obj["metadata"].get("labels") or {}
            return all(have.get(k) == v for k, v in (labels or {}).items())

        return self.call(lambda: self.store.list(self._type(plural, group), namespace, matches))

    def create(
        self, plural: str, body: dict[str, Any], namespace: str | None = None, group: str = ""
    ) -> dict[str, Any]:
        return self.call(lambda: self.store.create(self._type(plural, group), namespace, body))

    def patch(
        self,
        plural: str,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        group: str = "",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return self.call(
            lambda: self.store.patch(
                self._type(plural, group), namespace, name, MERGE, patch, subresource
            )
        )

    def delete(self, plural: str, name: str, namespace: str | None = None, group: str = "") -> None:
        self.call(lambda: self.store.delete(self._type(plural, group), namespace, name))

    # ---------------------------------------------------------------- nodes and faults
    def add_gpu_node(
        self,
        name: str,
        mode: FaultMode | None = None,
        synthetic_gpus: tuple[SyntheticGpu, ...] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self.set_fault(name, mode)
        if synthetic_gpus is not None:
            self.call(self.faults.gpus.__setitem__, name, synthetic_gpus)
        return self.create("nodes", gpu_node(name, **kwargs))

    def add_gpu_nodes(self, names: Iterable[str], **kwargs: Any) -> None:
        nodes = [gpu_node(name, **kwargs) for name in names]

        def create_all() -> None:
            for node in nodes:
                self.store.create(self._type("nodes"), None, node)

        self.call(create_all)

    def set_fault(self, node: str, mode: FaultMode | None) -> None:
        def update() -> None:
            if mode is None:
                self.faults.modes.pop(node, None)
            else:
                self.faults.modes[node] = mode

        self.call(update)

    def set_result_age(self, node: str, seconds: float) -> None:
        self.call(self.faults.result_age_seconds.__setitem__, node, seconds)

    def runs(self, nodes: Iterable[str] | None = None) -> builtins.list[PodRun]:
        """Copies of the kubelet's pod runs, optionally only those on ``nodes``."""
        wanted = set(nodes) if nodes is not None else None
        return self.call(
            lambda: [
                dataclasses.replace(run)
                for run in self.kubelet.runs
                if wanted is None or run.node in wanted
            ]
        )

    def finished_pods(
        self, labels: Mapping[str, str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        """Pods as they stood when they ended, including those deleted since."""

        def matches(pod: Mapping[str, Any]) -> bool:
            have = pod["metadata"].get("labels") or {}
            return all(have.get(k) == v for k, v in (labels or {}).items())

        return self.call(lambda: [p for p in self.kubelet.finished if matches(p)])

    def inject(self, verb: str, resource: str, status: int, count: int = 1) -> InjectedFault:
        fault = InjectedFault(verb, resource, status, count)
        self.call(self.server.faults.append, fault)
        return fault

    def remaining_faults(self, fault: InjectedFault) -> int:
        return self.call(lambda: fault.count)

    def drop_watches(self, compact: bool = False) -> int:
        """Cut all watch connections; with ``compact``, resuming them then answers 410 Gone."""

        def drop() -> int:
            if compact:
                self.store.events.history.clear()
            return self.server.drop_watches()

        return self.call(drop)

    def internal_errors(self) -> builtins.list[str]:
        """Requests the emulator itself failed on (its bugs, not injected faults)."""
        return self.call(lambda: builtins.list(self.server.internal_errors))

    def request_counts(self) -> Counter[tuple[str, str]]:
        return self.call(lambda: Counter(self.server.requests))

    def reset_request_counts(self) -> None:
        self.call(self.server.requests.clear)

    def pod_log(self, namespace: str, name: str) -> str | None:
        return self.call(lambda: self.server.pod_logs.get((namespace, name)))

    def apply_manifest(self, path: Path) -> builtins.list[dict[str, Any]]:
        """Create every document of a YAML file directly in the store (no kubectl)."""
        created = []
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            group, _, _ = doc["apiVersion"].rpartition("/")
            plural = self.call(
                lambda d=doc, g=group: next(
                    t.plural
                    for t in self.store.types.values()
                    if t.kind == d["kind"] and t.group == g
                )
            )
            created.append(self.create(plural, doc, doc["metadata"].get("namespace"), group))
        return created
