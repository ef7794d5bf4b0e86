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
from tests.operator.harness import hoststate
from tests.operator.harness.nodeconfig import BRIDGE

pytestmark = pytest.mark.timeout(600)

PROBE_CHAIN = "KUBE-ROOFLINE-PROBE"
PROBE_CGROUP = Path("/sys/fs/cgroup/pids/kubepods/roofline-probe")


def run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@pytest.fixture
def host_record(node_binaries: tuple[Path, Path], tmp_path: Path) -> Iterator[hoststate.HostState]:
    """The host as it is, recorded; whatever a failing test left is undone afterwards."""
    before = hoststate.snapshot([str(tmp_path)])
    yield before
    hoststate.restore(before, BRIDGE)


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

    assert hoststate.restore(host_record, BRIDGE) == []
    assert not mount_point.is_mount()
    assert not PROBE_CGROUP.parent.exists()
    assert not os.path.lexists(fixed)
