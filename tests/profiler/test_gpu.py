"""Opt-in checks on a real GPU: ``pytest -m gpu``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roofline_profiler.result import validate_document

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
def test_every_visible_gpu_is_profiled_and_reported_separately(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "roofline_profiler.cli", "profile", "--quick", "--json", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(path.read_text())
    validate_document(document)
    assert [d["index"] for d in document["devices"]] == list(range(torch.cuda.device_count()))
    for device in document["devices"]:
        assert device["backend"] in ("cuda", "rocm")
        assert device["dtype"] in ("bfloat16", "float16")
        assert device["ridgePoint"] > 10  # every datacenter GPU's ridge is far above 10
