"""Run a pod's container in a built image the way a kubelet would, with runc and no daemon.

What the kubelet would decide is decided here from the pod and the image alone: the process is
the container's ``command`` (else the image's ENTRYPOINT) followed by its ``args`` (else the
image's CMD); the user is ``runAsUser``/``runAsGroup`` (else the image's USER), refused when
``runAsNonRoot`` cannot be verified; the root filesystem is read-only when the security context
says so; every capability is dropped and no privileges can be gained; emptyDir volumes are
world-writable scratch directories; the termination message path is a file the container
writes and that is read back afterwards as the kubelet publishes it (its last 4096 bytes, or the
log's tail under ``FallbackToLogsOnError``: the emulated kubelet's ``termination_message``, one
rule for both); the environment is the image's, then the container's.

Not emulated: seccomp profiles, cgroup limits and the network (the container gets an empty
network namespace, which both images' commands here must live with).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.operator.harness.kubelet import MAX_MESSAGE_BYTES, termination_message

from .images import ImageConfig

DEFAULT_TERMINATION_PATH = "/dev/termination-log"
#: The kubelet keeps at most this much of a termination message (the end of the file).
TERMINATION_MESSAGE_LIMIT_BYTES = MAX_MESSAGE_BYTES


class PodRefused(Exception):
    """What the kubelet would report instead of starting the container."""


@dataclass(frozen=True)
class ContainerRun:
    exit_code: int
    stdout: str
    stderr: str
    #: The termination-message file's content, as the kubelet would publish it.
    termination_message: str
    argv: tuple[str, ...]
    uid: int
    gid: int
    #: Seconds from the SIGTERM the run sent (``terminate_when``) to the container's exit.
    stopped_in: float | None = None


def _numeric_user(image_user: str) -> tuple[int | None, int | None]:
    if not image_user:
        return 0, 0
    user, _, group = image_user.partition(":")
    uid = int(user) if user.isdigit() else None
    gid = int(group) if group.isdigit() else (0 if not group else None)
    return uid, gid


def effective_user(pod_spec: Mapping[str, Any], image: ImageConfig) -> tuple[int, int]:
    """The uid and gid the container runs as, or :class:`PodRefused` as the kubelet words it."""
    container = pod_spec["containers"][0]
    pod_context = pod_spec.get("securityContext") or {}
    context = {**pod_context, **(container.get("securityContext") or {})}
    image_uid, image_gid = _numeric_user(image.user)
    uid = context.get("runAsUser", image_uid)
    gid = context.get("runAsGroup", image_gid)
    if context.get("runAsNonRoot"):
        if uid is None:
            raise PodRefused(
                f"container has runAsNonRoot and image has non-numeric user ({image.user}), "
                "cannot verify user is non-root"
            )
        if uid == 0:
            raise PodRefused("container has runAsNonRoot and image will run as root")
    if uid is None or gid is None:
        raise PodRefused(f"image user {image.user!r} is not numeric")
    return int(uid), int(gid)


def container_argv(container: Mapping[str, Any], image: ImageConfig) -> list[str]:
    """Kubernetes' rule: ``command`` replaces ENTRYPOINT, ``args`` replace CMD."""
    if "command" in container:
        return [*container["command"], *container.get("args", [])]
    return [*image.entrypoint, *container.get("args", image.cmd)]


def _environment(container: Mapping[str, Any], image: ImageConfig, node: str) -> list[str]:
    env = dict(entry.split("=", 1) for entry in image.env)
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        elif entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            env[entry["name"]] = node
        else:
            raise ValueError(f"env {entry['name']}: only values and spec.nodeName are emulated")
    return [f"{key}={value}" for key, value in env.items()]


def _standard_mounts() -> list[dict[str, Any]]:
    return [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        },
        {
            "destination": "/sys",
            "type": "sysfs",
            "source": "sysfs",
            "options": ["nosuid", "noexec", "nodev", "ro"],
        },
    ]


def _volume_mounts(
    pod_spec: Mapping[str, Any], container: Mapping[str, Any], scratch: Path
) -> list[dict[str, Any]]:
    """emptyDir volumes as world-writable directories, as the kubelet creates them."""
    kinds = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    mounts = []
    for mount in container.get("volumeMounts", []):
        volume = kinds[mount["name"]]
        if "emptyDir" not in volume:
            raise ValueError(f"volume {mount['name']}: only emptyDir is emulated")
        source = scratch / "volumes" / mount["name"]
        source.mkdir(parents=True, exist_ok=True)
        source.chmod(0o777)
        options = ["rbind", "ro" if mount.get("readOnly") else "rw", "nosuid", "nodev"]
        mounts.append(
            {
                "destination": mount["mountPath"],
                "type": "bind",
                "source": str(source),
                "options": options,
            }
        )
    return mounts


def runtime_spec(
    *,
    pod_spec: Mapping[str, Any],
    image: ImageConfig,
    rootfs: Path,
    scratch: Path,
    message_file: Path,
    node: str,
    argv: Sequence[str],
) -> dict[str, Any]:
    """The OCI runtime configuration for the pod's first container."""
    container = pod_spec["containers"][0]
    context = container.get("securityContext") or {}
    uid, gid = effective_user(pod_spec, image)
    dropped = [c.upper() for c in (context.get("capabilities") or {}).get("drop", [])]
    if dropped != ["ALL"]:
        raise ValueError("only containers that drop ALL capabilities are emulated")
    none: list[str] = []
    mounts = [
        *_standard_mounts(),
        *_volume_mounts(pod_spec, container, scratch),
        {
            "destination": container.get("terminationMessagePath", DEFAULT_TERMINATION_PATH),
            "type": "bind",
            "source": str(message_file),
            "options": ["bind", "rw", "nosuid", "nodev"],
        },
    ]
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid},
            "args": list(argv),
            "env": _environment(container, image, node),
            "cwd": container.get("workingDir", image.working_dir),
            "capabilities": {
                "bounding": none,
                "effective": none,
                "inheritable": none,
                "permitted": none,
                "ambient": none,
            },
            "noNewPrivileges": context.get("allowPrivilegeEscalation") is False,
        },
        "root": {"path": str(rootfs), "readonly": bool(context.get("readOnlyRootFilesystem"))},
        "hostname": "roofline-image-test",
        "mounts": mounts,
        "linux": {
            "namespaces": [{"type": kind} for kind in ("pid", "network", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"],
        },
    }


def _init_pid(runc: list[str], name: str) -> int | None:
    """The host PID of the container's first process (PID 1 inside), once it runs."""
    state = subprocess.run(
        [*runc, "state", name], capture_output=True, text=True, check=False, timeout=30
    )
    if state.returncode != 0:
        return None
    pid = json.loads(state.stdout).get("pid")
    return int(pid) if pid else None


def _terminate_when(
    runc: list[str], name: str, process: subprocess.Popen[str], ready: Callable[[int], bool]
) -> float | None:
    """Send SIGTERM to the container's PID 1 (``runc kill``, as the kubelet's runtime does) once
    ``ready(host pid)`` holds; the time it was sent, or ``None`` if the container ended first."""
    while process.poll() is None:
        pid = _init_pid(runc, name)
        if pid is not None and ready(pid):
            sent = time.monotonic()
            subprocess.run([*runc, "kill", name, "TERM"], check=False, timeout=30)
            return sent
        time.sleep(0.2)
    return None


def run_pod_container(
    *,
    pod_spec: Mapping[str, Any],
    image: ImageConfig,
    rootfs: Path,
    scratch: Path,
    node: str = "image-test-node",
    argv: Sequence[str] | None = None,
    timeout: float = 600,
    terminate_when: Callable[[int], bool] | None = None,
) -> ContainerRun:
    """Run the pod's first container to completion; :class:`PodRefused` if it would not start.

    With ``terminate_when``, the container's PID 1 gets SIGTERM once that holds for its host
    PID, as when the pod is deleted; the run then reports how long the container took to stop.
    """
    container = pod_spec["containers"][0]
    argv = list(argv) if argv is not None else container_argv(container, image)
    bundle = scratch / "bundle"
    bundle.mkdir(parents=True)
    message_file = scratch / "termination-log"
    message_file.touch()
    message_file.chmod(0o666)
    spec = runtime_spec(
        pod_spec=pod_spec,
        image=image,
        rootfs=rootfs,
        scratch=scratch,
        message_file=message_file,
        node=node,
        argv=argv,
    )
    (bundle / "config.json").write_text(json.dumps(spec, indent=2))
    # runc rather than crun: crun refuses hosts whose cgroups are half v1, half v2 ("hybrid").
    runc = ["runc", "--root", str(scratch / "runc-state")]
    name = f"roofline-image-test-{uuid.uuid4().hex[:12]}"
    stopped_in = None
    try:
        process = subprocess.Popen(
            [*runc, "run", "--bundle", str(bundle), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            sent = None
            if terminate_when is not None:
                sent = _terminate_when(runc, name, process, terminate_when)
            stdout, stderr = process.communicate(timeout=timeout)
            if sent is not None:
                stopped_in = time.monotonic() - sent
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    finally:
        subprocess.run(
            [*runc, "delete", "--force", name], capture_output=True, check=False, timeout=60
        )
    policy = container.get("terminationMessagePolicy", "File")
    log = stdout + stderr
    message = termination_message(message_file.read_bytes(), policy, process.returncode, log)
    user = spec["process"]["user"]
    return ContainerRun(
        exit_code=process.returncode,
        stdout=stdout,
        stderr=stderr,
        termination_message=message,
        argv=tuple(argv),
        uid=user["uid"],
        gid=user["gid"],
        stopped_in=stopped_in,
    )
