"""The CRDs of other projects that shipped files use: the Prometheus Operator's (the monitoring
manifests, the chart's ServiceMonitor and PrometheusRule, the serving PodMonitor example) and
Kueue's (the Kueue example).

They come, pinned, from the projects' own Go module zips (``go mod download``: the module proxy
checks them against the checksum database), as the NodeFeature CRD does in
``scripts/control-plane.sh``, so the real-server suite can apply every shipped file as a user
would, with kubectl, instead of skipping the objects of kinds it lacks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class ForeignCrdsUnavailable(Exception):
    """The CRDs cannot be fetched here (no Go toolchain, no module proxy); the reason says why."""


@dataclass(frozen=True)
class ModuleCrds:
    module: str
    version: str
    #: CRD files inside the module, relative to its root.
    files: tuple[str, ...]


FOREIGN_CRDS = (
    ModuleCrds(
        "github.com/prometheus-operator/prometheus-operator",
        "v0.85.0",
        tuple(
            f"example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml"
            for plural in ("podmonitors", "servicemonitors", "prometheusrules")
        ),
    ),
    ModuleCrds(
        "sigs.k8s.io/kueue",
        "v0.17.0",
        tuple(
            f"config/components/crd/bases/kueue.x-k8s.io_{plural}.yaml"
            for plural in ("resourceflavors", "clusterqueues", "localqueues")
        ),
    ),
)


def _module_dir(module: str, version: str) -> Path:
    if shutil.which("go") is None:
        raise ForeignCrdsUnavailable("Go is not installed, so no module's CRDs can be fetched")
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
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
        raise ForeignCrdsUnavailable(f"go mod download {module}@{version}: {why}")
    return Path(answer["Dir"])


def foreign_crd_files() -> list[Path]:
    """The pinned CRD files, from the Go module cache (downloaded on first use)."""
    files = []
    for crds in FOREIGN_CRDS:
        root = _module_dir(crds.module, crds.version)
        files += [root / relative for relative in crds.files]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ForeignCrdsUnavailable(f"missing from the module zips: {', '.join(missing)}")
    return files
