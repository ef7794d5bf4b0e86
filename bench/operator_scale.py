"""Scale benchmark of ``roofline operator`` against the emulated cluster of the test harness.

For each size, an emulated cluster gets N GPU nodes whose profiler pods succeed at once with a
synthetic result, and one real ``roofline operator`` process. Two rounds are timed:

* first round: from creating the RooflineProfile (``maxParallel: N``) to fully reconciled, i.e.
  every node ``Profiled`` in status, ``Ready=True``, and every node carrying our labels;
* re-profile round: the same after a spec change that affects measurements (new batches).

For each round the emulator counts the operator's API requests by verb and resource, so the
figure "requests per node per round" is measured, not estimated. Peak memory is the operator
process's ``VmHWM``. The emulator runs on the same CPUs as the operator, so times are an upper
bound of what the operator needs.

    python bench/operator_scale.py                   # 10, 100, 1000 nodes; prints a table
    python bench/operator_scale.py --sizes 10 100    # fewer sizes
    python bench/operator_scale.py --record bench/results/operator_scale.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(REPO_ROOT / "tests" / "operator"),
    str(REPO_ROOT / "profiler"),
    str(REPO_ROOT / "operator"),
]

from harness import Cluster, FaultMode, OperatorProcess, wait_for  # noqa: E402
from harness.profiles import CRD_PATH, GROUP, PLURAL, example_profile  # noqa: E402

DEFAULT_SIZES = (10, 100, 1000)
ROUND_TIMEOUT_SECONDS = 600
#: The operator's watches; a round is timed only once all of them are open.
WATCHED = ("rooflineprofiles", "nodes", "pods")
#: Goals of the issue: requests per node per round, and seconds for the largest size.
GOAL_REQUESTS_PER_NODE = 3.0
GOAL_SECONDS_AT_1000 = 60.0
#: Verbs that are one request per call; a watch is one long-lived request, counted apart.
WATCH_VERBS = ("watch",)


@dataclass(frozen=True)
class RoundFigures:
    seconds: float
    requests: Counter[tuple[str, str]]
    nodes: int

    @property
    def per_node(self) -> float:
        calls = sum(n for (verb, _), n in self.requests.items() if verb not in WATCH_VERBS)
        return calls / self.nodes

    def breakdown(self) -> str:
        parts = sorted(((v, r), n) for (v, r), n in self.requests.items() if v not in WATCH_VERBS)
        return ", ".join(f"{verb} {resource} {n / self.nodes:.2f}" for (verb, resource), n in parts)


@dataclass(frozen=True)
class SizeFigures:
    nodes: int
    first: RoundFigures
    reprofile: RoundFigures
    peak_rss_bytes: int


def reconciled(cluster: Cluster, name: str, nodes: int, spec_hash_differs_from: set[str]) -> bool:
    """Every node profiled for the current spec, Ready, and every node labelled by us."""

    def check() -> bool:
        found = cluster.store.get(cluster.store.find_type(PLURAL, GROUP), None, name)
        status = found.get("status") or {}
        entries = status.get("nodes") or []
        if len(entries) != nodes or any(e.get("state") != "Profiled" for e in entries):
            return False
        if any(e.get("specHash") in spec_hash_differs_from for e in entries):
            return False
        conditions = status.get("conditions", [])
        ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
        if (
            ready.get("status") != "True"
            or status.get("observedGeneration") != found["metadata"]["generation"]
        ):
            return False
        labelled = [
            n
            for n in cluster.store.list(cluster.store.find_type("nodes"), None)
            if (n["metadata"].get("labels") or {}).get("roofline.dev/profile") == name
        ]
        return len(labelled) == nodes

    return cluster.call(check)


def spec_hashes(cluster: Cluster, name: str) -> set[str]:
    found = cluster.get(PLURAL, name, group=GROUP) or {}
    return {e.get("specHash", "") for e in (found.get("status") or {}).get("nodes", [])}


def timed_round(cluster: Cluster, nodes: int, action: Any, old_hashes: set[str]) -> RoundFigures:
    cluster.reset_request_counts()
    start = time.monotonic()
    action()
    wait_for(
        lambda: reconciled(cluster, "scale", nodes, old_hashes),
        timeout=ROUND_TIMEOUT_SECONDS,
        what=f"{nodes} nodes to be reconciled",
        interval=0.25,
    )
    seconds = time.monotonic() - start
    return RoundFigures(seconds, cluster.request_counts(), nodes)


def measure(nodes: int, workdir: Path) -> SizeFigures:
    with Cluster(workdir, default_mode=FaultMode.SUCCEED_INSTANTLY) as cluster:
        cluster.create("namespaces", {"metadata": {"name": "roofline-system"}})
        cluster.apply_manifest(CRD_PATH)
        cluster.add_gpu_nodes((f"gpu-{i:05d}" for i in range(nodes)), labels={"pool": "scale"})
        operator = OperatorProcess(cluster.kubeconfig, workdir, namespace="roofline-system")
        operator.start()
        wait_for(
            lambda: all(cluster.request_counts()[("watch", r)] for r in WATCHED),
            timeout=60,
            what="the operator's initial listing and watches",
        )
        try:
            profile = example_profile("scale", {"pool": "scale"}, maxParallel=nodes)
            first = timed_round(
                cluster, nodes, lambda: cluster.create(PLURAL, profile, group=GROUP), set()
            )
            old = spec_hashes(cluster, "scale")
            reprofile = timed_round(
                cluster,
                nodes,
                lambda: cluster.patch(
                    PLURAL, "scale", {"spec": {"batches": [1, 2, 4, 8, 16]}}, group=GROUP
                ),
                old,
            )
            errors = cluster.internal_errors()
            if errors:
                raise RuntimeError(f"the emulated API server failed; figures invalid: {errors}")
            return SizeFigures(nodes, first, reprofile, operator.peak_rss_bytes())
        finally:
            operator.stop()


def table(results: list[SizeFigures]) -> str:
    lines = [
        "| nodes | first round (s) | requests/node | re-profile round (s) | requests/node "
        "| operator peak RSS (MiB) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.nodes} | {r.first.seconds:.1f} | {r.first.per_node:.2f} | "
            f"{r.reprofile.seconds:.1f} | {r.reprofile.per_node:.2f} | "
            f"{r.peak_rss_bytes / 2**20:.0f} |"
        )
    return "\n".join(lines)


def breakdowns(results: list[SizeFigures]) -> str:
    lines = []
    for r in results:
        lines.append(f"- {r.nodes} nodes, first round: {r.first.breakdown()}")
        lines.append(f"- {r.nodes} nodes, re-profile round: {r.reprofile.breakdown()}")
    return "\n".join(lines)


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def goals(results: list[SizeFigures]) -> str:
    """The benchmark's goals checked against the figures; growth as time per node by size."""
    worst = max(max(r.first.per_node, r.reprofile.per_node) for r in results)
    lines = [
        f"- at most {GOAL_REQUESTS_PER_NODE:g} requests per node per round: worst "
        f"{worst:.2f} ({'met' if worst <= GOAL_REQUESTS_PER_NODE else 'missed'})"
    ]
    largest = max(results, key=lambda r: r.nodes)
    if largest.nodes >= 1000:
        verdict = "met" if largest.first.seconds <= GOAL_SECONDS_AT_1000 else "missed"
        lines.append(
            f"- {largest.nodes} nodes within {GOAL_SECONDS_AT_1000:g} s: "
            f"{largest.first.seconds:.1f} s ({verdict})"
        )
    if len(results) > 1:
        per_node = [f"{r.nodes}: {1000 * r.first.seconds / r.nodes:.1f} ms" for r in results]
        lines.append("- growth: first-round time per node " + ", ".join(per_node))
    return "\n".join(lines)


def record(path: Path, results: list[SizeFigures], command: str) -> None:
    path.write_text(
        "# Operator scale benchmark\n\n"
        f"Command: `{command}`\n\n"
        f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        "the emulator and the operator share these CPUs.\n\n"
        f"{table(results)}\n\n"
        f"Goals:\n\n{goals(results)}\n\n"
        "Requests per node per round count every API call the operator made during the round "
        "(watch connections excluded), divided by the number of nodes. By verb and resource:\n\n"
        f"{breakdowns(results)}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--record", type=Path, help="write the figures as Markdown to this file")
    args = parser.parse_args(argv)
    results = []
    for nodes in args.sizes:
        with tempfile.TemporaryDirectory(prefix=f"scale-{nodes}-") as workdir:
            figures = measure(nodes, Path(workdir))
        results.append(figures)
        print(
            f"{nodes} nodes: first round {figures.first.seconds:.1f}s "
            f"({figures.first.per_node:.2f} req/node), re-profile {figures.reprofile.seconds:.1f}s "
            f"({figures.reprofile.per_node:.2f} req/node), peak RSS "
            f"{figures.peak_rss_bytes / 2**20:.0f} MiB",
            flush=True,
        )
    print(table(results))
    print(breakdowns(results))
    print(goals(results))
    if args.record:
        command = "python bench/operator_scale.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        record(args.record, results, command.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
