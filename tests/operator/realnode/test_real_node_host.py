"""A real node changes its host, and stopping it puts the host back as it was.

The kubelet sets sysctls, kube-proxy and the kubelet add iptables chains (and iptables-nft the
nf_tables tables that hold them), containerd and the kubelet mount, make cgroups and write to fixed
runtime paths, the CNI plugin adds a bridge and veths. The end-to-end module's last test stops its
node, after pods behind Services ran on it, and checks that the host is as it was recorded (every
module's node is checked so when it stops). This test proves that the comparison and the undo
have teeth without a node: each kind of change, made by hand, is seen and removed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.operator.harness import hoststate, hostundo
from tests.operator.harness.nodeconfig import BRIDGE
from tests.operator.harness.realnode import NodeLock, default_cache

pytestmark = pytest.mark.timeout(600)

PROBE_CHAIN = "KUBE-ROOFLINE-PROBE"
PROBE_CGROUP = Path("/sys/fs/cgroup/pids/kubepods/roofline-probe")


def run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@pytest.fixture
def host_record(node_binaries: tuple[Path, Path], tmp_path: Path) -> Iterator[hoststate.HostState]:
    """The host as it is, recorded (no real node runs meanwhile: these tests change what a node
    changes); whatever a failing test left is undone afterwards."""
    with NodeLock(default_cache()):
        before = hoststate.snapshot([str(tmp_path)])
        yield before
        hostundo.restore(before, BRIDGE)


def test_each_kind_of_host_change_is_seen_and_undone(
    host_record: hoststate.HostState, tmp_path: Path
) -> None:
    kernel_key = "kernel.panic_on_oops"
    old = host_record.sysctls[kernel_key].strip()
    Path("/proc/sys/kernel/panic_on_oops").write_text("0" if old == "1" else "1")
    run("iptables", "-w", "-t", "nat", "-N", PROBE_CHAIN)
    run("iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-j", PROBE_CHAIN)
    run("iptables", "-w", "-t", "nat", "-A", PROBE_CHAIN, "-d", "203.0.113.7/32", "-j", "RETURN")
    PROBE_CGROUP.mkdir(parents=True)
    mount_point = tmp_path / "volume"
    mount_point.mkdir()
    run("mount", "-t", "tmpfs", "tmpfs", str(mount_point))
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    fixed = next(Path(p) for p in hoststate.FIXED_PATHS if not os.path.lexists(p))
    fixed.mkdir(parents=True)

    changed = "\n".join(hoststate.differences(host_record, hoststate.snapshot([str(tmp_path)])))
    for seen in (
        f"sysctl {kernel_key}",
        f"chain {PROBE_CHAIN} added",
        f"-A OUTPUT -j {PROBE_CHAIN}",
        "cgroup added: pids/kubepods",
        f"mount added: {mount_point}",
        f"network link added: {BRIDGE}",
        f"path added: {fixed}",
    ):
        assert seen in changed, changed

    assert hostundo.restore(host_record, BRIDGE) == []
    assert not mount_point.is_mount()
    assert not PROBE_CGROUP.parent.exists()
    assert not os.path.lexists(fixed)


def test_what_an_interrupted_session_left_is_found_and_removed_before_a_node_starts(
    host_record: hoststate.HostState, tmp_path: Path
) -> None:
    """A killed test run leaves its containers running in pod cgroups, its chains, its bridge
    and its pods' mounts; the next node start removes them (``clean_leftovers``)."""
    container = PROBE_CGROUP.parent / "besteffort" / "pod-left" / "container"
    container.mkdir(parents=True)
    orphan = subprocess.Popen(["sleep", "600"])
    try:
        (container / "cgroup.procs").write_text(str(orphan.pid))
        run("iptables", "-w", "-N", PROBE_CHAIN)
        run("iptables", "-w", "-A", "INPUT", "-j", PROBE_CHAIN)
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        volume = tmp_path / "node" / "kubelet" / "pods" / "left" / "volumes"
        volume.mkdir(parents=True)
        run("mount", "-t", "tmpfs", "tmpfs", str(volume))

        found = "\n".join(hostundo.clean_leftovers(BRIDGE))
        for seen in (
            f"process {orphan.pid}",
            "cgroup pids/kubepods",
            f"chain {PROBE_CHAIN}",
            f"link {BRIDGE}",
            f"mount {volume}",
        ):
            assert seen in found, found
        assert orphan.wait(timeout=10) == -9
        assert hostundo.node_leftovers(BRIDGE) == []
        assert hoststate.differences(host_record, hoststate.snapshot([str(tmp_path)])) == []
    finally:
        orphan.kill()
        orphan.wait()
