"""A fake kubelet: runs bound pods' containers as local processes and reports as a kubelet does.

The real product contract is the pod's command plus its termination message: the profiler writes
its compact result to ``terminationMessagePath`` and the kubelet copies that file (its last 4096
bytes) into ``state.terminated.message``. So a bound pod's real ``roofline profile`` command runs
here with one rewrite, the termination path (to a temporary file); a GPU profile's pod
(``--device cuda``) fails here as it would in a container that sees no GPU, and profiles that
run the real profiler on this CPU say so (``spec.device: cpu``). The fault mode ``CPU_FALLBACK``
runs the command with its device made ``cpu``: a profiler image that measured the CPU in a GPU
pod, which the operator must refuse. Status moves Pending → Running → Succeeded/Failed
with exit code, reason and message; ``activeDeadlineSeconds`` kills and fails the pod with
``DeadlineExceeded``; deleting the pod stops the process (SIGTERM, SIGKILL after the pod's grace
period) before the object goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .commands import die_with_parent, product_environment, roofline_argv
from .defaulting import now_rfc3339
from .faults import (
    FaultBook,
    FaultMode,
    SyntheticGpu,
    forged_message,
    mismatched_message,
    overflowing_message,
    synthetic_message,
)
from .resources import ApiError
from .scheduler import extended_requests
from .store import ObjectStore

MAX_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048
OOM_EXIT_CODE = 137
SIGKILL_EXIT_CODE = 137
#: A pod's ``terminationGracePeriodSeconds`` when it names none (the API server's default).
DEFAULT_GRACE_SECONDS = 30
SMP = "application/strategic-merge-patch+json"


@dataclass
class PodRun:
    """One pod the kubelet ran: which node, and when it started and ended (monotonic seconds)."""

    pod: str
    node: str
    started: float
    ended: float | None = None
    #: How the container's process ended when the pod was deleted under it: ``"SIGTERM"`` if it
    #: exited within its grace period, ``"SIGKILL"`` if it had to be killed; ``None`` otherwise.
    stopped_by: str | None = None


def peak_concurrency(runs: list[PodRun]) -> int:
    """The largest number of runs that overlapped in time."""
    edges = sorted(
        [(r.started, 1) for r in runs] + [(r.ended or math.inf, -1) for r in runs],
        key=lambda e: (e[0], e[1]),
    )
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


@dataclass(frozen=True)
class ContainerExit:
    exit_code: int
    reason: str  # Completed, Error, OOMKilled
    message: str


def _fallback_message(log: str) -> str:
    """The log's last 80 lines, newlines kept, cut to their last 2048 bytes (the kubelet's
    ``readLastStringFromContainerLogs``: a tail of lines into a circular buffer)."""
    tail = "".join(log.splitlines(keepends=True)[-FALLBACK_LOG_LINES:])
    return tail.encode()[-FALLBACK_LOG_BYTES:].decode(errors="replace")


def termination_message(raw: bytes, policy: str, exit_code: int, log: str) -> str:
    """What the kubelet puts in ``state.terminated.message``: the file's **last** 4096 bytes (it
    reads the file from its end: ``getTerminationMessage`` in
    pkg/kubelet/kuberuntime/kuberuntime_container.go, through ``tail.ReadAtMost``), or, with
    ``FallbackToLogsOnError``, the log's tail when a failed container left the file empty."""
    if not raw and policy == "FallbackToLogsOnError" and exit_code != 0:
        return _fallback_message(log)
    return raw[-MAX_MESSAGE_BYTES:].decode(errors="replace")


class FakeKubelet:
    def __init__(
        self, store: ObjectStore, faults: FaultBook, logs: dict[tuple[str, str], str], workdir: Path
    ) -> None:
        self.store = store
        self.faults = faults
        self.logs = logs
        self.workdir = workdir
        self.pods = store.find_type("pods")
        self.config_maps = store.find_type("configmaps")
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.runs: list[PodRun] = []
        #: Every pod as it stood right after the kubelet reported its end, even if deleted since.
        self.finished: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- status writes
    def _status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        """Write pod status; ``None`` when the pod is already gone (deleted while it ran)."""
        meta = pod["metadata"]
        try:
            return self.store.patch(
                self.pods,
                meta["namespace"],
                meta["name"],
                SMP,
                {"status": status},
                subresource="status",
            )
        except ApiError:
            return None

    def _container_status(
        self, pod: Mapping[str, Any], state: dict[str, Any], ready: bool
    ) -> dict[str, Any]:
        container = pod["spec"]["containers"][0]
        return {
            "name": container["name"],
            "image": container["image"],
            "imageID": container["image"],
            "containerID": f"fake://{pod['metadata']['uid']}",
            "ready": ready,
            "restartCount": 0,
            "started": ready,
            "state": state,
        }

    def _running(self, pod: Mapping[str, Any]) -> None:
        now = now_rfc3339()
        self._status(
            pod,
            {
                "phase": "Running",
                "startTime": now,
                "hostIP": "10.0.0.1",
                "podIP": "10.1.0.1",
                "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                ],
                "containerStatuses": [
                    self._container_status(pod, {"running": {"startedAt": now}}, True)
                ],
            },
        )

    def _terminated(
        self,
        pod: Mapping[str, Any],
        result: ContainerExit,
        pod_reason: str | None = None,
        pod_message: str | None = None,
    ) -> None:
        now = now_rfc3339()
        terminated = {
            "exitCode": result.exit_code,
            "reason": result.reason,
            "startedAt": now,
            "finishedAt": now,
            "containerID": f"fake://{pod['metadata']['uid']}",
        }
        if result.message:
            terminated["message"] = result.message
        status: dict[str, Any] = {
            "phase": "Succeeded" if result.exit_code == 0 and pod_reason is None else "Failed",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                }
            ],
            "containerStatuses": [self._container_status(pod, {"terminated": terminated}, False)],
        }
        if pod_reason:
            status.update(reason=pod_reason, message=pod_message or "")
        final = self._status(pod, status)
        if final is not None:
            self.finished.append(final)

    # ---------------------------------------------------------------- running containers
    def _gpus(self, pod: Mapping[str, Any], node: str) -> tuple[SyntheticGpu, ...]:
        """The GPUs the pod's container sees: as many as it requested, the node's first ones (a
        device plugin hands a container only the devices it was allocated)."""
        count = max(1, sum(extended_requests(pod).values()))
        if node in self.faults.gpus:
            return self.faults.gpus[node][:count]
        return tuple(SyntheticGpu() for _ in range(count))

    def _config_map_files(
        self, pod: Mapping[str, Any], container: Mapping[str, Any]
    ) -> dict[str, str] | None:
        """The files of the ConfigMap volumes the container mounts, by path in the container;
        ``None`` when a ConfigMap is missing (a real kubelet would keep the pod waiting)."""
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        files: dict[str, str] = {}
        for mount in container.get("volumeMounts", []):
            source = volumes.get(mount["name"], {}).get("configMap")
            if source is None:
                continue
            try:
                config_map = self.store.get(
                    self.config_maps, pod["metadata"]["namespace"], source["name"]
                )
            except ApiError:
                return None
            for key, text in (config_map.get("data") or {}).items():
                files[f"{mount['mountPath'].rstrip('/')}/{key}"] = text
        return files

    @staticmethod
    def _models_inline(command: list[str], files: Mapping[str, str]) -> list[str]:
        """``--models-file PATH`` as ``--models-json TEXT``, for the synthetic results."""
        if "--models-file" not in command:
            return command
        at = command.index("--models-file")
        return [*command[:at], "--models-json", files[command[at + 1]], *command[at + 2 :]]

    def _argv(
        self,
        container: Mapping[str, Any],
        message_file: Path,
        mounted: Mapping[str, Path],
        on_cpu: bool = False,
    ) -> list[str]:
        argv = [*container.get("command", []), *container.get("args", [])]
        argv = [str(mounted[a]) if a in mounted else a for a in argv]
        path = container.get("terminationMessagePath", "/dev/termination-log")
        argv = [
            str(message_file) if a == path else a.replace(f"={path}", f"={message_file}")
            for a in argv
        ]
        if on_cpu:
            argv = ["cpu" if i and argv[i - 1] == "--device" else a for i, a in enumerate(argv)]
        if argv and argv[0] == "roofline":
            argv = [*roofline_argv(), *argv[1:]]
        return argv

    async def _execute(self, pod: Mapping[str, Any], key: tuple[str, str]) -> ContainerExit:
        container = pod["spec"]["containers"][0]
        node = pod["spec"]["nodeName"]
        mode = self.faults.mode(node)
        files = self._config_map_files(pod, container)
        if files is None:
            return ContainerExit(1, "Error", "MountVolume.SetUp failed: configmap not found")
        command = [*container.get("command", []), *container.get("args", [])]
        command = self._models_inline(command, files)
        age = self.faults.result_age_seconds.get(node, 0.0)
        gpus = self._gpus(pod, node)
        if mode in (FaultMode.SUCCEED_INSTANTLY, FaultMode.SUCCEED_SLOWLY):
            if mode is FaultMode.SUCCEED_SLOWLY:
                await asyncio.sleep(self.faults.slow_seconds)
            message = synthetic_message(node, command, self._gpus(pod, node), age)
            self.logs[key] = "synthetic profile\n"
            return ContainerExit(0, "Completed", message)
        if mode is FaultMode.EXIT_NONZERO:
            self.logs[key] = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            return ContainerExit(1, "Error", "device failed: CUDA error: an illegal memory access")
        if mode is FaultMode.OOM_KILLED:
            self.logs[key] = "allocating buffers\n"
            return ContainerExit(OOM_EXIT_CODE, "OOMKilled", "")
        if mode is FaultMode.TRUNCATED_MESSAGE:
            message = synthetic_message(node, command, self._gpus(pod, node))
            return ContainerExit(0, "Completed", message[: len(message) // 2])
        if mode is FaultMode.OVERFLOWING_RESULT:
            return ContainerExit(0, "Completed", overflowing_message(node, command, gpus))
        if mode is FaultMode.DEEP_NESTING:
            return ContainerExit(0, "Completed", "[" * MAX_MESSAGE_BYTES)
        if mode is FaultMode.FORGED_RESULT:
            return ContainerExit(0, "Completed", forged_message(node, command, gpus))
        if mode is FaultMode.MISMATCHED_RESULT:
            return ContainerExit(0, "Completed", mismatched_message(node, command, gpus))
        if mode is FaultMode.GARBAGE_MESSAGE:
            return ContainerExit(0, "Completed", "\x00\x01 this is not a result {]")
        if mode is FaultMode.HANG:
            self.logs[key] = "waiting for the device\n"
            await asyncio.Event().wait()
        on_cpu = mode is FaultMode.CPU_FALLBACK
        return await self._run_process(pod, container, key, files, on_cpu)

    async def _run_process(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        key: tuple[str, str],
        files: Mapping[str, str],
        on_cpu: bool = False,
    ) -> ContainerExit:
        with tempfile.TemporaryDirectory(dir=self.workdir) as scratch:
            message_file = Path(scratch) / "termination-log"
            message_file.touch()
            mounted = {}
            for path, text in files.items():
                local = Path(scratch) / "volumes" / path.lstrip("/")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text(text)
                mounted[path] = local
            env = product_environment(
                {e["name"]: container_env_value(pod, e) for e in container.get("env", [])}
            )
            env["HOME"] = env["TMPDIR"] = env["MPLCONFIGDIR"] = scratch
            process = await asyncio.create_subprocess_exec(
                *self._argv(container, message_file, mounted, on_cpu),
                cwd=scratch,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
            self.logs[key] = ""
            try:
                assert process.stdout is not None
                async for line in process.stdout:
                    self.logs[key] += line.decode(errors="replace")
                exit_code = await process.wait()
            finally:
                if process.returncode is None:
                    await self._stop(process, pod, key)
            policy = container.get("terminationMessagePolicy", "File")
            message = termination_message(
                message_file.read_bytes(), policy, exit_code, self.logs[key]
            )
        if exit_code < 0:
            exit_code = 128 - exit_code
        return ContainerExit(exit_code, "Completed" if exit_code == 0 else "Error", message)

    async def _stop(
        self, process: asyncio.subprocess.Process, pod: Mapping[str, Any], key: tuple[str, str]
    ) -> None:
        """Stop a deleted pod's process as a kubelet does: SIGTERM, then SIGKILL when it is
        still running after the pod's grace period."""
        grace = pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        run = next((r for r in reversed(self.runs) if r.pod == key[1]), None)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), timeout=grace)
            stopped_by = "SIGTERM"
        except (TimeoutError, asyncio.CancelledError) as stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if isinstance(stopped, asyncio.CancelledError):
                raise  # the emulator is stopping: nothing may outlive it
            await process.wait()
            stopped_by = "SIGKILL"
        if run is not None:
            run.stopped_by = stopped_by

    async def _run_pod(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._running(pod)
        run = PodRun(key[1], pod["spec"]["nodeName"], time.monotonic())
        self.runs.append(run)
        try:
            await self._run_to_end(pod, key)
        finally:
            run.ended = time.monotonic()

    async def _run_to_end(self, pod: dict[str, Any], key: tuple[str, str]) -> None:
        deadline = pod["spec"].get("activeDeadlineSeconds")
        try:
            result = await asyncio.wait_for(self._execute(pod, key), timeout=deadline)
        except TimeoutError:
            killed = ContainerExit(SIGKILL_EXIT_CODE, "Error", "")
            self._terminated(
                pod,
                killed,
                "DeadlineExceeded",
                "Pod was active on the node longer than the specified deadline",
            )
            return
        except asyncio.CancelledError:
            self._terminated(pod, ContainerExit(SIGKILL_EXIT_CODE, "Error", ""))
            self.store.remove_now(self.pods, *key)
            raise
        self._terminated(pod, result)

    # ---------------------------------------------------------------- pod lifecycle
    def observe(self, pod: dict[str, Any], deleted: bool) -> None:
        uid = pod["metadata"]["uid"]
        task = self.tasks.get(uid)
        if deleted or pod["metadata"].get("deletionTimestamp"):
            if task is not None and not task.done():
                task.cancel()
            elif not deleted:
                self.store.remove_now(
                    self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"]
                )
            if deleted:
                self.tasks.pop(uid, None)
            return
        node = pod.get("spec", {}).get("nodeName")
        if node and task is None and pod.get("status", {}).get("phase") == "Pending":
            self.tasks[uid] = asyncio.create_task(self._run_pod(pod), name=f"pod {uid}")

    async def run(self) -> None:
        subscription = self.store.subscribe(self.pods, None, None, None)
        try:
            while True:
                event = await subscription.queue.get()
                self.observe(event.object, event.type == "DELETED")
        finally:
            self.store.events.unsubscribe(subscription)
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)


def container_env_value(pod: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    """An env entry's value as a kubelet resolves it: literal, or the downward API's fields."""
    if "value" in entry:
        return str(entry["value"])
    path = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
    value: Any = pod
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, Mapping) else ""
    return str(value)
