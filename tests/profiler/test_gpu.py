"""Opt-in checks on a real GPU: ``pytest -m gpu``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roofline_profiler.wire.result import validate_document

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
def test_every_visible_gpu_is_profiled_and_reported_separately(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "roofline_profiler.cli.commands",
            "profile",
            "--quick",
            "--json",
            str(path),
        ],
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
@pytest.mark.parametrize(
    "config",
    [
        {
            "model_type": "llama",
            "hidden_size": 2048,
            "num_hidden_layers": 4,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "intermediate_size": 8192,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
        },
        {
            "model_type": "qwen3_moe",
            "hidden_size": 1024,
            "num_hidden_layers": 4,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "head_dim": 64,
            "intermediate_size": 2048,
            "moe_intermediate_size": 384,
            "num_experts": 64,
            "num_experts_per_tok": 8,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
        },
    ],
    ids=["dense", "moe"],
)
def test_every_part_of_a_models_decode_step_is_timed_as_a_cuda_graph(
    config: dict[str, object],
) -> None:
    from roofline_profiler.core.decode_model import step_seconds
    from roofline_profiler.core.model_config import model_from_config
    from roofline_profiler.measure.devices import resolve_devices
    from roofline_profiler.measure.measure_settings import MeasureSettings
    from roofline_profiler.measure.model_measure import measure_model

    arch = model_from_config(config, "gpu-check")
    info = resolve_devices("cuda:0")[0]
    settings = MeasureSettings(arch, "bfloat16", 1, (1, 8, 64), (1024,), quick=True)
    m = measure_model(settings, info, lambda _: None)
    assert m.notes == ()  # no part (the head's sampling included) fell back to eager timing
    # The engines' paths on a GPU: cuBLAS through F.linear, torch's attention kernels, timed.
    assert (m.linear, m.attention_source) == ("torch-linear", "torch-sdpa")
    # A replayed graph is not bound by the host's launches: a dense layer at batch 1 reads its
    # weights in far less than the ~1 ms a Python-launched layer took on an H200.
    (body,) = m.layer_bodies.values()
    assert body[0].seconds < 1e-3
    assert step_seconds(m, 8, 1024) > 0
