"""Transformer architectures as a decode step sees them: shapes, parameter and byte counts.

The architecture itself (:class:`ModelArch`, presets, ``config.json`` reading) lives in
:mod:`roofline_profiler.core.model_config`; import those names from there.

One decode step, per GPU of a tensor-parallel group of ``tp``, is the GEMMs of
:func:`decode_gemms` (M = batch rows; each reads its K×N weight once per step) plus attention over
the KV cache. Tensor parallelism shards as vLLM's ``ColumnParallelLinear`` / ``RowParallelLinear``
do: the fused qkv, gate_up, experts' gate_up and lm_head split N; o, down and experts' down split K.
When ``num_key_value_heads < tp`` every GPU keeps one replicated KV head (vLLM's
``QKVParallelLinear``). The embedding and lm_head are split by rows as ``VocabParallelEmbedding``
does: the vocabulary is padded to a multiple of 64 first, then divided by ``tp``. Norms and the MoE
router are replicated.

Mixture of experts: under uniform top-k routing, a batch of B tokens reads
``E·(1 − (1 − k/E)^B)`` distinct experts per layer (:func:`expected_active_experts`), each seeing
``B·k / active`` tokens on average. Where some layers stay dense (Qwen-MoE's
``decoder_sparse_step``, ``mlp_only_layers``), a GEMM's ``count`` is the average number of such
GEMMs per layer (dense gate_up 0.5 when every second layer is dense), so ``count × num_layers`` is
exact.

A quantized model's decoder-layer GEMMs count their format's bytes, scales and zero points
included (``weight_formats``); its embeddings, head and norms stay at the dtype's (AWQ, GPTQ and
compressed-tensors checkpoints keep ``lm_head`` unquantized, and vLLM never quantizes an
embedding). An FP8 KV cache counts one byte per element.

A sliding window (Mistral's ``sliding_window``) caps the tokens attention reads, never the KV memory
an engine reserves (:func:`attended_tokens`).

Checked against published counts in ``tests/profiler/core/test_models.py``: Llama-3.1-8B has
8,030,261,248 parameters (layer 218,112,000; embeddings and lm_head 525,336,576 each) and 131,072
KV bytes per token in bf16.

Beyond the shapes, this module holds :func:`attended_tokens`, :func:`heads_per_gpu`,
:func:`active_parameter_count`, the one model check (:func:`checked_model`) and the one check of
the format and KV-cache dtype a model is served in (:func:`served_in`).

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from roofline_profiler.core.model_config import PRESETS, ModelArch, ModelError, model_from_config
from roofline_profiler.core.weight_formats import (
    KV_CACHE_DTYPES,
    kv_cache_element_bytes,
    parse_weight_format,
)

#: vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``: embedding rows are padded to a multiple of this.
VOCAB_PADDING = 64


@dataclass(frozen=True)
class Gemm:
    name: str
    k: int
    n: int
    tokens: int
    count: float
    per_layer: bool


def check_tensor_parallel(arch: ModelArch, tensor_parallel: int) -> None:
    """Raise :class:`ModelError` for a degree the engines cannot shard this model by."""
    tp = tensor_parallel
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ModelError(f"tensor parallel degree must be a positive integer, got {tp!r}")
    if arch.num_heads % tp:
        _refuse(arch, tp, "does not divide num_attention_heads", arch.num_heads)
    if arch.num_kv_heads % tp and tp % arch.num_kv_heads:
        relation = "neither divides nor is a multiple of num_key_value_heads"
        _refuse(arch, tp, relation, arch.num_kv_heads)
    widths = {
        "intermediate_size": arch.intermediate_size if arch.moe_layers < arch.num_layers else 0,
        "moe_intermediate_size": arch.moe_intermediate_size,
        "shared_expert_intermediate_size": arch.shared_expert_intermediate_size,
    }
    for field, width in widths.items():
        if width % tp:
            _refuse(arch, tp, f"does not divide {field}", width)


def _refuse(arch: ModelArch, tp: int, relation: str, width: int) -> NoReturn:
    """A degree the config's ``width`` does not allow; redacted, the width is not shown."""
    message = f"{arch.name}: tensor parallel {tp} {relation}"
    raise ModelError(f"{message} ({width})", redacted=message)


class UnknownPreset(ModelError):
    """A preset name that :data:`PRESETS` does not hold."""

    def __init__(self, preset: str) -> None:
        super().__init__(f"unknown preset {preset!r} (presets: {', '.join(sorted(PRESETS))})")
        self.preset = preset


def checked_model(
    name: str,
    preset: str | None,
    config: Mapping[str, Any] | None,
    tensor_parallel: int,
    *,
    source: str,
) -> ModelArch:
    """The model named ``name`` that ``preset`` or, without one, ``config`` describes, checked
    for sharding by ``tensor_parallel``. The operator checks every model with it before a pod
    starts and the pod checks its ``--models-file`` with it again, so both refuse the same models.

    Raises :class:`UnknownPreset` for a preset not in :data:`PRESETS` and :class:`ModelError`,
    its message prefixed by ``source``, for a config that cannot be read; either way each caller
    words the failure for its own field.
    """
    if preset is not None:
        if preset not in PRESETS:
            raise UnknownPreset(preset)
        config = PRESETS[preset]
    if config is None:
        raise ModelError(f"{source}: a model needs a preset or a config")
    arch = model_from_config(config, name, source=source)
    check_tensor_parallel(arch, tensor_parallel)
    return arch


@dataclass(frozen=True)
class ServingFields:
    """How each door names what :func:`served_in` checks, for its messages: the model's source
    (``--model llama/config.json``, ``spec.models[0].config``) and the two fields
    (``--weight-format``, ``spec.models[0].weightFormat``)."""

    model: str
    weight_format: str
    kv_cache_dtype: str


def served_in(
    arch: ModelArch,
    weight_format: str | None,
    kv_cache_dtype: str | None,
    fields: ServingFields,
) -> ModelArch:
    """``arch`` served with its decoder weights in ``weight_format`` and its KV cache in
    ``kv_cache_dtype`` (``None``: as the config says). A format is for a config that declares
    none or the same one (the engine serves a checkpoint in its own format) and never for a
    mixture of experts (the plan does not time quantized experts). The command line's
    ``--weight-format`` and ``--kv-cache-dtype``, ``--models-json`` and the operator's
    ``spec.models`` all apply them here, so they refuse the same models.

    Raises :class:`ModelError`, one line naming ``fields``; it shows no config value but the
    name of the format the config declares, one of a fixed vocabulary."""
    if weight_format is not None:
        try:
            name = parse_weight_format(weight_format).name
        except ValueError as exc:
            raise ModelError(f"{fields.weight_format}: {exc}") from None
        if arch.weight_format and arch.weight_format != name:
            raise ModelError(
                f"{fields.weight_format} {name}: {fields.model} declares {arch.weight_format} "
                "weights (the engine serves a checkpoint in its own format)"
            )
        if arch.is_moe:
            raise ModelError(
                f"{fields.weight_format}: {fields.model} is a mixture of experts, whose "
                "quantized experts the plan does not time"
            )
        arch = replace(arch, weight_format=name)
    if kv_cache_dtype is not None:
        if kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ModelError(
                f"{fields.kv_cache_dtype}: {kv_cache_dtype!r} is not one of "
                f"{', '.join(KV_CACHE_DTYPES)}"
            )
        arch = replace(arch, kv_cache_dtype=kv_cache_dtype)
    return arch


def expected_active_experts(num_experts: int, experts_per_token: int, batch: int) -> float:
    """Distinct experts a layer reads for ``batch`` tokens under uniform top-k routing."""
    if num_experts < 1 or not 0 < experts_per_token <= num_experts or batch < 0:
        raise ValueError(f"no expert count for E={num_experts}, k={experts_per_token}, B={batch}")
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** batch)


def decode_gemms(arch: ModelArch, batch: int, tensor_parallel: int = 1) -> tuple[Gemm, ...]:
    """The GEMMs of one decode step at ``batch`` sequences, per GPU of the TP group."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    active = (
        expected_active_experts(arch.num_experts, arch.experts_per_token, batch)
        if arch.is_moe
        else 0.0
    )
    return _gemms(arch, batch, tensor_parallel, active)


def heads_per_gpu(arch: ModelArch, tensor_parallel: int = 1) -> tuple[int, int]:
    """Query heads and KV heads one GPU of the TP group attends with."""
    return arch.num_heads // tensor_parallel, _kv_heads(arch, tensor_parallel)


def attended_tokens(arch: ModelArch, context_tokens: int) -> int:
    """Tokens of KV cache one sequence's attention reads at this context."""
    if arch.sliding_window is None:
        return context_tokens
    return min(context_tokens, arch.sliding_window)


def parameter_count(arch: ModelArch) -> int:
    """Parameters as published (no vocabulary padding, tied embeddings once)."""
    return _parameters(arch, float(arch.num_experts))


def active_parameter_count(arch: ModelArch) -> int:
    """Parameters one token touches: the router's top-k experts instead of all of them."""
    return _parameters(arch, float(arch.experts_per_token))


def weight_bytes(arch: ModelArch, element_bytes: int, tensor_parallel: int = 1) -> int:
    """Bytes of weights one GPU of the TP group holds (replicated norms counted on each); the
    decoder layers' GEMMs in the model's weight format (:attr:`ModelArch.weight_format`), the
    rest at ``element_bytes``."""
    tp = tensor_parallel
    matrices = sum(
        _gemm_bytes(arch, g, element_bytes) * g.count
        for g in _gemms(arch, 1, tp, float(arch.num_experts))
        if g.per_layer
    )
    embeddings = (1 if arch.tie_word_embeddings else 2) * _vocab_rows(arch, tp) * arch.hidden_size
    rest = embeddings + _vector_parameters(arch, tp)
    return round(matrices * arch.num_layers) + rest * element_bytes


def _gemm_bytes(arch: ModelArch, g: Gemm, element_bytes: int) -> float:
    """Bytes of one of a layer's GEMM weights: in the weight format where the model has one
    (its scales and zero points included), else ``k·n·element_bytes``."""
    fmt = arch.quantized
    if fmt is None:
        return float(g.k * g.n * element_bytes)
    return float(fmt.matrix_bytes(g.k, g.n))


def kv_cache_bytes_per_token(arch: ModelArch, element_bytes: int, tensor_parallel: int = 1) -> int:
    """K and V of every layer for one token, per GPU: ``2·layers·max(1, n_kv/tp)·hd·bytes``,
    the bytes those of :attr:`ModelArch.kv_cache_dtype` (``auto``: ``element_bytes``)."""
    cached = kv_cache_element_bytes(arch.kv_cache_dtype, element_bytes)
    return 2 * arch.num_layers * _kv_heads(arch, tensor_parallel) * arch.head_dim * cached


def decode_step_flops(
    arch: ModelArch, batch: int, context_tokens: int, tensor_parallel: int = 1
) -> float:
    """FLOPs of one decode step per GPU: the GEMMs plus attention's QKᵀ and PV.

    Expert GEMMs count the B·k token-expert pairs exactly, not the rounded rows per expert.
    """
    total = 0.0
    for g in decode_gemms(arch, batch, tensor_parallel):
        rows = g.tokens * g.count
        if g.name.startswith("expert_"):
            rows = batch * arch.experts_per_token * arch.moe_layers / arch.num_layers
        total += 2.0 * rows * g.k * g.n * (arch.num_layers if g.per_layer else 1)
    heads = arch.num_heads // tensor_parallel
    attention = 4.0 * batch * heads * arch.head_dim * attended_tokens(arch, context_tokens)
    return total + attention * arch.num_layers


def decode_step_bytes(
    arch: ModelArch, batch: int, context_tokens: int, element_bytes: int, tensor_parallel: int = 1
) -> float:
    """Minimum bytes one decode step reads per GPU: the weights it uses (for MoE only the
    experts read), the batch's embedding rows, and every sequence's KV cache."""
    matrices = sum(
        (_gemm_bytes(arch, g, element_bytes) if g.per_layer else g.k * g.n * element_bytes)
        * g.count
        * (arch.num_layers if g.per_layer else 1)
        for g in decode_gemms(arch, batch, tensor_parallel)
    )
    embedding_rows = min(batch, _vocab_rows(arch, tensor_parallel)) * arch.hidden_size
    weights = (
        matrices + (embedding_rows + _vector_parameters(arch, tensor_parallel)) * element_bytes
    )
    kv = (
        batch
        * attended_tokens(arch, context_tokens)
        * kv_cache_bytes_per_token(arch, element_bytes, tensor_parallel)
    )
    return weights + kv


def _gemms(arch: ModelArch, batch: int, tp: int, active_experts: float) -> tuple[Gemm, ...]:
    h, layers = arch.hidden_size, arch.num_layers
    q_width = arch.num_heads // tp * arch.head_dim
    qkv_width = q_width + 2 * _kv_heads(arch, tp) * arch.head_dim
    gemms = [Gemm("qkv", h, qkv_width, batch, 1.0, True), Gemm("o", q_width, h, batch, 1.0, True)]
    dense_share = (layers - arch.moe_layers) / layers
    if dense_share > 0:
        inter = -(-arch.intermediate_size // tp)
        gemms += [
            Gemm("gate_up", h, 2 * inter, batch, dense_share, True),
            Gemm("down", inter, h, batch, dense_share, True),
        ]
    if arch.is_moe:
        moe_share = arch.moe_layers / layers
        expert = -(-arch.moe_intermediate_size // tp)
        per_expert = max(1, round(batch * arch.experts_per_token / active_experts))
        experts = active_experts * moe_share
        gemms += [
            Gemm("router", h, arch.num_experts, batch, moe_share, True),
            Gemm("expert_gate_up", h, 2 * expert, per_expert, experts, True),
            Gemm("expert_down", expert, h, per_expert, experts, True),
        ]
        if arch.shared_expert_intermediate_size:
            shared = -(-arch.shared_expert_intermediate_size // tp)
            gemms += [
                Gemm("shared_gate_up", h, 2 * shared, batch, moe_share, True),
                Gemm("shared_down", shared, h, batch, moe_share, True),
            ]
    gemms.append(Gemm("lm_head", h, _vocab_rows(arch, tp), batch, 1.0, False))
    return tuple(gemms)


def _parameters(arch: ModelArch, experts: float) -> int:
    matrices = sum(g.k * g.n * g.count for g in _gemms(arch, 1, 1, experts) if g.per_layer)
    embeddings = (1 if arch.tie_word_embeddings else 2) * arch.vocab_size * arch.hidden_size
    return round(matrices * arch.num_layers) + embeddings + _vector_parameters(arch, 1)


def _vector_parameters(arch: ModelArch, tp: int) -> int:
    """Norms, biases and Qwen2-MoE's shared-expert gate: everything that is not a GEMM weight."""
    h, hd = arch.hidden_size, arch.head_dim
    per_layer = 2 * h + (2 * hd if arch.qk_norm else 0)
    if arch.attention_bias:
        per_layer += (arch.num_heads // tp + 2 * _kv_heads(arch, tp)) * hd
        if not arch.model_type.startswith("qwen2"):
            per_layer += h  # o_proj bias (Llama, Qwen3); replicated by RowParallelLinear
    total = per_layer * arch.num_layers + h
    if arch.mlp_bias:
        total += (2 * -(-arch.intermediate_size // tp) + h) * arch.num_layers
    if arch.shared_expert_intermediate_size:
        total += h * arch.moe_layers
    return total


def _kv_heads(arch: ModelArch, tp: int) -> int:
    return max(1, arch.num_kv_heads // tp)


def _vocab_rows(arch: ModelArch, tp: int) -> int:
    padded = math.ceil(arch.vocab_size / VOCAB_PADDING) * VOCAB_PADDING
    return -(-padded // tp)
