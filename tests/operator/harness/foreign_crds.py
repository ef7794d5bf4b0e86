"""The CRDs of other projects that shipped files use: the Prometheus Operator's (the monitoring
manifests, the chart's ServiceMonitor and PrometheusRule, the serving PodMonitor example) and
Kueue's (the Kueue example).

Kueue's come from ``scripts/upstream-crds.sh`` (``upstream.py``), the one pin of the upstream
schemas ``roofline export`` writes for; the Prometheus Operator's, pinned here, from its own Go
module zip (``go mod download``: the module proxy checks it against the checksum database), as
the NodeFeature CRD comes in ``scripts/control-plane.sh``. So the real-server suite can apply
every shipped file as a user would, with kubectl, instead of skipping the objects of kinds it
lacks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .controlplane import ControlPlaneUnavailable
from .upstream import CRD_FILES, upstream_schemas

PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
PROMETHEUS_OPERATOR_CRDS = tuple(
    f"example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml"
    for plural in ("podmonitors", "servicemonitors", "prometheusrules")
)
#: Kueue's kinds the shipped Kueue example uses.
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue")


class ForeignCrdsUnavailable(Exception):
    """The CRDs cannot be fetched here (no Go toolchain, no module proxy); the reason says why."""


def _module_dir(module_at_version: str) -> Path:
    if shutil.which("go") is None:
        raise ForeignCrdsUnavailable("Go is not installed, so no module's CRDs can be fetched")
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["go", "mod", "download", "-json", module_at_version],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
        )
    try:
        answer = json.loads(result.stdout)
    except json.JSONDecodeError:
        answer = {}
    if result.returncode != 0 or "Dir" not in answer:
        why = answer.get("Error") or result.stderr.strip() or "no module directory"
        raise ForeignCrdsUnavailable(f"go mod download {module_at_version}: {why}")
    return Path(answer["Dir"])


def foreign_crd_files() -> list[Path]:
    """The pinned CRD files (downloaded on first use)."""
    root = _module_dir(PROMETHEUS_OPERATOR)
    files = [root / relative for relative in PROMETHEUS_OPERATOR_CRDS]
    try:
        upstream = upstream_schemas()
    except ControlPlaneUnavailable as reason:
        raise ForeignCrdsUnavailable(str(reason)) from None
    files += [upstream / CRD_FILES[kind] for kind in KUEUE_KINDS]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ForeignCrdsUnavailable(f"missing from the module zips: {', '.join(missing)}")
    return files
