"""Both images, built from the Dockerfile with buildah and run as the pods that deploy them.

The operator image runs the chart's Deployment container (its ENTRYPOINT, the chart's args); the
profiler image runs the container ``build_profiler_pod`` makes, command and all, as the pod's
non-root user on a read-only root filesystem, and its termination message goes through the
operator's own decoder. Image facts (numeric non-root USER, OCI labels, no compiler or package
manager) are read from the built images, and a deliberately broken variant shows that a root
USER or a wrong ENTRYPOINT fails these checks.

Needs root, buildah, debootstrap and runc (.ci/run installs them), else skipped with the reason.
The first run builds everything (minutes, see docs/testing-operator.md); later runs reuse the
images until the Dockerfile, the sources or the build script change.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roofline_operator.core.names import CONTAINER_NAME, FailureReason
from roofline_operator.core.spec import parse_spec
from roofline_operator.decide.outcomes import Failed, Succeeded, classify_pod
from roofline_operator.decide.pods import PROFILER_UID, ProfileRef, build_profiler_pod, pod_facts

from . import images as img
from .pod_runtime import (
    TERMINATION_MESSAGE_LIMIT_BYTES,
    ContainerRun,
    PodRefused,
    container_argv,
    effective_user,
    run_pod_container,
)
from .rendering import ROOT, render_objects, the_one

pytestmark = [pytest.mark.slow, pytest.mark.timeout(img.BUILD_TIMEOUT_SECONDS + 600)]

NODE = "image-test-node"
#: Longest wait for the profiler to stop after SIGTERM: the current kernel and the interpreter's
#: exit (about a second on an idle machine), with room for a loaded one.
STOP_WITHIN_SECONDS = 10.0
VERSION = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
#: Host tools that build native code, and installers a user of the image could run.
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "ld", "as", "make")
PACKAGE_MANAGERS = ("pip", "pip3", "conda", "mamba", "micromamba", "uv")
#: Lists what of the above the image holds, and whether ``python -m pip`` would work.
TOOL_PROBE = """
import importlib.util, json, shutil, sys
tools = sys.argv[1:]
print(json.dumps({"found": [t for t in tools if shutil.which(t)],
                  "pip_module": importlib.util.find_spec("pip") is not None}))
"""


@pytest.fixture(scope="module")
def images() -> img.Images:
    reason = img.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    images = img.build_images()
    img.remove_leftover_containers(images)
    return images


@pytest.fixture(scope="module")
def operator_rootfs(images: img.Images) -> Iterator[Path]:
    with (
        img.working_container(images, images.operator) as container,
        img.mounted_rootfs(images, container) as rootfs,
    ):
        yield rootfs


@pytest.fixture(scope="module")
def profiler_rootfs(images: img.Images) -> Iterator[Path]:
    with (
        img.working_container(images, images.profiler) as container,
        img.mounted_rootfs(images, container) as rootfs,
    ):
        yield rootfs


def deployment_pod_spec() -> dict[str, Any]:
    """The operator pod exactly as the chart renders it with its defaults (a copy to change)."""
    deployment = the_one(render_objects(), "Deployment")
    spec: dict[str, Any] = copy.deepcopy(deployment["spec"]["template"]["spec"])
    return spec


#: A CPU profile: what the profiler in the image can measure on this machine, which has no GPU.
CPU_PROFILE = {"nodeSelector": {"pool": "cpu"}, "quick": True, "device": "cpu"}


def profiler_pod(**spec_fields: Any) -> dict[str, Any]:
    """The pod the operator would create for a profile of ``spec_fields`` (a quick CPU profile
    by default)."""
    spec = parse_spec({**CPU_PROFILE, **spec_fields})
    return build_profiler_pod(
        profile=ProfileRef(name="image-test", uid="00000000-0000-0000-0000-000000000001"),
        spec=spec,
        node=NODE,
        gpus=1,
        attempt=1,
        spec_hash="image-test",
        namespace="roofline-system",
        image="localhost/roofline:test",
    )


def run_operator_help(images: img.Images, ref: str, rootfs: Path, scratch: Path) -> ContainerRun:
    """The chart's operator container, its args plus ``--help``, in image ``ref``."""
    pod_spec = deployment_pod_spec()
    container = pod_spec["containers"][0]
    assert "command" not in container, "the Deployment relies on the image's ENTRYPOINT"
    config = img.inspect_config(images, ref)
    argv = container_argv({**container, "args": [*container["args"], "--help"]}, config)
    return run_pod_container(
        pod_spec=pod_spec, image=config, rootfs=rootfs, scratch=scratch, argv=argv, timeout=120
    )


def operator_help_works(run: ContainerRun) -> bool:
    return run.exit_code == 0 and "usage: roofline operator" in run.stdout


def test_the_operator_image_starts_the_charts_operator_command(
    images: img.Images, operator_rootfs: Path, tmp_path: Path
) -> None:
    run = run_operator_help(images, images.operator, operator_rootfs, tmp_path)
    assert operator_help_works(run), run
    assert "--profiler-image" in run.stdout
    assert (run.uid, run.gid) == (65532, 65532)


def test_the_operator_image_imports_every_operator_module_under_the_pods_settings(
    images: img.Images, operator_rootfs: Path, tmp_path: Path
) -> None:
    probe = (
        "import importlib, pkgutil, roofline_operator, roofline_cli\n"
        "names = [m.name for m in pkgutil.walk_packages(roofline_operator.__path__, "
        "'roofline_operator.')]\n"
        "[importlib.import_module(n) for n in names]\n"
        "import kopf, prometheus_client, aiohttp, yaml, jsonschema\n"
        "print(len(names))\n"
    )
    run = run_pod_container(
        pod_spec=deployment_pod_spec(),
        image=img.inspect_config(images, images.operator),
        rootfs=operator_rootfs,
        scratch=tmp_path,
        argv=["python", "-c", probe],
        timeout=120,
    )
    assert run.exit_code == 0, run.stderr
    assert int(run.stdout.strip()) > 10


def test_the_profiler_pod_runs_in_its_image_and_the_operator_reads_its_result(
    images: img.Images, profiler_rootfs: Path, tmp_path: Path
) -> None:
    pod = profiler_pod()
    container = pod["spec"]["containers"][0]
    config = img.inspect_config(images, images.profiler)
    started = time.time()
    run = run_pod_container(
        pod_spec=pod["spec"],
        image=config,
        rootfs=profiler_rootfs,
        scratch=tmp_path,
        node=NODE,
        argv=container_argv(container, config),
        timeout=600,
    )
    assert run.exit_code == 0, run.stderr[-3000:]
    assert (run.uid, run.gid) == (PROFILER_UID, PROFILER_UID)
    assert config.user == f"{PROFILER_UID}:{PROFILER_UID}", "the pod's user is the image's"
    assert 0 < len(run.termination_message.encode()) <= TERMINATION_MESSAGE_LIMIT_BYTES
    # The pod as the kubelet reports it when the container ends, through the operator's reading.
    finished = {
        **pod,
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": CONTAINER_NAME,
                    "state": {
                        "terminated": {
                            "exitCode": run.exit_code,
                            "reason": "Completed",
                            "message": run.termination_message,
                        }
                    },
                }
            ],
        },
    }
    outcome = classify_pod(pod_facts(finished), parse_spec(CPU_PROFILE), started)
    assert isinstance(outcome, Succeeded), outcome
    (gpu,) = outcome.result.gpus
    assert gpu.bandwidth_bytes_per_second > 0
    assert gpu.peak_flops_per_second > 0
    assert gpu.recommended_min_batch >= 1


def _finished(pod: dict[str, Any], run: ContainerRun, phase: str, message: str) -> dict[str, Any]:
    """The pod as the kubelet reports it once its container ended with ``run``."""
    terminated = {"exitCode": run.exit_code, "reason": "Error", "message": message}
    status = {"name": CONTAINER_NAME, "state": {"terminated": terminated}}
    return {**pod, "status": {"phase": phase, "containerStatuses": [status]}}


def test_a_gpu_profiles_pod_without_a_gpu_fails_in_the_image_naming_the_causes(
    images: img.Images, profiler_rootfs: Path, tmp_path: Path
) -> None:
    """The image's profiler, given ``--device cuda`` in a container that sees no GPU (here: no
    GPU at all), refuses to measure the CPU instead; the operator reads the failure."""
    pod = profiler_pod(device="gpu")
    container = pod["spec"]["containers"][0]
    config = img.inspect_config(images, images.profiler)
    argv = container_argv(container, config)
    assert argv[argv.index("--device") + 1] == "cuda"
    run = run_pod_container(
        pod_spec=pod["spec"],
        image=config,
        rootfs=profiler_rootfs,
        scratch=tmp_path,
        node=NODE,
        argv=argv,
        timeout=300,
    )
    assert run.exit_code == 2, run.stderr[-2000:]
    line = run.stderr.strip().splitlines()[-1]
    assert "device 'cuda' is not available" in line
    for cause in ("runtime class", "device plugin", "driver"):
        assert cause in line
    # FallbackToLogsOnError: the termination file is empty, so the kubelet publishes the log's
    # tail (pod_runtime applies the kubelet's rule), which ends with that line.
    assert run.termination_message.strip().splitlines()[-1] == line
    failed = _finished(pod, run, "Failed", run.termination_message)
    outcome = classify_pod(pod_facts(failed), parse_spec(CPU_PROFILE), time.time())
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason is FailureReason.POD_FAILED
    assert "runtime class" in outcome.message


def test_the_profiler_stops_at_once_when_its_pod_is_deleted(
    images: img.Images, profiler_rootfs: Path, tmp_path: Path
) -> None:
    """SIGTERM, as the kubelet sends it when the pod is deleted, to the image's ENTRYPOINT
    running as the container's PID 1 while it measures: it stops within seconds, says so, and
    leaves no result in the termination message."""
    pod = profiler_pod(quick=False)
    container = pod["spec"]["containers"][0]
    config = img.inspect_config(images, images.profiler)

    def measuring(pid: int) -> bool:
        try:
            return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return False

    run = run_pod_container(
        pod_spec=pod["spec"],
        image=config,
        rootfs=profiler_rootfs,
        scratch=tmp_path,
        node=NODE,
        argv=container_argv(container, config),
        timeout=600,
        terminate_when=measuring,
    )
    assert run.stopped_in is not None, "the profile ended before it could be stopped"
    assert run.stopped_in < STOP_WITHIN_SECONDS, f"took {run.stopped_in:.1f} s"
    assert run.exit_code == 143, run.stderr[-2000:]
    expected = "roofline: terminated by SIGTERM: stopped measuring, no result written"
    assert run.stderr.strip().splitlines()[-1] == expected
    assert run.termination_message == expected


def test_the_profiler_pods_root_filesystem_is_read_only_and_tmp_is_writable(
    images: img.Images, profiler_rootfs: Path, tmp_path: Path
) -> None:
    probe = (
        "import json, os\n"
        "def writable(path):\n"
        "    try:\n"
        "        open(os.path.join(path, 'probe'), 'w').close()\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
        "print(json.dumps({p: writable(p) for p in ('/', '/opt', '/etc', '/tmp')}))\n"
    )
    run = run_pod_container(
        pod_spec=profiler_pod()["spec"],
        image=img.inspect_config(images, images.profiler),
        rootfs=profiler_rootfs,
        scratch=tmp_path,
        argv=["python", "-c", probe],
        timeout=120,
    )
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout) == {"/": False, "/opt": False, "/etc": False, "/tmp": True}


#: Over the kubelet's limit: a head the kubelet drops and a tail of exactly the limit it keeps.
LONG_MESSAGE_HEAD, LONG_MESSAGE_TAIL = "h" * 1000, "t" * (TERMINATION_MESSAGE_LIMIT_BYTES - 1) + "!"


def test_a_termination_message_over_4096_bytes_keeps_its_end_as_the_kubelet_does(
    images: img.Images, operator_rootfs: Path, tmp_path: Path
) -> None:
    """A real kubelet reads the message file from its end (``tail.ReadAtMost``)."""
    write = "import sys; open('/dev/termination-log', 'w').write(sys.argv[1] + sys.argv[2])"
    run = run_pod_container(
        pod_spec=deployment_pod_spec(),
        image=img.inspect_config(images, images.operator),
        rootfs=operator_rootfs,
        scratch=tmp_path,
        argv=["python", "-c", write, LONG_MESSAGE_HEAD, LONG_MESSAGE_TAIL],
        timeout=120,
    )
    assert run.exit_code == 0, run.stderr
    assert run.termination_message == LONG_MESSAGE_TAIL


@pytest.mark.parametrize("target", ["operator", "profiler"])
def test_images_run_as_a_numeric_non_root_user(images: img.Images, target: str) -> None:
    config = img.inspect_config(images, getattr(images, target))
    assert img.image_user_problem(config) is None


@pytest.mark.parametrize("target", ["operator", "profiler"])
def test_images_carry_the_oci_labels_and_name_the_base_they_were_built_from(
    images: img.Images, target: str
) -> None:
    labels = img.inspect_config(images, getattr(images, target)).labels
    assert VERSION is not None
    assert labels["org.opencontainers.image.version"] == VERSION.group(1)
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.title"] in ("roofline-operator", "roofline-profiler")
    assert labels["org.opencontainers.image.description"]
    base = labels["org.opencontainers.image.base.name"]
    if images.bases == "standin":
        base_labels = img.inspect_config(images, base).labels
        assert "stand-in" in base_labels["org.opencontainers.image.description"]
        assert getattr(images, target).endswith("-standin")
    else:
        assert base.startswith("docker.io/")


@pytest.mark.parametrize("target", ["operator", "profiler"])
def test_images_hold_no_compiler_and_no_package_manager_a_user_could_run(
    images: img.Images,
    target: str,
    operator_rootfs: Path,
    profiler_rootfs: Path,
    tmp_path: Path,
) -> None:
    rootfs = operator_rootfs if target == "operator" else profiler_rootfs
    pod_spec = deployment_pod_spec() if target == "operator" else profiler_pod()["spec"]
    config = img.inspect_config(images, getattr(images, target))
    run = run_pod_container(
        pod_spec=pod_spec,
        image=config,
        rootfs=rootfs,
        scratch=tmp_path / "tools",
        argv=["python", "-c", TOOL_PROBE, *COMPILERS, *PACKAGE_MANAGERS],
        timeout=120,
    )
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout) == {"found": [], "pip_module": False}
    # The OS package database stays (scanners read it), but apt cannot act for this user.
    apt = run_pod_container(
        pod_spec=pod_spec,
        image=config,
        rootfs=rootfs,
        scratch=tmp_path / "apt",
        argv=["apt-get", "install", "--yes", "--no-download", "make"],
        timeout=120,
    )
    assert apt.exit_code != 0
    assert "Permission denied" in apt.stderr or "Read-only file system" in apt.stderr


@pytest.fixture
def broken_operator(images: img.Images) -> Iterator[str]:
    """The operator image with a root USER and a misspelt ENTRYPOINT, committed as an image."""
    ref = "localhost/roofline-operator-broken:test"
    with img.working_container(images, images.operator) as container:
        images.buildah("config", "--user", "0:0", "--entrypoint", '["rooflin"]', container)
        images.buildah("commit", "--quiet", "--format", "docker", container, ref)
    try:
        yield ref
    finally:
        images.buildah("rmi", ref)


def test_a_root_user_or_a_wrong_entrypoint_fails_the_image_checks(
    images: img.Images, broken_operator: str, tmp_path: Path
) -> None:
    config = img.inspect_config(images, broken_operator)
    assert img.image_user_problem(config) == "USER 0:0 is root"
    pod_spec = deployment_pod_spec()
    del pod_spec["securityContext"]["runAsUser"]
    with pytest.raises(PodRefused, match="image will run as root"):
        effective_user(pod_spec, config)
    with (
        img.working_container(images, broken_operator) as container,
        img.mounted_rootfs(images, container) as rootfs,
    ):
        run = run_operator_help(images, broken_operator, rootfs, tmp_path)
    assert not operator_help_works(run)
    assert run.exit_code != 0
    assert "rooflin" in run.stderr
