"""containerd for the real node: its own config and socket, and the images it runs, imported.

There is no registry here: the sandbox image is packed from the static ``pause`` binary
(``pause_image``) and the project's two images go from buildah's store to containerd as OCI
archives (``buildah push REF oci-archive:FILE``, then ``ctr -n k8s.io images import``), which pods
use with ``imagePullPolicy: IfNotPresent``. containerd's root (content and unpacked snapshots) is
kept between test sessions, outside the repository, so an image is imported once per build of it:
a marker file beside the root holds the identity of what was imported under each name.

Whatever a session leaves in the ``k8s.io`` namespace (containers and their tasks, after an
interrupted run) is removed when containerd starts and again before it stops, so the kubelet
never meets another session's sandboxes.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .controlplane import BinaryProcess
from .nodeconfig import SANDBOX_IMAGE, NodeLayout, containerd_config
from .pause_image import write_archive
from .waiting import wait_for

NAMESPACE = "k8s.io"
#: How every test node's containerd socket path ends (``NodeLayout``).
STALE_SOCKET_SUFFIX = "/node/containerd/containerd.sock"
START_TIMEOUT_SECONDS = 60
IMPORT_TIMEOUT_SECONDS = 1800


class Containerd:
    def __init__(self, layout: NodeLayout) -> None:
        self.layout = layout
        layout.containerd_state.mkdir(parents=True, exist_ok=True)
        layout.containerd_root.mkdir(parents=True, exist_ok=True)
        self.config = layout.containerd_state / "config.toml"
        self.config.write_text(containerd_config(layout))
        self.process = BinaryProcess(
            ["containerd", "--config", str(self.config)], layout.workdir / "containerd.log"
        )

    @property
    def markers(self) -> Path:
        return self.layout.containerd_root.parent / f"{self.layout.containerd_root.name}.imported"

    def ctr(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        result = subprocess.run(
            ["ctr", "--address", str(self.layout.containerd_socket), "-n", NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def start(self) -> Containerd:
        self.process.start()

        def ready() -> bool:
            if not self.process.running:
                raise AssertionError(f"containerd exited:\n{self.process.log_tail()}")
            return self.ctr("version", check=False, timeout=10) != ""

        wait_for(ready, START_TIMEOUT_SECONDS, "containerd to answer on its socket")
        self.remove_containers()
        return self

    def stop(self) -> None:
        if self.process.running:
            self.remove_containers()
        self.process.stop()

    # ---------------------------------------------------------------- containers
    def remove_containers(self) -> list[str]:
        """Kill and remove every container of the kubelet's namespace (sandboxes included)."""
        removed = self.ctr("containers", "list", "--quiet", check=False).split()
        for task in self.ctr("tasks", "list", "--quiet", check=False).split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        for container in removed:
            for _ in range(20):
                self.ctr("tasks", "delete", "--force", container, check=False)
                if self.ctr("containers", "delete", container, check=False, timeout=60) == "":
                    break
        return removed

    def running_tasks(self) -> list[str]:
        """Containers (sandboxes included) whose process still runs."""
        lines = self.ctr("tasks", "list", check=False).splitlines()[1:]
        return [line.split()[0] for line in lines if line.split()[-1:] == ["RUNNING"]]

    def shim_pids(self) -> list[int]:
        """Shims of this containerd (they outlive it, in their own sessions, by design)."""
        address = str(self.layout.containerd_socket)
        return [pid for pid, shim_address in _shims() if shim_address == address]

    # ---------------------------------------------------------------- images
    def images(self) -> set[str]:
        return set(self.ctr("images", "list", "--quiet").split())

    def _marker(self, reference: str) -> Path:
        return self.markers / re.sub(r"[^A-Za-z0-9.-]", "_", reference)

    def import_archive(
        self, reference: str, identity: str, write: Callable[[Path], object]
    ) -> bool:
        """Import ``reference`` unless the same ``identity`` is there already; ``write(path)``
        writes the OCI archive when it is needed. True when it imported."""
        marker = self._marker(reference)
        if reference in self.images() and marker.exists() and marker.read_text() == identity:
            return False
        archive = self.layout.workdir / "import.tar"
        try:
            write(archive)
            self.ctr("images", "import", str(archive), timeout=IMPORT_TIMEOUT_SECONDS)
        finally:
            archive.unlink(missing_ok=True)
        if reference not in self.images():
            raise RuntimeError(f"ctr images import did not name the image {reference}")
        self.markers.mkdir(exist_ok=True)
        marker.write_text(identity)
        return True

    def import_pause(self, binary: Path) -> bool:
        identity = hashlib.sha256(binary.read_bytes()).hexdigest()
        return self.import_archive(
            SANDBOX_IMAGE, identity, lambda path: write_archive(binary, SANDBOX_IMAGE, path)
        )


def buildah_push(root: str, runroot: str, reference: str, archive: Path) -> None:
    """Write an image of buildah's store as an OCI archive named ``reference`` (layers left
    uncompressed: containerd unpacks them straight away, and gzip would cost minutes)."""
    subprocess.run(
        [
            "buildah",
            "--root",
            root,
            "--runroot",
            runroot,
            "--storage-driver",
            "vfs",
            "push",
            "--quiet",
            "--disable-compression",
            reference,
            f"oci-archive:{archive}:{reference}",
        ],
        check=True,
        capture_output=True,
        timeout=IMPORT_TIMEOUT_SECONDS,
        env={**os.environ, "TMPDIR": str(archive.parent)},
    )


def _shims() -> list[tuple[int, str]]:
    """Every containerd runc shim of this machine, with the containerd address it serves."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv[0].endswith("containerd-shim-runc-v2") and "-address" in argv[:-1]:
            found.append((int(entry.name), argv[argv.index("-address") + 1]))
    return found


def _answers(address: str) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(address)
        except OSError:
            return False
    return True


def stale_shims() -> list[int]:
    """Shims a test node's containerd left when its session was interrupted: their containerd
    (a socket in a node's folder, ``nodeconfig``'s layout) is gone."""
    return [
        pid
        for pid, address in _shims()
        if address.endswith(STALE_SOCKET_SUFFIX) and not _answers(address)
    ]


def project_images(images: Any) -> list[tuple[str, str, Callable[[Path], object]]]:
    """The operator and profiler images of ``tests/deploy/images.Images`` as the node imports
    them: the reference, the image ID (what a new build changes), a writer of the archive."""
    found = []
    for reference in (images.operator, images.profiler):
        identity = images.buildah(
            "inspect", "--type", "image", "--format", "{{.FromImageID}}", reference
        ).strip()

        def write(path: Path, reference: str = reference) -> None:
            buildah_push(images.root, images.runroot, reference, path)

        found.append((reference, identity, write))
    return found
