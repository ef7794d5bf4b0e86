"""Undoing what a real node changed on its host, since a record of ``hoststate``.

:func:`restore` removes only what is recognisably the node's: mounts under its folders and the
fixed runtime paths, its bridge and veths, the ``KUBE-*`` and ``CNI-*`` chains and the rules that
jump to them, the nf_tables tables iptables-nft made for them once they are empty, the
``kubepods`` cgroups, the fixed paths that did not exist, and the sysctls as they were; nothing
else on the machine is touched. :func:`clean_leftovers` does the same for what an interrupted
session left (its containers still running in pod cgroups included), before a node starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from .hoststate import (
    CGROUP_ROOT,
    NODE_CHAIN,
    HostState,
    Rules,
    all_mounts,
    differences,
    read_iptables,
    read_nft_tables,
    snapshot,
)

BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})
NFT_FAMILIES = {"ip": "iptables", "ip6": "ip6tables"}
#: Mounts of a node's containers and pods under any session's folder (``nodeconfig`` layout).
NODE_MOUNT = re.compile(r"/node/(containerd/state|kubelet)/")
KILL_WAIT_SECONDS = 10


def _call(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


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


def _empty_nft_tables() -> frozenset[str]:
    """nf_tables tables that hold nothing but empty built-in chains (what iptables-nft leaves
    once its chains and rules are gone; it makes them again when it needs them), and
    kube-proxy's own table of its nftables mode."""
    rules = read_iptables()
    return frozenset(t for t in read_nft_tables() if _emptied(t, rules))


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
    found += [f"mount {point}" for point in all_mounts() if NODE_MOUNT.search(point)]
    return found


def clean_leftovers(bridge: str) -> list[str]:
    """Remove what an earlier node left (see :func:`node_leftovers`); returns what was found."""
    found = node_leftovers(bridge)
    if not found:
        return []
    for pid in _node_processes():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while _node_processes() and time.monotonic() < deadline:
        time.sleep(0.1)  # a killed process leaves its cgroup when it has exited
    _unmount(p for p in all_mounts() if NODE_MOUNT.search(p))
    now = snapshot()
    rules = _without_node_chains(now.iptables)
    clean = replace(
        now,
        iptables=rules,
        nft_tables=frozenset(t for t in now.nft_tables if not _emptied(t, rules)),
        cgroups=frozenset(),
        links=frozenset(link for link in now.links if link != bridge),
    )
    restore(clean, bridge)
    return found


def _without_node_chains(rules: Rules) -> Rules:
    return {
        family: {
            table: {
                chain: tuple(r for r in chain_rules if not _mentions_node_chain(r, ()))
                for chain, chain_rules in chains.items()
                if not NODE_CHAIN.match(chain)
            }
            for table, chains in tables.items()
        }
        for family, tables in rules.items()
    }


def _emptied(table: str, rules: Rules) -> bool:
    """Whether an nf_tables table holds nothing but empty built-in chains in ``rules`` (or is
    kube-proxy's own)."""
    family, name = table.split()
    chains = rules.get(NFT_FAMILIES.get(family, ""), {}).get(name)
    if name == "kube-proxy":
        return True
    return chains is not None and not any(chains.values()) and set(chains) <= BUILTIN_CHAINS
