"""How many sequences of one context fit on a device: the KV budget, as vLLM sizes its KV cache.

Definitions (tested exactly in ``tests/profiler/core/test_kv_budget.py``, explained in
``docs/serving-flags.md``):

* **Max batch by memory**: ``device memory × utilization − weights − activation reserve`` is split
  into blocks of :data:`KV_BLOCK_TOKENS` tokens; a sequence at the planned context holds
  ``ceil(context / block)`` of them.
* **Activation reserve** (:func:`activation_reserve_bytes`): what the engines' profiling forward at
  ``max_num_batched_tokens`` tokens leaves in use besides weights — the largest live activations
  of one layer (residual and normalised hidden state, qkv, and the MLP's gate_up output plus its
  activated half; for MoE the fused kernel's per-token-expert caches), fp32 logits for
  :data:`DEFAULT_MAX_NUM_SEQS` sampled rows, and :data:`RUNTIME_OVERHEAD_BYTES` for CUDA graphs,
  cuBLAS/NCCL workspaces and allocator slack that vLLM's profiling counts as non-torch memory.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofline_profiler.core import models, serving_flags
from roofline_profiler.core.model_config import ModelArch

#: vLLM's default ``--block-size``: KV memory is handed out in blocks of this many tokens.
KV_BLOCK_TOKENS = 16
#: Tokens of vLLM's profiling forward (its ``--max-num-batched-tokens`` for online serving).
DEFAULT_MAX_NUM_BATCHED_TOKENS = serving_flags.DEFAULT_MAX_NUM_BATCHED_TOKENS
#: vLLM's default ``--max-num-seqs``: rows of logits its profiling run samples.
DEFAULT_MAX_NUM_SEQS = 256
#: CUDA graphs, library workspaces and allocator slack outside the activations proper.
RUNTIME_OVERHEAD_BYTES = 1 << 30


def max_batch_by_memory(
    weight_bytes: int,
    kv_bytes_per_token: int,
    context_tokens: int,
    device_memory_bytes: int,
    gpu_memory_utilization: float,
    activation_reserve_bytes: int,
    block_tokens: int = KV_BLOCK_TOKENS,
) -> int:
    """Sequences of ``context_tokens`` whose KV blocks fit beside weights and activations."""
    if context_tokens < 1 or kv_bytes_per_token < 1:
        raise ValueError("context and KV bytes per token must be positive")
    budget = device_memory_bytes * gpu_memory_utilization - weight_bytes - activation_reserve_bytes
    if budget <= 0:
        return 0
    blocks = int(budget // (kv_bytes_per_token * block_tokens))
    return blocks // math.ceil(context_tokens / block_tokens)


def activation_reserve_bytes(
    arch: ModelArch,
    element_bytes: int,
    tensor_parallel: int,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
) -> int:
    """Peak non-weight memory of the engines' profiling forward (see the module docstring)."""
    tp, h, tokens = tensor_parallel, arch.hidden_size, max_num_batched_tokens
    qkv_width = next(g.n for g in models.decode_gemms(arch, 1, tp) if g.name == "qkv")
    mlp = 3 * math.ceil(arch.intermediate_size / tp) if arch.moe_layers < arch.num_layers else 0
    if arch.is_moe:
        per_pair = 3 * math.ceil(arch.moe_intermediate_size / tp) + h
        mlp = max(mlp, arch.experts_per_token * per_pair)
    layer = tokens * (2 * h + qkv_width + mlp) * element_bytes
    vocab = next(g.n for g in models.decode_gemms(arch, 1, tp) if g.name == "lm_head")
    logits = DEFAULT_MAX_NUM_SEQS * vocab * 4
    return layer + logits + RUNTIME_OVERHEAD_BYTES


@dataclass(frozen=True)
class ModelMemory:
    """One model's share of one device's memory: what its weights, a token's KV cache and the
    engines' activations take of the usable part, and how many sequences fit beside them."""

    weights: int
    kv_per_token: int
    reserve: int
    device_bytes: int
    utilization: float
    max_batch: int


def model_memory(
    arch: ModelArch,
    element_bytes: int,
    context_tokens: int,
    tensor_parallel: int,
    device_memory_bytes: int,
    utilization: float,
) -> ModelMemory:
    """The memory ``arch`` takes on a device of ``device_memory_bytes``, ``utilization`` of it
    usable, at ``context_tokens`` per sequence (the weights and KV per device under tensor
    parallel)."""
    weights = models.weight_bytes(arch, element_bytes, tensor_parallel)
    kv_per_token = models.kv_cache_bytes_per_token(arch, element_bytes, tensor_parallel)
    reserve = activation_reserve_bytes(arch, element_bytes, tensor_parallel)
    by_memory = max_batch_by_memory(
        weights, kv_per_token, context_tokens, device_memory_bytes, utilization, reserve
    )
    return ModelMemory(weights, kv_per_token, reserve, device_memory_bytes, utilization, by_memory)
