"""RooflineProfile documents for tests, derived from the shipped example, and status readers.

Tests start from ``manifests/examples/rooflineprofile.yaml`` (what a user would apply) and shrink
only what makes a CPU run short: a small shape, four batches, ``quick``. Manifests are written as
JSON because kubectl reads YAML 1.1, where the example's bare key ``n`` would mean ``false``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .cluster import Cluster
from .commands import REPO_ROOT
from .waiting import wait_for

CRD_PATH = (
    REPO_ROOT / "charts" / "roofline-operator" / "crds" / "rooflineprofiles.roofline.dev.yaml"
)
EXAMPLE_PATH = REPO_ROOT / "manifests" / "examples" / "rooflineprofile.yaml"
GROUP = "roofline.dev"
PLURAL = "rooflineprofiles"
LABEL_PREFIX = "roofline.dev/"

#: What a profile whose pods run the real profiler on this machine's CPU says: without it a GPU
#: profile's pod fails here, as in a container that sees no GPU.
ON_CPU: dict[str, Any] = {"device": "cpu"}

#: What keeps one real profiler run at a few seconds on a small CPU.
SMALL_RUN: dict[str, Any] = {
    "dtype": "float32",
    "shape": {"k": 512, "n": 512},
    "batches": [1, 2, 4, 8],
    "quick": True,
}


def example_profile(
    name: str, selector: Mapping[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """The shipped example renamed, made small, with ``spec`` fields overridden."""
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE_PATH.read_text()))
    doc["metadata"] = {"name": name}
    doc["spec"].update(SMALL_RUN)
    if selector is not None:
        doc["spec"]["nodeSelector"] = dict(selector)
    doc["spec"].update(spec)
    return doc


def write_manifest(directory: Path, doc: Mapping[str, Any]) -> Path:
    path = directory / f"{doc['metadata']['name']}.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def profile_status(cluster: Cluster, name: str) -> dict[str, Any]:
    found = cluster.get(PLURAL, name, group=GROUP) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def node_entries(cluster: Cluster, name: str) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in profile_status(cluster, name).get("nodes", [])}


def condition(status: Mapping[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        (c for c in status.get("conditions", []) if c.get("type") == kind), {}
    )
    return found


def our_labels(cluster: Cluster, node: str) -> dict[str, str]:
    found = cluster.get("nodes", node) or {}
    labels = found.get("metadata", {}).get("labels") or {}
    return {k: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)}


def wait_for_nodes(
    cluster: Cluster,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    nodes: list[str],
    timeout: float = 60,
    what: str = "the nodes",
) -> dict[str, dict[str, Any]]:
    """Wait until every named node's status entry satisfies ``predicate``."""

    def check() -> dict[str, dict[str, Any]] | None:
        entries = node_entries(cluster, name)
        if all(n in entries and predicate(entries[n]) for n in nodes):
            return entries
        return None

    return wait_for(check, timeout=timeout, what=f"{what} of profile {name}")


def profiled(entry: Mapping[str, Any]) -> bool:
    return entry.get("state") == "Profiled"


def state_is(*states: str) -> Callable[[dict[str, Any]], bool]:
    return lambda entry: entry.get("state") in states


def models_planned(names: list[str]) -> Callable[[dict[str, Any]], bool]:
    """Whether a node entry is profiled with a plan (a max batch by memory) for each of ``names``
    and no other model."""

    def check(entry: dict[str, Any]) -> bool:
        planned = {m["name"] for m in entry.get("models", []) if "maxBatchByMemory" in m}
        return profiled(entry) and planned == set(names)

    return check
