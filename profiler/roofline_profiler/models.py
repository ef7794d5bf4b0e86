"""Transformer architectures as a decode step sees them: shapes, parameter and byte counts.

A model is read from a Hugging Face ``config.json`` (or one of :data:`PRESETS`, the published
configs of a few common models) into a :class:`ModelArch`. Supported are dense Llama-style decoders
with grouped-query attention (``llama``, ``mistral``, ``qwen2``, ``qwen3``) and their mixture-of-
experts variants (``mixtral``, ``qwen2_moe``, ``qwen3_moe``). Everything else is rejected with a
:class:`ModelError` whose message is one line naming the offending field.

One decode step of such a model, per GPU of a tensor-parallel group of ``tp``, is the GEMMs of
:func:`decode_gemms` (M = batch rows; each reads its K×N weight once per step) plus attention over
the KV cache. Tensor parallelism shards as vLLM's ``ColumnParallelLinear`` / ``RowParallelLinear``
do: the fused qkv, gate_up, experts' gate_up and lm_head split N; o, down and experts' down split K.
When ``num_key_value_heads < tp`` every GPU keeps one replicated KV head (vLLM's
``QKVParallelLinear``). The embedding and lm_head are split by rows as ``VocabParallelEmbedding``
does: the vocabulary is padded to a multiple of 64 first, then divided by ``tp``. Norms and the MoE
router are replicated.

Mixture of experts: under uniform top-k routing, a batch of B tokens reads
``E·(1 − (1 − k/E)^B)`` distinct experts per layer (:func:`expected_active_experts`), each seeing
``B·k / active`` tokens on average. Qwen-MoE's ``decoder_sparse_step`` and ``mlp_only_layers`` make
some layers dense; GEMM ``count`` is then the average number of such GEMMs per layer
(e.g. dense gate_up 0.5 when every second layer is dense), so ``count × num_layers`` is exact.

A sliding window (Mistral's ``sliding_window``) caps the tokens attention reads, never the KV memory
an engine reserves (:func:`attended_tokens`).

Presets are the models' published ``config.json`` files, copied verbatim into ``presets/``:

* ``llama-3.1-8b``: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
* ``llama-3.1-70b``: https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
* ``qwen3-8b``: https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
* ``mixtral-8x7b``: https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
* ``qwen3-30b-a3b``: https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json

Checked against published counts in ``tests/profiler/test_models.py``: Llama-3.1-8B has
8,030,261,248 parameters (layer 218,112,000; embeddings and lm_head 525,336,576 each) and 131,072
KV bytes per token in bf16.

Additions beyond the planning interface: :attr:`ModelArch.moe_layers`,
:attr:`ModelArch.sliding_window`, :attr:`ModelArch.mlp_bias`, :func:`attended_tokens`,
:func:`heads_per_gpu`,
:func:`active_parameter_count`, :data:`SUPPORTED_MODEL_TYPES`.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "PRESETS",
    "SUPPORTED_MODEL_TYPES",
    "Gemm",
    "ModelArch",
    "ModelError",
    "active_parameter_count",
    "attended_tokens",
    "check_tensor_parallel",
    "decode_gemms",
    "decode_step_bytes",
    "decode_step_flops",
    "expected_active_experts",
    "heads_per_gpu",
    "kv_cache_bytes_per_token",
    "load_model",
    "model_from_config",
    "parameter_count",
    "weight_bytes",
]

#: vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``: embedding rows are padded to a multiple of this.
VOCAB_PADDING = 64

_PRESET_NAMES = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "mixtral-8x7b", "qwen3-30b-a3b")


def _read_presets() -> Mapping[str, Mapping[str, Any]]:
    folder = resources.files("roofline_profiler") / "presets"
    return MappingProxyType(
        {
            name: MappingProxyType(json.loads((folder / f"{name}.json").read_text("utf-8")))
            for name in _PRESET_NAMES
        }
    )


#: Preset name → the model's published ``config.json`` fields.
PRESETS: Mapping[str, Mapping[str, Any]] = _read_presets()

_DENSE_TYPES = ("llama", "mistral", "qwen2", "qwen3")
_MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe")
SUPPORTED_MODEL_TYPES: tuple[str, ...] = _DENSE_TYPES + _MOE_TYPES
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MixtralForCausalLM": "mixtral",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
}


class ModelError(ValueError):
    """A model or config that cannot be planned; ``str()`` is one line naming the field."""


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    qk_norm: bool
    attention_bias: bool
    max_position_embeddings: int
    #: Layers whose MLP is a mixture of experts (the others are dense); 0 for dense models.
    moe_layers: int = 0
    #: Tokens attention looks back over, when the model uses a sliding window.
    sliding_window: int | None = None
    #: Llama's ``mlp_bias``: biases on gate, up and down.
    mlp_bias: bool = False

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0


@dataclass(frozen=True)
class Gemm:
    name: str
    k: int
    n: int
    tokens: int
    count: float
    per_layer: bool


def load_model(ref: str) -> ModelArch:
    """A preset name, or the path of a Hugging Face ``config.json``."""
    if ref in PRESETS:
        return model_from_config(PRESETS[ref], ref)
    path = Path(ref)
    if not (path.suffix == ".json" or path.exists() or "/" in ref or "\\" in ref):
        known = ", ".join(sorted(PRESETS))
        raise ModelError(f"unknown model preset {ref!r} (presets: {known}; or a config.json path)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ModelError(f"{path.name}: cannot read the config ({reason})") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path.name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(config, dict):
        raise ModelError(f"{path.name}: the config must be a JSON object")
    stem = path.parent.name if path.stem == "config" and path.parent.name else path.stem
    return model_from_config(config, stem, source=path.name)


def model_from_config(
    config: Mapping[str, Any], name: str, *, source: str = "config.json"
) -> ModelArch:
    """Read the fields a decode step depends on; ``source`` prefixes error messages."""
    fields = _Fields(config, source)
    model_type = _model_type(config, source)
    hidden = fields.positive("hidden_size")
    heads = fields.positive("num_attention_heads")
    kv_heads = fields.positive("num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise ModelError(
            f"{source}: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})"
        )
    head_dim = fields.positive("head_dim", default=0)
    if head_dim == 0:
        if hidden % heads:
            raise ModelError(
                f"{source}: head_dim is missing and hidden_size ({hidden}) is not a multiple of "
                f"num_attention_heads ({heads})"
            )
        head_dim = hidden // heads
    layers = fields.positive("num_hidden_layers")
    experts = top_k = moe_inter = shared_inter = moe_layers = 0
    if model_type in _MOE_TYPES:
        experts = fields.positive("num_local_experts" if model_type == "mixtral" else "num_experts")
        top_k = fields.positive("num_experts_per_tok")
        if top_k > experts:
            raise ModelError(
                f"{source}: num_experts_per_tok ({top_k}) exceeds the experts ({experts})"
            )
        if model_type == "mixtral":
            moe_inter = fields.positive("intermediate_size")
        else:
            moe_inter = fields.positive("moe_intermediate_size")
        if model_type == "qwen2_moe":
            shared_inter = fields.positive("shared_expert_intermediate_size", default=0)
        moe_layers = _count_moe_layers(fields, model_type, layers)
    needs_dense = model_type in _DENSE_TYPES or moe_layers < layers
    inter = fields.positive("intermediate_size", default=None if needs_dense else 0)
    if model_type.startswith("qwen2"):
        attention_bias = True  # Qwen2 hard-codes biases on q, k and v
    else:
        attention_bias = fields.boolean("attention_bias", default=False)
    return ModelArch(
        name=name,
        model_type=model_type,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=fields.positive("vocab_size"),
        tie_word_embeddings=fields.boolean("tie_word_embeddings", default=False),
        num_experts=experts,
        experts_per_token=top_k,
        moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=shared_inter,
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        attention_bias=attention_bias,
        max_position_embeddings=fields.positive("max_position_embeddings"),
        moe_layers=moe_layers,
        sliding_window=_sliding_window(fields, model_type, source),
        mlp_bias=model_type == "llama" and fields.boolean("mlp_bias", default=False),
    )


def check_tensor_parallel(arch: ModelArch, tensor_parallel: int) -> None:
    """Raise :class:`ModelError` for a degree the engines cannot shard this model by."""
    tp = tensor_parallel
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ModelError(f"tensor parallel degree must be a positive integer, got {tp!r}")
    if arch.num_heads % tp:
        raise ModelError(
            f"{arch.name}: tensor parallel {tp} does not divide num_attention_heads "
            f"({arch.num_heads})"
        )
    if arch.num_kv_heads % tp and tp % arch.num_kv_heads:
        raise ModelError(
            f"{arch.name}: tensor parallel {tp} neither divides nor is a multiple of "
            f"num_key_value_heads ({arch.num_kv_heads})"
        )
    widths = {
        "intermediate_size": arch.intermediate_size if arch.moe_layers < arch.num_layers else 0,
        "moe_intermediate_size": arch.moe_intermediate_size,
        "shared_expert_intermediate_size": arch.shared_expert_intermediate_size,
    }
    for field, width in widths.items():
        if width % tp:
            raise ModelError(f"{arch.name}: tensor parallel {tp} does not divide {field} ({width})")


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
    """Bytes of weights one GPU of the TP group holds (replicated norms counted on each)."""
    tp = tensor_parallel
    matrices = sum(
        g.k * g.n * g.count for g in _gemms(arch, 1, tp, float(arch.num_experts)) if g.per_layer
    )
    embeddings = (1 if arch.tie_word_embeddings else 2) * _vocab_rows(arch, tp) * arch.hidden_size
    elements = round(matrices * arch.num_layers) + embeddings + _vector_parameters(arch, tp)
    return elements * element_bytes


def kv_cache_bytes_per_token(arch: ModelArch, element_bytes: int, tensor_parallel: int = 1) -> int:
    """K and V of every layer for one token, per GPU: ``2·layers·max(1, n_kv/tp)·hd·bytes``."""
    return 2 * arch.num_layers * _kv_heads(arch, tensor_parallel) * arch.head_dim * element_bytes


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
        g.k * g.n * g.count * (arch.num_layers if g.per_layer else 1)
        for g in decode_gemms(arch, batch, tensor_parallel)
    )
    embedding_rows = min(batch, _vocab_rows(arch, tensor_parallel)) * arch.hidden_size
    weights = (
        matrices + embedding_rows + _vector_parameters(arch, tensor_parallel)
    ) * element_bytes
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


def _model_type(config: Mapping[str, Any], source: str) -> str:
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    model_type = config.get("model_type")
    if model_type is None:
        architectures = config.get("architectures")
        if not isinstance(architectures, list) or not architectures:
            raise ModelError(f"{source}: model_type is missing")
        if architectures[0] not in _ARCHITECTURES:
            raise ModelError(
                f"{source}: architectures {architectures[0]!r} is not supported "
                f"({', '.join(_ARCHITECTURES)})"
            )
        return _ARCHITECTURES[architectures[0]]
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelError(f"{source}: model_type {model_type!r} is not supported ({supported})")
    return str(model_type)


def _count_moe_layers(fields: _Fields, model_type: str, layers: int) -> int:
    if model_type == "mixtral":
        return layers
    step = fields.positive("decoder_sparse_step", default=1)
    dense = fields.layer_list("mlp_only_layers", layers)
    return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)


def _sliding_window(fields: _Fields, model_type: str, source: str) -> int | None:
    if model_type in ("mistral", "mixtral"):
        return fields.positive("sliding_window", default=0) or None
    if model_type.startswith("qwen") and fields.boolean("use_sliding_window", default=False):
        raise ModelError(f"{source}: use_sliding_window true is not supported (per-layer windows)")
    return None


class _Fields:
    """Typed reads of config fields with one-line errors that name the field."""

    def __init__(self, config: Mapping[str, Any], source: str) -> None:
        self._config = config
        self._source = source

    def positive(self, key: str, default: int | None = None) -> int:
        """A positive integer; missing or null is an error unless there is a ``default``."""
        value = self._config.get(key)
        if value is None:
            if default is None:
                raise ModelError(f"{self._source}: {key} is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"{self._source}: {key} must be a positive integer, got {value!r}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ModelError(f"{self._source}: {key} must be true or false, got {value!r}")
        return value

    def layer_list(self, key: str, layers: int) -> frozenset[int]:
        value = self._config.get(key) or []
        if not isinstance(value, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in value
        ):
            raise ModelError(f"{self._source}: {key} must be a list of layer indices")
        return frozenset(value)
