"""What a real node changes on its host, recorded before it starts and put back after it stops.

A kubelet, containerd, the CNI plugins and kube-proxy change the machine they run on, not only
the folders they are given: sysctls (the kubelet sets ``vm.overcommit_memory``, ``kernel.panic``
and ``kernel.panic_on_oops``), iptables chains and rules (``KUBE-*``, ``CNI-*``) and the nf_tables
tables iptables-nft creates for them, mounts (network namespaces, overlay root file systems,
volumes), cgroups (``kubepods``), network links (the CNI bridge and its veths) and fixed runtime
paths (``/run/containerd``, ``/run/netns``, ``/var/lib/kubelet/device-plugins``,
``/var/log/containers``, ...). :func:`snapshot` records all of them and :func:`differences` lists
what differs between two records in words; ``hostundo`` removes what a node added since a record.

Comparisons leave out what changes on its own (inode and file counters, the last PID) and what
another tenant of the machine may change meanwhile (cgroups other than the node's).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Paths containerd 1.6, the kubelet and the CNI plugins use whatever roots they are configured
#: with (and the default roots of each, in case a setting is missed).
FIXED_PATHS = (
    "/run/containerd",
    "/run/netns",
    "/run/kubernetes",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/cni",
    "/var/log/containers",
    "/var/log/pods",
    "/etc/cni",
    "/etc/containerd",
    "/opt/cni",
)
#: Kernel counters and random values that move by themselves.
VOLATILE_SYSCTLS = frozenset(
    {
        "fs.dentry-state",
        "fs.file-nr",
        "fs.inode-nr",
        "fs.inode-state",
        "fs.aio-nr",
        "kernel.ns_last_pid",
        "kernel.random.uuid",
        "kernel.random.entropy_avail",
        "kernel.pty.nr",
        "net.netfilter.nf_conntrack_count",
    }
)
#: Families of counters (disk quota statistics).
VOLATILE_PREFIXES = ("fs.quota.",)
#: Chains, cgroups and links that belong to a node (kubelet, kube-proxy, CNI plugins).
NODE_CHAIN = re.compile(r"^(KUBE-|CNI-)")
NODE_CGROUP = re.compile(r"^kubepods")
IP_FAMILIES = ("iptables", "ip6tables")
CGROUP_ROOT = Path("/sys/fs/cgroup")

#: family -> table -> chain -> rules (``-A CHAIN ...`` lines, without counters).
Rules = Mapping[str, Mapping[str, Mapping[str, tuple[str, ...]]]]


@dataclass(frozen=True)
class HostState:
    sysctls: Mapping[str, str]
    iptables: Rules
    #: ``family name`` of every nf_tables table (``ip nat``, ``ip6 filter``, ...).
    nft_tables: frozenset[str]
    #: Mount points under the watched paths.
    mounts: frozenset[str]
    #: Every cgroup directory (relative to /sys/fs/cgroup) under a node's top-level cgroups.
    cgroups: frozenset[str]
    links: frozenset[str]
    #: Which of the fixed paths exist.
    paths: frozenset[str]
    #: The node's own folders, whose mounts are watched besides the fixed paths'.
    watched: tuple[str, ...] = field(default=())


def _call(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def _run(argv: Sequence[str]) -> str:
    result = _call(argv)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout


# ---------------------------------------------------------------------------- reading
def read_sysctls(root: Path = Path("/proc/sys")) -> dict[str, str]:
    """Every readable sysctl but the volatile ones."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            key = str(path.relative_to(root)).replace("/", ".")
            if key not in VOLATILE_SYSCTLS and not key.startswith(VOLATILE_PREFIXES):
                with contextlib.suppress(OSError):
                    found[key] = path.read_text()
    return found


def _interface_of(key: str) -> str | None:
    """The network interface a sysctl belongs to (``net.ipv4.conf.eth0.forwarding``), if any."""
    match = re.match(r"net\.ipv[46]\.(?:conf|neigh)\.([^.]+)\.", key)
    if match is None or match.group(1) in ("all", "default"):
        return None
    return match.group(1)


def parse_iptables_save(text: str) -> dict[str, dict[str, tuple[str, ...]]]:
    tables: dict[str, dict[str, list[str]]] = {}
    table: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("*"):
            table = tables.setdefault(line[1:], {})
        elif line.startswith(":"):
            table.setdefault(line[1:].split()[0], [])
        elif line.startswith("-A "):
            table.setdefault(line.split()[1], []).append(line)
    return {t: {c: tuple(rules) for c, rules in chains.items()} for t, chains in tables.items()}


def read_iptables() -> dict[str, dict[str, dict[str, tuple[str, ...]]]]:
    return {
        family: parse_iptables_save(_run([f"{family}-save"]))
        for family in IP_FAMILIES
        if shutil.which(f"{family}-save")
    }


def read_nft_tables() -> frozenset[str]:
    if shutil.which("nft") is None:
        return frozenset()
    lines = _run(["nft", "list", "tables"]).splitlines()
    return frozenset(line.removeprefix("table ").strip() for line in lines if line.strip())


def _unescape_mount_path(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def all_mounts() -> list[str]:
    """Every mount point of this mount namespace."""
    return [
        _unescape_mount_path(line.split()[4])
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    ]


def read_mounts(watched: Iterable[str]) -> frozenset[str]:
    roots = [Path(p) for p in watched]
    points = set()
    for text in all_mounts():
        point = Path(text)
        if any(point == root or root in point.parents for root in roots):
            points.add(str(point))
    return frozenset(points)


def read_cgroups() -> frozenset[str]:
    found: set[str] = set()
    for hierarchy in sorted(CGROUP_ROOT.iterdir()):
        if not hierarchy.is_dir() or hierarchy.is_symlink():
            continue
        for top in hierarchy.iterdir():
            if top.is_dir() and NODE_CGROUP.match(top.name):
                found.update(str(Path(d).relative_to(CGROUP_ROOT)) for d, _, _ in os.walk(top))
    return frozenset(found)


def read_links() -> frozenset[str]:
    return frozenset(p.name for p in Path("/sys/class/net").iterdir())


def snapshot(watched: Sequence[str] = ()) -> HostState:
    """The host as it is now; ``watched`` adds folders (the node's own) to the fixed paths."""
    return HostState(
        sysctls=read_sysctls(),
        iptables=read_iptables(),
        nft_tables=read_nft_tables(),
        mounts=read_mounts((*FIXED_PATHS, *watched)),
        cgroups=read_cgroups(),
        links=read_links(),
        paths=frozenset(p for p in FIXED_PATHS if os.path.lexists(p)),
        watched=tuple(watched),
    )


# ---------------------------------------------------------------------------- comparing
def _rule_differences(before: Rules, after: Rules) -> list[str]:
    found = []
    for family in sorted(set(before) | set(after)):
        old_tables, new_tables = before.get(family, {}), after.get(family, {})
        for table in sorted(set(old_tables) | set(new_tables)):
            old, new = old_tables.get(table, {}), new_tables.get(table, {})
            for chain in sorted(set(new) - set(old)):
                found.append(f"{family} -t {table}: chain {chain} added")
            for chain in sorted(set(old) - set(new)):
                found.append(f"{family} -t {table}: chain {chain} removed")
            for chain in sorted(set(old) | set(new)):
                for rule in sorted(set(new.get(chain, ())) - set(old.get(chain, ()))):
                    found.append(f"{family} -t {table}: rule added: {rule}")
                for rule in sorted(set(old.get(chain, ())) - set(new.get(chain, ()))):
                    found.append(f"{family} -t {table}: rule removed: {rule}")
    return found


def differences(before: HostState, after: HostState) -> list[str]:
    """What changed between two records, one line each; empty when the host is as it was."""
    # An interface's sysctls come and go with it; the links are compared on their own.
    links = before.links & after.links
    found = [
        f"sysctl {key}: {before.sysctls.get(key, '(absent)').strip()} -> "
        f"{after.sysctls.get(key, '(absent)').strip()}"
        for key in sorted(set(before.sysctls) | set(after.sysctls))
        if before.sysctls.get(key) != after.sysctls.get(key)
        and _interface_of(key) in (None, *links)
    ]
    found += _rule_differences(before.iptables, after.iptables)
    for kind, old, new in (
        ("nf_tables table", before.nft_tables, after.nft_tables),
        ("mount", before.mounts, after.mounts),
        ("cgroup", before.cgroups, after.cgroups),
        ("network link", before.links, after.links),
        ("path", before.paths, after.paths),
    ):
        found += [f"{kind} added: {item}" for item in sorted(new - old)]
        found += [f"{kind} removed: {item}" for item in sorted(old - new)]
    return found
