"""The built images, through buildah: building (cached by scripts/build-images.sh), inspecting,
and a container's root filesystem to run a pod's container on (``pod_runtime``).

Every call names the store the build script uses, so nothing here touches a system-wide image
store, and buildah needs no daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .rendering import ROOT

BUILD_SCRIPT = ROOT / "scripts" / "build-images.sh"
#: A cold build makes the stand-in bases (debootstrap, torch from PyPI) and both images.
BUILD_TIMEOUT_SECONDS = 3600
#: Set to 1 to skip the image tests even where they could run.
SKIP_VARIABLE = "ROOFLINE_SKIP_IMAGE_TESTS"


def unavailable_reason() -> str | None:
    """Why the image tests cannot run here, or None when they can."""
    if os.environ.get(SKIP_VARIABLE) == "1":
        return f"{SKIP_VARIABLE}=1"
    if os.geteuid() != 0:
        return "building and running images with buildah's vfs storage needs root"
    for tool, package in (("buildah", "buildah"), ("debootstrap", "debootstrap"), ("runc", "runc")):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install {package}; .ci/run installs it)"
    return None


@dataclass(frozen=True)
class Images:
    """Where the images are and what they are called, as the build script printed it."""

    root: str
    runroot: str
    bases: str
    operator: str
    profiler: str

    def buildah(self, *args: str, timeout: float = 600) -> str:
        result = subprocess.run(
            [
                "buildah",
                "--root",
                self.root,
                "--runroot",
                self.runroot,
                "--storage-driver",
                "vfs",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout


def build_images() -> Images:
    """Run the build script; it rebuilds only what changed since its last run."""
    result = subprocess.run(
        [str(BUILD_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT.name} failed:\n{result.stderr[-4000:]}")
    printed = dict(
        line.split("=", 1) for line in result.stdout.splitlines() if re.match(r"^\w+=", line)
    )
    return Images(**{key: printed[key] for key in Images.__dataclass_fields__})


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's configuration a kubelet acts on."""

    user: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: tuple[str, ...]
    working_dir: str
    labels: Mapping[str, str]


def inspect_config(images: Images, ref: str, kind: str = "image") -> ImageConfig:
    """An image's (or a working container's) configuration, as buildah reports it."""
    inspected: dict[str, Any] = json.loads(images.buildah("inspect", "--type", kind, ref))
    config = inspected["Docker"]["config"]
    return ImageConfig(
        user=config.get("User") or "",
        entrypoint=tuple(config.get("Entrypoint") or ()),
        cmd=tuple(config.get("Cmd") or ()),
        env=tuple(config.get("Env") or ()),
        working_dir=config.get("WorkingDir") or "/",
        labels=dict(config.get("Labels") or {}),
    )


def image_user_problem(config: ImageConfig) -> str | None:
    """Why the image's USER would fail Kubernetes' ``runAsNonRoot`` check, or None.

    The kubelet can verify only a numeric user without reading the image's /etc/passwd.
    """
    if not config.user:
        return "no USER: the image runs as root"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", config.user)
    if match is None:
        return f"USER {config.user} is not numeric: runAsNonRoot cannot verify it"
    if int(match.group(1)) == 0:
        return f"USER {config.user} is root"
    return None


#: Working containers of the tests are named after this, so that leftovers can be found.
CONTAINER_PREFIX = "roofline-image-test-"


def remove_leftover_containers(images: Images) -> list[str]:
    """Remove working containers an interrupted test session left (each a full root file system
    with vfs: GBs for the profiler). One image-test session per store at a time."""
    names = images.buildah("containers", "--format", "{{.ContainerName}}").split()
    leftovers = [name for name in names if name.startswith(CONTAINER_PREFIX)]
    for name in leftovers:
        images.buildah("rm", name)
    return leftovers


@contextlib.contextmanager
def working_container(images: Images, ref: str) -> Iterator[str]:
    """A working container of ``ref``, removed afterwards; yields its name."""
    name = f"{CONTAINER_PREFIX}{uuid.uuid4().hex[:12]}"
    images.buildah("from", "--pull-never", "--quiet", "--name", name, ref)
    try:
        yield name
    finally:
        images.buildah("rm", name)


@contextlib.contextmanager
def mounted_rootfs(images: Images, container: str) -> Iterator[Path]:
    """The container's root filesystem as a directory of this machine."""
    path = Path(images.buildah("mount", container).strip())
    try:
        yield path
    finally:
        images.buildah("umount", container)
