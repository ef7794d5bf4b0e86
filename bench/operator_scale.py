"""Scale benchmark of ``roofline operator`` against the emulated cluster of the test harness.

For each size, an emulated cluster gets N GPU nodes whose profiler pods succeed at once with a
synthetic result (with a plan per model when the profile names models: two by default), and one
real ``roofline operator`` process. Two rounds are timed:

* first round: from creating the RooflineProfile (``maxParallel: N``) to fully reconciled, i.e.
  every node profiled under the current spec (``status.summary``: ``status.nodes[]`` lists only
  some nodes), ``Ready=True``, and every node carrying our labels;
* re-profile round: the same after a spec change that affects measurements (new batches).

For each round the emulator counts the operator's API requests by verb and resource, so the
figure "requests per node per round" is measured, not estimated. Peak memory is the operator
process's ``VmHWM``. The emulator runs on the same CPUs as the operator, so times are an upper
bound of what the operator needs; the machine's load average is recorded with each size. The
size of the profile's ``status`` (as JSON) is recorded too: a real API server stores an object of
at most about 1.5 MiB in etcd.

    python bench/operator_scale.py                   # 10, 100, 1000, 10000 nodes, 2 models
    python bench/operator_scale.py --sizes 10 100    # fewer sizes
    python bench/operator_scale.py --models 0        # profiles without models
    python bench/operator_scale.py --record bench/results/operator_scale.md
    python bench/operator_scale.py --server real --sizes 1000 \\
        --record bench/results/operator_scale_real.md   # real etcd + kube-apiserver
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flag_types import positive_int

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(REPO_ROOT),
    str(REPO_ROOT / "profiler"),
    str(REPO_ROOT / "operator"),
]

from tests.operator.harness import Cluster, FaultMode, OperatorProcess, wait_for  # noqa: E402
from tests.operator.harness.profiles import CRD_PATH, GROUP, PLURAL, example_profile  # noqa: E402

DEFAULT_SIZES = (10, 100, 1000, 10000)
DEFAULT_MODELS = 2
ROUND_TIMEOUT_SECONDS = 1200
#: The operator's watches; a round is timed only once all of them are open.
WATCHED = ("rooflineprofiles", "nodes", "pods")
#: Goals of the issue: requests per node per round, and seconds for the largest size.
GOAL_REQUESTS_PER_NODE = 3.0
GOAL_SECONDS_AT_1000 = 60.0
GOAL_SECONDS_AT_10000 = 120.0
GOAL_PEAK_RSS_AT_10000 = 1 << 30
#: About the largest object a real API server stores (etcd's default request limit).
ETCD_OBJECT_LIMIT_BYTES = 1_572_864
#: Models of the benchmark's profile: presets, each with its own context.
BENCH_MODELS = (
    {"name": "Llama-3.1-8B-Instruct", "preset": "llama-3.1-8b", "contextTokens": 8192},
    {"name": "Qwen3-8B", "preset": "qwen3-8b", "contextTokens": 32768},
    {"name": "Llama-3.1-70B-Instruct", "preset": "llama-3.1-70b", "tensorParallel": 8},
    {"name": "Mixtral-8x7B", "preset": "mixtral-8x7b", "tensorParallel": 2},
)
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
    models: int = 0
    #: The profile's ``status`` as compact JSON, after the first round.
    status_bytes: int = 0
    #: From starting the operator to all its watches open (the initial listings processed).
    startup_seconds: float = 0.0
    #: The machine's 1-minute load average when the size started and when it ended.
    load: tuple[float, float] = (0.0, 0.0)
    #: etcd's database size after both rounds (real-server mode only).
    etcd_db_bytes: int = 0


def reconciled(cluster: Cluster, name: str, nodes: int) -> bool:
    """Every node profiled for the current spec (``status.summary``, which counts every node
    however many ``status.nodes[]`` lists), Ready, and every node labelled by us."""

    def check() -> bool:
        found = cluster.store.get(cluster.store.find_type(PLURAL, GROUP), None, name)
        status = found.get("status") or {}
        summary = status.get("summary") or {}
        if (summary.get("matched"), summary.get("profiled")) != (nodes, nodes):
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


def timed_round(cluster: Cluster, nodes: int, action: Any) -> RoundFigures:
    cluster.reset_request_counts()
    start = time.monotonic()
    action()
    wait_for(
        lambda: reconciled(cluster, "scale", nodes),
        timeout=ROUND_TIMEOUT_SECONDS,
        what=f"{nodes} nodes to be reconciled",
        interval=0.25,
    )
    seconds = time.monotonic() - start
    return RoundFigures(seconds, cluster.request_counts(), nodes)


def status_bytes(cluster: Cluster, name: str) -> int:
    found = cluster.get(PLURAL, name, group=GROUP) or {}
    return len(json.dumps(found.get("status") or {}, separators=(",", ":")).encode())


def scale_profile(nodes: int, models: int) -> dict[str, Any]:
    """The profile over every node, all at once, with the first ``models`` of the bench's models
    (the emulated and the real server's rounds alike)."""
    extra: dict[str, Any] = {}
    if models:
        extra = {
            "models": [dict(m) for m in BENCH_MODELS[:models]],
            "slo": {"interTokenLatency": "50ms"},
            "gpuHourCost": "2.50",
        }
    return example_profile("scale", {"pool": "scale"}, maxParallel=nodes, **extra)


def measure(nodes: int, workdir: Path, models: int = DEFAULT_MODELS) -> SizeFigures:
    load_before = os.getloadavg()[0]
    with Cluster(workdir, default_mode=FaultMode.SUCCEED_INSTANTLY) as cluster:
        cluster.create("namespaces", {"metadata": {"name": "roofline-system"}})
        cluster.apply_manifest(CRD_PATH)
        cluster.add_gpu_nodes((f"gpu-{i:05d}" for i in range(nodes)), labels={"pool": "scale"})
        operator = OperatorProcess(cluster.kubeconfig, workdir, namespace="roofline-system")
        operator.start()
        started = time.monotonic()
        wait_for(
            lambda: all(cluster.request_counts()[("watch", r)] for r in WATCHED),
            timeout=60 + nodes / 50,
            what="the operator's initial listing and watches",
        )
        startup = time.monotonic() - started
        try:
            profile = scale_profile(nodes, models)
            first = timed_round(
                cluster, nodes, lambda: cluster.create(PLURAL, profile, group=GROUP)
            )
            size = status_bytes(cluster, "scale")
            reprofile = timed_round(
                cluster,
                nodes,
                lambda: cluster.patch(
                    PLURAL, "scale", {"spec": {"batches": [1, 2, 4, 8, 16]}}, group=GROUP
                ),
            )
            errors = cluster.internal_errors()
            if errors:
                raise RuntimeError(f"the emulated API server failed; figures invalid: {errors}")
            rss = operator.peak_rss_bytes()
            load = (load_before, os.getloadavg()[0])
            return SizeFigures(nodes, first, reprofile, rss, models, size, startup, load)
        finally:
            operator.stop()


def table(results: list[SizeFigures]) -> str:
    lines = [
        "| nodes | models | operator start-up (s) | first round (s) | requests/node "
        "| re-profile round (s) | requests/node | operator peak RSS (MiB) | status (KiB) "
        "| load (1-min, start/end) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    real = any(r.etcd_db_bytes for r in results)
    if real:
        lines[0] += " etcd database (MiB) |"
        lines[1] += "---:|"
    for r in results:
        etcd = f" {r.etcd_db_bytes / 2**20:.1f} |" if real else ""
        lines.append(
            f"| {r.nodes} | {r.models} | {r.startup_seconds:.1f} | {r.first.seconds:.1f} | "
            f"{r.first.per_node:.2f} | "
            f"{r.reprofile.seconds:.1f} | {r.reprofile.per_node:.2f} | "
            f"{r.peak_rss_bytes / 2**20:.0f} | {r.status_bytes / 1024:.0f} | "
            f"{r.load[0]:.1f}/{r.load[1]:.1f} |{etcd}"
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
    for r in results:
        if r.nodes in (1000, 10000):
            goal = GOAL_SECONDS_AT_1000 if r.nodes == 1000 else GOAL_SECONDS_AT_10000
            verdict = "met" if r.first.seconds <= goal else "missed"
            lines.append(
                f"- {r.nodes} nodes within {goal:g} s: {r.first.seconds:.1f} s ({verdict})"
            )
        if r.nodes == 10000:
            rss = r.peak_rss_bytes
            verdict = "met" if rss <= GOAL_PEAK_RSS_AT_10000 else "missed"
            lines.append(
                f"- {r.nodes} nodes within {GOAL_PEAK_RSS_AT_10000 / 2**30:g} GiB operator "
                f"memory: {rss / 2**20:.0f} MiB ({verdict})"
            )
    over = [r for r in results if r.status_bytes > ETCD_OBJECT_LIMIT_BYTES]
    if over:
        sizes = ", ".join(f"{r.nodes} nodes: {r.status_bytes / 2**20:.1f} MiB" for r in over)
        lines.append(
            f"- status over the ~{ETCD_OBJECT_LIMIT_BYTES / 2**20:.1f} MiB a real API server "
            f"stores: {sizes} (the emulator stores it anyway)"
        )
    if len(results) > 1:
        per_node = [f"{r.nodes}: {1000 * r.first.seconds / r.nodes:.1f} ms" for r in results]
        lines.append("- growth: first-round time per node " + ", ".join(per_node))
    return "\n".join(lines)


def record(path: Path, results: list[SizeFigures], command: str, note: str = "") -> None:
    path.write_text(
        "# Operator scale benchmark\n\n"
        f"Command: `{command}`\n\n"
        f"Date: {time.strftime('%Y-%m-%d', time.gmtime())}. "
        f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        + (
            "a real etcd and kube-apiserver (scripts/control-plane.sh), the operator as the "
            "chart's service account, and the tests' stand-in scheduler and kubelet share these "
            "CPUs; requests are counted from the API server's audit log."
            if any(r.etcd_db_bytes for r in results)
            else "the emulator and the operator share these CPUs."
        )
        + (f" {note}" if note else "")
        + "\n\n"
        f"{table(results)}\n\n"
        f"Goals:\n\n{goals(results)}\n\n"
        "Requests per node per round count every API call the operator made during the round "
        "(watch connections excluded), divided by the number of nodes. By verb and resource:\n\n"
        f"{breakdowns(results)}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument(
        "--models",
        type=int,
        default=DEFAULT_MODELS,
        choices=range(len(BENCH_MODELS) + 1),
        help=f"models in the profile (default {DEFAULT_MODELS})",
    )
    parser.add_argument(
        "--server",
        choices=("emulator", "real"),
        default="emulator",
        help="the emulated API server, or a real etcd + kube-apiserver (scripts/control-plane.sh)",
    )
    parser.add_argument("--record", type=Path, help="write the figures as Markdown to this file")
    parser.add_argument("--note", default="", help="a sentence about the conditions, recorded")
    args = parser.parse_args(argv)
    results = []
    for nodes in args.sizes:
        with tempfile.TemporaryDirectory(prefix=f"scale-{nodes}-") as workdir:
            if args.server == "real":
                from operator_scale_real import measure_real

                figures = measure_real(nodes, Path(workdir), args.models)
            else:
                figures = measure(nodes, Path(workdir), args.models)
        results.append(figures)
        print(
            f"{nodes} nodes: first round {figures.first.seconds:.1f}s "
            f"({figures.first.per_node:.2f} req/node), re-profile {figures.reprofile.seconds:.1f}s "
            f"({figures.reprofile.per_node:.2f} req/node), peak RSS "
            f"{figures.peak_rss_bytes / 2**20:.0f} MiB, status "
            f"{figures.status_bytes / 1024:.0f} KiB",
            flush=True,
        )
    print(table(results))
    print(breakdowns(results))
    print(goals(results))
    if args.record:
        command = "python bench/operator_scale.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        record(args.record, results, command.strip(), args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
