"""Reading a profile through kubectl: the command it runs, and each way kubectl can fail.

The real kubectl against a real API server is exercised in
``tests/operator/realserver/test_real_export.py``; here a stand-in executable plays kubectl's
exit status and output."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from roofline_cli.export import cluster


def test_the_command_passes_kubeconfig_and_context_as_kubectl_takes_them() -> None:
    assert cluster.kubectl_command("fleet", "kubectl", "/k", "prod") == [
        "kubectl", "get", "rooflineprofiles.roofline.dev", "--output=json",
        "--kubeconfig=/k", "--context=prod", "--", "fleet",
    ]  # fmt: skip
    assert cluster.kubectl_command("fleet", "k", None, None)[-2:] == ["--", "fleet"]


def test_no_value_reaches_kubectl_as_an_option_of_its_own() -> None:
    """A context named ``-n`` stays the value of ``--context``; the name comes after ``--``."""
    command = cluster.kubectl_command("-x", "kubectl", "--all", "-n")
    assert command[-2:] == ["--", "-x"]
    assert "--kubeconfig=--all" in command
    assert "--context=-n" in command


def _fake_kubectl(folder: Path, script: str) -> str:
    path = folder / "kubectl"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_object_kubectl_prints_is_returned(tmp_path: Path) -> None:
    body = json.dumps({"kind": "RooflineProfile", "metadata": {"name": "fleet"}})
    kubectl = _fake_kubectl(tmp_path, f"echo '{body}'\n")
    assert cluster.read_profile("fleet", kubectl)["kind"] == "RooflineProfile"


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("echo 'Error from server (NotFound): \"fleet\" not found' >&2; exit 1", "NotFound"),
        ("exit 3", "exit status 3"),
        ("echo not-json", "did not return a JSON object"),
        ("printf '%0100000d' 0 | tr 0 '['", "nested over 64"),
        ("printf '{\"a\": 1%05000d}' 0", "digits"),
    ],
)
def test_a_failing_kubectl_is_one_line(tmp_path: Path, script: str, reason: str) -> None:
    with pytest.raises(cluster.ClusterError, match=reason):
        cluster.read_profile("fleet", _fake_kubectl(tmp_path, script + "\n"))


def test_a_missing_kubectl_says_so(tmp_path: Path) -> None:
    with pytest.raises(cluster.ClusterError, match="not found"):
        cluster.read_profile("fleet", str(tmp_path / "absent"))
    assert os.sep in str(tmp_path)
