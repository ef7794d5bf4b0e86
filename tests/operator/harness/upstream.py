"""The upstream schemas ``roofline export`` writes for, at their pinned versions, fetched once per
machine from their Go module zips by ``scripts/upstream-crds.sh`` (cached outside the repository,
as ``scripts/control-plane.sh`` caches the control plane)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.operator.harness.controlplane import ControlPlaneUnavailable

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "upstream-crds.sh"
#: The CRDs installed for the export's objects, by the kinds they define.
CRD_FILES = {
    "ScaledObject": "keda.sh_scaledobjects.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "Cohort": "kueue.x-k8s.io_cohorts.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "InferencePool": "inference.networking.k8s.io_inferencepools.yaml",
}
#: The endpoint picker's configuration types (Gateway API Inference Extension v1.5.0).
EPP_TYPES = ("epp-endpointpickerconfig_types.go", "epp-utilization-config.go")
#: The inferencepool chart of the same release: its values and the templates that read them
#: (the InferencePool, the picker's ConfigMap and Deployment).
CHART_VALUES = "chart-inferencepool-values.yaml"
CHART_POOL_TEMPLATE = "chart-inferencepool-pool.yaml"
CHART_TEMPLATES = (CHART_POOL_TEMPLATE, "chart-epplib-config.yaml", "chart-epplib-deployment.yaml")


def upstream_schemas() -> Path:
    """The directory of the pinned upstream schemas, fetching them on first use."""
    cached = subprocess.run(
        [str(SCRIPT), "--dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if shutil.which("go") is None and not Path(cached, "VERSIONS").exists():
        raise ControlPlaneUnavailable(
            "Go is not installed, so the upstream CRDs cannot be fetched (scripts/upstream-crds.sh)"
        )
    result = subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, check=False, timeout=1800
    )
    if result.returncode != 0:
        raise RuntimeError(f"scripts/upstream-crds.sh failed:\n{result.stdout}{result.stderr}")
    return Path(result.stdout.strip().splitlines()[-1])
