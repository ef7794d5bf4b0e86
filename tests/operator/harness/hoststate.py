"""What a real node changes on its host, recorded before it starts and put back after it stops.

A kubelet, containerd, the CNI plugins and kube-proxy change the machine they run on, not only
the folders they are given: sysctls (the kubelet sets ``vm.overcommit_memory``, ``kernel.panic``
and ``kernel.panic_on_oops``), iptables chains and rules (``KUBE-*``, ``CNI-*``) and the nf_tables
tables iptables-nft creates for them, mounts (network namespaces, overlay root file systems,
volumes), cgroups (``kubepods``), network links (the CNI bridge and its veths) and fixed runtime
paths (``/run/containerd``, ``/run/netns``, ``/var/lib/kubelet/device-plugins``,
``/var/log/containers``, ...). :func:`snapshot` records all of them, :func:`differences` lists
what differs between two records in words, and :func:`restore` removes what a node added since a
record: only what is recognisably the node's (its chains, its cgroups, its bridge, mounts under
its paths), so nothing else on the machine is touched.

Comparisons leave out what changes on its own (inode and file counters, the last PID) and what
another tenant of the machine may change meanwhile (cgroups other than the node's).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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


def read_mounts(watched: Iterable[str]) -> frozenset[str]:
    roots = [Path(p) for p in watched]
    points = set()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = Path(_unescape_mount_path(line.split()[4]))
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


# ---------------------------------------------------------------------------- restoring
def _restore_sysctls(before: HostState, now: HostState) -> None:
    for key, value in before.sysctls.items():
        if key in now.sysctls and now.sysctls[key] != value:
            with contextlib.suppress(OSError):  # a read-only counter stays in the differences
                Path("/proc/sys", *key.split(".")).write_text(value)


def _restore_iptables(before: Rules, now: Rules) -> None:
    """Delete the node's rules from chains that were there, then flush and delete its chains."""
    for family, tables in now.items():
        for table, chains in tables.items():
            old = before.get(family, {}).get(table, {})
            added = [c for c in chains if c not in old and NODE_CHAIN.match(c)]
            for chain, rules in chains.items():
                if chain in added:
                    continue  # flushed below
                for rule in sorted(set(rules) - set(old.get(chain, ()))):
                    if _mentions_node_chain(rule, added):
                        _call([family, "-w", "-t", table, "-D", *shlex.split(rule)[1:]])
            for chain in added:
                _call([family, "-w", "-t", table, "-F", chain])
            for chain in added:
                _call([family, "-w", "-t", table, "-X", chain])


def _mentions_node_chain(rule: str, added: Sequence[str]) -> bool:
    words = shlex.split(rule)[2:]
    return any(NODE_CHAIN.match(word) or word in added for word in words)


BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})
NFT_FAMILIES = {"ip": "iptables", "ip6": "ip6tables"}


def _empty_nft_tables() -> frozenset[str]:
    """nf_tables tables that hold nothing but empty built-in chains (what iptables-nft leaves
    once its chains and rules are gone; it makes them again when it needs them), and
    kube-proxy's own table of its nftables mode."""
    rules = read_iptables()
    empty = set()
    for table in read_nft_tables():
        family, name = table.split()
        chains = rules.get(NFT_FAMILIES.get(family, ""), {}).get(name)
        emptied = chains is not None and not any(chains.values()) and set(chains) <= BUILTIN_CHAINS
        if emptied or name == "kube-proxy":
            empty.add(table)
    return frozenset(empty)


def _restore_nft_tables(before: HostState) -> None:
    """Delete the (emptied) nf_tables tables the node's iptables calls created."""
    for table in sorted(_empty_nft_tables() - before.nft_tables):
        _call(["nft", "delete", "table", *table.split()])


def _unmount(points: Iterable[str]) -> None:
    for point in sorted(points, key=lambda p: p.count("/"), reverse=True):
        if _call(["umount", point]).returncode != 0:
            _call(["umount", "--lazy", point])


def _remove_cgroups(directories: Iterable[str]) -> None:
    for directory in sorted(directories, key=lambda d: d.count("/"), reverse=True):
        with contextlib.suppress(FileNotFoundError):
            (CGROUP_ROOT / directory).rmdir()


def _remove_path(path: Path) -> None:
    """A fixed path the node created, with whatever it holds (its mounts are gone by now)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def restore(before: HostState, bridge: str) -> list[str]:
    """Undo what the node added since ``before``; returns what still differs afterwards.

    Call it once every process of the node has stopped: a busy mount, cgroup or link stays.
    """
    now = snapshot(before.watched)
    failures = []
    steps: list[Callable[[], object]] = [
        lambda: _unmount(now.mounts - before.mounts),
        lambda: _remove_links(now.links - before.links, bridge),
        lambda: _restore_iptables(before.iptables, now.iptables),
        lambda: _restore_nft_tables(before),
        lambda: _remove_cgroups(now.cgroups - before.cgroups),
        lambda: _restore_sysctls(before, now),
        *(lambda p=Path(p): _remove_path(p) for p in sorted(now.paths - before.paths)),
    ]
    for step in steps:  # one step failing must not leave the others undone
        try:
            step()
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            failures.append(f"undoing failed: {type(error).__name__}: {error}")
    return failures + differences(before, snapshot(before.watched))


def _remove_links(links: Iterable[str], bridge: str) -> None:
    for link in sorted(links):
        if link == bridge or link.startswith("veth"):
            _call(["ip", "link", "delete", link])


# ---------------------------------------------------------------------------- leftovers
#: Mounts of a node's containers and pods under any session's folder (``nodeconfig`` layout).
NODE_MOUNT = re.compile(r"/node/(containerd/state|kubelet)/")


def _node_processes() -> list[int]:
    """Processes still in a node's pod cgroups (the containers of an interrupted session)."""
    pids: set[int] = set()
    for hierarchy in CGROUP_ROOT.iterdir():
        for top in hierarchy.glob("kubepods*"):
            for directory, _, files in os.walk(top):
                if "cgroup.procs" in files:
                    with contextlib.suppress(OSError):
                        text = Path(directory, "cgroup.procs").read_text()
                        pids.update(int(p) for p in text.split())
    return sorted(pids)


def _all_mounts() -> list[str]:
    return [
        _unescape_mount_path(line.split()[4])
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    ]


def node_leftovers(bridge: str) -> list[str]:
    """What an earlier node left on this host (an interrupted session): its containers, cgroups,
    chains, bridge and mounts."""
    state = snapshot()
    found = [f"process {pid} in a pod cgroup" for pid in _node_processes()]
    found += [f"cgroup {c}" for c in sorted(state.cgroups) if "/" not in c.split("/", 1)[1]]
    found += [
        f"{family} -t {table} chain {chain}"
        for family, tables in state.iptables.items()
        for table, chains in tables.items()
        for chain in chains
        if NODE_CHAIN.match(chain)
    ]
    found += [f"link {link}" for link in sorted(state.links) if link == bridge]
    found += [f"mount {point}" for point in _all_mounts() if NODE_MOUNT.search(point)]
    return found


def clean_leftovers(bridge: str) -> list[str]:
    """Remove what an earlier node left (see :func:`node_leftovers`); returns what was found."""
    found = node_leftovers(bridge)
    if not found:
        return []
    for pid in _node_processes():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    _unmount(p for p in _all_mounts() if NODE_MOUNT.search(p))
    now = snapshot()
    clean = replace(
        now,
        iptables={
            family: {
                table: {
                    chain: tuple(r for r in rules if not _mentions_node_chain(r, ()))
                    for chain, rules in chains.items()
                    if not NODE_CHAIN.match(chain)
                }
                for table, chains in tables.items()
            }
            for family, tables in now.iptables.items()
        },
        nft_tables=now.nft_tables - _empty_nft_tables(),
        cgroups=frozenset(),
        links=frozenset(link for link in now.links if link != bridge),
    )
    restore(clean, bridge)
    return found
