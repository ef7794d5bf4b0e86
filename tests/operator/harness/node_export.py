"""The real node as ``roofline export`` and the consumers see it.

The source is a RooflineProfile status built by the operator's own status builder from the fleet
of ``tests/cli/export_sources.py``, with its first H100 node replaced by the real node (so that
the H100 class is exactly that node) and the L40S node kept (a class with no node here: what is
queued for it must be sent to nodes of that class, and none exists). The node carries the labels
the operator writes for that record (``decide/labels.py``) and its class label, as a profiled
node does.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from tests.cli.export_sources import MODEL, PROFILE, fleet_records
from tests.operator.unit.operator_builders import status_of

from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import by_model, safest
from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.names import LABEL_CLASS
from roofline_operator.decide.labels import label_safe, node_labels_for
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.records import NodeRecord

from .commands import product_environment, roofline_argv
from .nodeconfig import NODE_NAME

#: The fleet's node that the real node stands for, and the one dropped so that its class is the
#: real node alone.
STANDS_FOR, DROPPED = "gpu-a", "gpu-b"


def node_records() -> dict[str, NodeRecord]:
    records = fleet_records()
    del records[DROPPED]
    ours = replace(records.pop(STANDS_FOR), name=NODE_NAME)
    return {NODE_NAME: ours, **records}


def status_document() -> dict[str, Any]:
    """The RooflineProfile as ``kubectl get rp -o json`` returns it, the real node profiled."""
    models = ModelsView((ModelSpec(MODEL, preset="llama-3.1-8b", context_tokens=8192),))
    document = {
        "apiVersion": "roofline.dev/v1alpha1",
        "kind": "RooflineProfile",
        "metadata": {"name": PROFILE},
        "spec": {
            "models": [{"name": MODEL, "preset": "llama-3.1-8b", "contextTokens": 8192}],
            "slo": {"interTokenLatency": "50ms"},
        },
        "status": status_of(node_records(), models=models),
    }
    loaded: dict[str, Any] = json.loads(json.dumps(document))
    return loaded


def write_status(folder: Path) -> Path:
    path = folder / "profile.json"
    path.write_text(json.dumps(status_document()), encoding="utf-8")
    return path


def slo_batch() -> int:
    """The batch at which one replica's engine reaches the ITL SLO on the class a ScaledObject
    holds every replica to (the smallest of the classes that serve the model)."""
    source = source_of_profile(status_document(), "the real node's profile")
    return safest(by_model(source.plans)[MODEL]).max_batch


def operator_labels() -> dict[str, str]:
    """The labels the operator writes on the real node for its record, with its class."""
    result = node_records()[NODE_NAME].result
    assert result is not None
    gpu = result.worst_gpu()
    return {**node_labels_for(gpu, PROFILE), LABEL_CLASS: label_safe(gpu.product)}


def export(*argv: str) -> list[dict[str, Any]]:
    """The objects the real ``roofline export`` writes (its own process), parsed."""
    done = subprocess.run(
        [*roofline_argv(), "export", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=product_environment(),
    )
    assert done.returncode == 0, f"roofline export {' '.join(argv)} failed:\n{done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]
