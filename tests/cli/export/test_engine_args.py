"""Engine flags: from a result the plan's own, from a status those its bounds decide."""

from __future__ import annotations

import pytest
import yaml

from roofline_cli.export import engine_args
from roofline_cli.export.commented import plain, render
from roofline_cli.export.from_result import source_of_result
from roofline_cli.export.from_status import SourceError, source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import class_plan, status_profile
from tests.profiler.synthetic import planned_result

MEMORY_FLAGS = (
    "--gpu-memory-utilization",
    "--max-num-batched-tokens",
    "--mem-fraction-static",
    "--kv_cache_free_gpu_memory_fraction",
)


def test_the_flags_a_status_decides_are_the_plans_own_less_the_memory_split() -> None:
    """The same plan through both paths: the flags the bounds decide agree with the profiler's
    ``engineSettings``, which only add the memory fractions (and vLLM's batched tokens)."""
    (plan,) = source_of_result(planned_result(), "r").plans
    assert plan.engine_flags is not None
    from_bounds = engine_args.flags_from_bounds(plan)
    for engine, flags in plan.engine_flags.items():
        kept = tuple(f for f in flags if not f.startswith(MEMORY_FLAGS))
        assert from_bounds[engine] == kept, engine


def test_tensor_parallel_adds_each_engines_degree_flag() -> None:
    flags = engine_args.flags_from_bounds(class_plan(tensor_parallel=4))
    assert flags["vllm"][-1] == "--tensor-parallel-size=4"
    assert flags["tgi"][-1] == "--num-shard=4"


def test_a_quantized_model_in_a_status_gets_each_engines_format_and_cache_flags() -> None:
    flags = engine_args.flags_from_bounds(
        class_plan(weight_format="awq-int4-g128", kv_cache_dtype="fp8_e5m2")
    )
    assert flags["vllm"][-2:] == ("--quantization=awq", "--kv-cache-dtype=fp8_e5m2")
    assert flags["sglang"][-2:] == ("--quantization=awq", "--kv-cache-dtype=fp8_e5m2")
    assert flags["tgi"][-2:] == ("--quantize=awq", "--kv-cache-dtype=fp8_e5m2")
    assert not any("quant" in f or "kv-cache" in f for f in flags["tensorrtLlm"])


def test_a_status_names_the_format_and_cache_dtype_it_was_planned_in() -> None:
    profile = status_profile()
    for model in profile["status"]["models"]:
        model.update(weightFormat="gptq-int4", kvCacheDtype="fp8")
    (plan, *_) = source_of_profile(profile, "p").plans
    assert (plan.weight_format, plan.kv_cache_dtype) == ("gptq-int4-g128", "fp8")


@pytest.mark.parametrize(
    ("key", "value"),
    [("weightFormat", "int3"), ("weightFormat", 7), ("kvCacheDtype", "int8")],
)
def test_a_status_format_no_engine_serves_is_refused(key: str, value: object) -> None:
    profile = status_profile()
    profile["status"]["models"][0][key] = value
    with pytest.raises(SourceError, match=key):
        source_of_profile(profile, "p")


def test_a_configmap_per_model_and_class_with_one_line_per_engine() -> None:
    source = source_of_profile(status_profile(), "p")
    documents = engine_args.build(source, ExportOptions(namespace="serving"))
    assert len(documents) == 2
    first = plain(documents[0][1])
    assert first["metadata"]["namespace"] == "serving"
    assert set(first["data"]) == {"vllm", "sglang", "tgi", "tensorrt-llm"}
    assert first["data"]["vllm"] == "--max-num-seqs=104 --max-model-len=8192"


def test_the_patch_appends_to_the_chosen_container() -> None:
    source = source_of_profile(status_profile(), "p")
    documents = engine_args.build(source, ExportOptions(form="patch", engine="tensorrt-llm"))
    (ops,) = yaml.safe_load_all(render(documents))
    assert ops[0] == {
        "op": "add",
        "path": "/spec/template/spec/containers/0/args/-",
        "value": "--max_batch_size=24",
    }


def test_the_patch_of_two_models_is_refused() -> None:
    source = source_of_profile(status_profile(), "p")
    twice = source.plans + tuple(type(p)(**{**p.__dict__, "model": "other"}) for p in source.plans)
    with pytest.raises(engine_args.OneModelOnly, match="other"):
        engine_args.build(
            type(source)(**{**source.__dict__, "plans": twice}), ExportOptions(form="patch")
        )
