"""Serving-engine flags that carry a plan's batch, context and memory bounds into the engine.

Every flag name is checked against the engines' sources; ``docs/serving-flags.md`` cites the file of
each. The batch is the plan's recommended high end (``min`` of the memory and latency bounds), the
context the plan's context. The engines split memory differently, so each gets the same KV budget
in its own terms — ``device memory × utilization − weights − activation reserve``:

* **vLLM** reserves ``--gpu-memory-utilization`` of the whole device for weights, activations and
  KV: passed through, together with ``--max-num-batched-tokens`` so its profiling forward (and the
  activation reserve) is the one the plan assumed.
* **SGLang**'s ``--mem-fraction-static`` covers weights and KV pool only; activations live in the
  rest: ``utilization − reserve / device memory``, rounded down to 0.01.
* **TGI** sizes its KV cache by tokens: ``--max-batch-total-tokens = batch × context`` (the whole
  batch at full context fits), ``--max-batch-size`` caps the sequences, and
  ``--max-concurrent-requests`` is twice the batch — a full batch plus as many queued, so a finished
  sequence is replaced at once while the queue (and its wait) stays bounded.
* **TensorRT-LLM** gives ``--kv_cache_free_gpu_memory_fraction`` of the memory still *free* after
  weights and activations to KV: ``KV budget / (device − weights − reserve)``, rounded down to
  0.01; ``--max_num_tokens`` matches vLLM's batched tokens.

A quantized model adds its format's flag (vLLM and SGLang ``--quantization``, TGI ``--quantize``;
:data:`QUANTIZATION_NAMES`) and an FP8 KV cache ``--kv-cache-dtype`` in each engine's name;
TensorRT-LLM takes both from its built checkpoint and LLM API options, so it gets neither. vLLM
given ``--quantization=awq`` (or ``gptq``) runs that kernel even where its Marlin kernel would
run the checkpoint faster (a GPU): there, drop the flag and vLLM picks Marlin itself.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math

from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.weight_formats import parse_weight_format

#: Names of the engines, as keys of the settings mapping (camelCase, as in the result).
ENGINES = ("vllm", "sglang", "tgi", "tensorrtLlm")
#: Tokens one scheduler step may batch (vLLM ``--max-num-batched-tokens``, TRT-LLM
#: ``--max_num_tokens``); the activation reserve is sized for this many.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
#: TGI's queue: concurrent requests allowed per sequence of the batch.
TGI_CONCURRENCY_PER_SEQUENCE = 2
#: Each engine's flag for the tensor-parallel degree, added when the plan shards the model.
TENSOR_PARALLEL_FLAGS = {
    "vllm": "--tensor-parallel-size",
    "sglang": "--tp-size",
    "tgi": "--num-shard",
    "tensorrtLlm": "--tp_size",
}


def engine_settings(
    arch: ModelArch,
    *,
    max_batch: int,
    context_tokens: int,
    tensor_parallel: int,
    gpu_memory_utilization: float,
    weight_bytes: int,
    activation_reserve_bytes: int,
    device_memory_bytes: int,
    kv_cache_bytes_per_token: int,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
) -> dict[str, tuple[str, ...]]:
    """Flags for vLLM, SGLang, TGI and TensorRT-LLM, as ``"--name=value"`` strings.

    ``weight_bytes``, ``activation_reserve_bytes`` and ``kv_cache_bytes_per_token`` are per GPU
    of the tensor-parallel group, as the plan computes them for ``arch``.
    """
    if max_batch < 1 or context_tokens < 1 or tensor_parallel < 1:
        raise ValueError("batch, context and tensor parallel degree must be positive")
    batch, context, tp = max_batch, context_tokens, tensor_parallel
    static_fraction, free_fraction = _kv_fractions(
        gpu_memory_utilization, weight_bytes, activation_reserve_bytes, device_memory_bytes
    )
    settings = {
        "vllm": (
            f"--max-num-seqs={batch}",
            f"--max-model-len={context}",
            f"--gpu-memory-utilization={gpu_memory_utilization:g}",
            f"--max-num-batched-tokens={max_num_batched_tokens}",
        ),
        "sglang": (
            f"--max-running-requests={batch}",
            f"--mem-fraction-static={_fraction(static_fraction)}",
            f"--context-length={context}",
        ),
        "tgi": (
            f"--max-batch-total-tokens={batch * context}",
            f"--max-batch-size={batch}",
            f"--max-concurrent-requests={TGI_CONCURRENCY_PER_SEQUENCE * batch}",
            f"--max-total-tokens={context}",
            f"--max-input-tokens={max(1, context - 1)}",
        ),
        "tensorrtLlm": (
            f"--max_batch_size={batch}",
            f"--max_num_tokens={max_num_batched_tokens}",
            f"--max_seq_len={context}",
            f"--kv_cache_free_gpu_memory_fraction={_fraction(free_fraction)}",
        ),
    }
    if tp > 1:
        settings = {
            name: (*flags, f"{TENSOR_PARALLEL_FLAGS[name]}={tp}")
            for name, flags in settings.items()
        }
    formats = format_flags(arch)
    return {name: (*flags, *formats.get(name, ())) for name, flags in settings.items()}


#: Each engine's name of a weight format family (vLLM ``--quantization``, SGLang
#: ``--quantization``, TGI ``--quantize``); TensorRT-LLM builds its checkpoint in the format.
QUANTIZATION_NAMES: dict[str, dict[str, str]] = {
    "vllm": {
        "awq-int4": "awq", "gptq-int4": "gptq", "gptq-int8": "gptq",
        "int8-w8a8": "compressed-tensors", "fp8-w8a8": "fp8",
    },
    "sglang": {
        "awq-int4": "awq", "gptq-int4": "gptq", "gptq-int8": "gptq",
        "int8-w8a8": "w8a8_int8", "fp8-w8a8": "fp8",
    },
    "tgi": {
        "awq-int4": "awq", "gptq-int4": "gptq", "gptq-int8": "gptq",
        "int8-w8a8": "compressed-tensors", "fp8-w8a8": "fp8",
    },
}  # fmt: skip
#: Each engine's ``--kv-cache-dtype`` for vLLM's FP8 names (SGLang names the E4M3 default
#: ``fp8_e4m3``, TGI ``fp8``); TensorRT-LLM sets it in its LLM API options, not a flag.
KV_CACHE_DTYPE_NAMES: dict[str, dict[str, str]] = {
    "vllm": {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"},
    "sglang": {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"},
    "tgi": {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2"},
}
QUANTIZATION_FLAGS = {"vllm": "--quantization", "sglang": "--quantization", "tgi": "--quantize"}


def format_flags(arch: ModelArch) -> dict[str, tuple[str, ...]]:
    """The flags that serve ``arch``'s weight format and KV-cache dtype, per engine."""
    return served_format_flags(arch.weight_format, arch.kv_cache_dtype)


def served_format_flags(weight_format: str, kv_cache_dtype: str) -> dict[str, tuple[str, ...]]:
    """The flags that serve weights in ``weight_format`` (a ``weight_formats`` name; empty: the
    dtype's) and a KV cache in ``kv_cache_dtype``, per engine (TensorRT-LLM: none)."""
    family = parse_weight_format(weight_format).family if weight_format else None
    flags: dict[str, tuple[str, ...]] = {}
    for name, flag in QUANTIZATION_FLAGS.items():
        added = [f"{flag}={QUANTIZATION_NAMES[name][family]}"] if family is not None else []
        if kv_cache_dtype != "auto":
            added.append(f"--kv-cache-dtype={KV_CACHE_DTYPE_NAMES[name][kv_cache_dtype]}")
        flags[name] = tuple(added)
    return flags


def _kv_fractions(
    gpu_memory_utilization: float,
    weight_bytes: int,
    activation_reserve_bytes: int,
    device_memory_bytes: int,
) -> tuple[float, float]:
    """The one KV budget, ``device memory × utilization − weights − activation reserve``, as
    SGLang's static fraction (weights and KV pool, of the whole device) and as TensorRT-LLM's
    fraction of the memory still free after weights and activations."""
    kv_budget = device_memory_bytes * gpu_memory_utilization - weight_bytes
    kv_budget -= activation_reserve_bytes
    free_after_load = device_memory_bytes - weight_bytes - activation_reserve_bytes
    static_fraction = gpu_memory_utilization - activation_reserve_bytes / device_memory_bytes
    free_fraction = kv_budget / free_after_load if free_after_load > 0 else 0.0
    return static_fraction, free_fraction


def _fraction(value: float) -> str:
    """A memory fraction rounded down to 0.01, kept within (0, 1)."""
    return f"{min(0.99, max(0.01, math.floor(value * 100 + 1e-9) / 100)):.2f}"
