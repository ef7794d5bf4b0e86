import dataclasses

import pytest

from roofline_profiler.core import model_config, serving_flags

GIB = 2**30


def _settings(tp: int = 1, batch: int = 64, context: int = 4096) -> dict[str, tuple[str, ...]]:
    return serving_flags.engine_settings(
        model_config.load_model("llama-3.1-8b"),
        max_batch=batch,
        context_tokens=context,
        tensor_parallel=tp,
        gpu_memory_utilization=0.9,
        weight_bytes=16 * GIB,
        activation_reserve_bytes=2 * GIB,
        device_memory_bytes=80 * GIB,
        kv_cache_bytes_per_token=131_072,
    )


def test_every_engine_gets_its_flags_as_name_value_strings() -> None:
    assert _settings() == {
        "vllm": (
            "--max-num-seqs=64",
            "--max-model-len=4096",
            "--gpu-memory-utilization=0.9",
            "--max-num-batched-tokens=8192",
        ),
        "sglang": (
            "--max-running-requests=64",
            "--mem-fraction-static=0.87",  # 0.9 − 2/80
            "--context-length=4096",
        ),
        "tgi": (
            "--max-batch-total-tokens=262144",
            "--max-batch-size=64",
            "--max-concurrent-requests=128",
            "--max-total-tokens=4096",
            "--max-input-tokens=4095",
        ),
        "tensorrtLlm": (
            "--max_batch_size=64",
            "--max_num_tokens=8192",
            "--max_seq_len=4096",
            "--kv_cache_free_gpu_memory_fraction=0.87",  # (72 − 18) / (80 − 18), rounded down
        ),
    }


def test_tensor_parallel_adds_each_engines_degree_flag() -> None:
    settings = _settings(tp=4)
    assert settings["vllm"][-1] == "--tensor-parallel-size=4"
    assert settings["sglang"][-1] == "--tp-size=4"
    assert settings["tgi"][-1] == "--num-shard=4"
    assert settings["tensorrtLlm"][-1] == "--tp_size=4"
    assert not any("tensor-parallel" in flag for flag in _settings()["vllm"])


def test_engine_names_are_the_result_keys() -> None:
    assert tuple(_settings()) == serving_flags.ENGINES


@pytest.mark.parametrize("bad", [{"batch": 0}, {"context": 0}, {"tp": 0}])
def test_non_positive_bounds_are_rejected(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        _settings(**bad)


def test_memory_fractions_stay_within_zero_and_one() -> None:
    settings = serving_flags.engine_settings(
        model_config.load_model("llama-3.1-8b"),
        max_batch=1,
        context_tokens=128,
        tensor_parallel=1,
        gpu_memory_utilization=0.9,
        weight_bytes=100 * GIB,
        activation_reserve_bytes=2 * GIB,
        device_memory_bytes=80 * GIB,
        kv_cache_bytes_per_token=131_072,
    )
    assert "--kv_cache_free_gpu_memory_fraction=0.01" in settings["tensorrtLlm"]
    assert "--mem-fraction-static=0.87" in settings["sglang"]


def test_a_quantized_model_adds_each_engines_format_and_fp8_cache_flags() -> None:
    arch = dataclasses.replace(
        model_config.load_model("llama-3.1-8b"), weight_format="int8-w8a8", kv_cache_dtype="fp8"
    )
    flags = serving_flags.format_flags(arch)
    assert flags == {
        "vllm": ("--quantization=compressed-tensors", "--kv-cache-dtype=fp8"),
        "sglang": ("--quantization=w8a8_int8", "--kv-cache-dtype=fp8_e4m3"),
        "tgi": ("--quantize=compressed-tensors", "--kv-cache-dtype=fp8"),
    }
    settings = serving_flags.engine_settings(
        arch, max_batch=8, context_tokens=4096, tensor_parallel=1, gpu_memory_utilization=0.9,
        weight_bytes=8 * GIB, activation_reserve_bytes=GIB, device_memory_bytes=80 * GIB,
        kv_cache_bytes_per_token=65_536,
    )  # fmt: skip
    assert settings["vllm"][-2:] == flags["vllm"]
    assert not any("quant" in flag or "kv-cache" in flag for flag in settings["tensorrtLlm"])


def test_a_model_in_its_dtype_adds_no_format_flags() -> None:
    assert not any(serving_flags.format_flags(model_config.load_model("qwen3-8b")).values())
