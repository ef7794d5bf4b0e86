"""A model's architecture, read from a Hugging Face ``config.json`` or a preset.

:func:`load_model` takes a preset name (:data:`PRESETS`) or the path of a ``config.json``;
:func:`model_from_config` reads an already parsed mapping (the operator passes inline configs from
its custom resource), without file I/O. Supported are dense Llama-style decoders with grouped-query
attention (``llama``, ``mistral``, ``qwen2``, ``qwen3``) and their mixture-of-experts variants
(``mixtral``, ``qwen2_moe``, ``qwen3_moe``); the model type comes from ``model_type``, else from
``architectures``. Everything else, and every malformed field, is a :class:`ModelError` whose
message is one line naming the field.

Field conventions follow ``transformers``' configuration classes: a missing or null
``num_key_value_heads`` means multi-head attention, a missing or null ``head_dim`` means
``hidden_size / num_attention_heads``, ``tie_word_embeddings`` defaults to false, Mixtral counts its
experts in ``num_local_experts`` and Qwen-MoE in ``num_experts``. Qwen2 always has q/k/v biases,
Qwen3 normalises q and k per head. Qwen-MoE's ``decoder_sparse_step`` and ``mlp_only_layers`` give
the layers whose MLP stays dense (:attr:`ModelArch.moe_layers` counts the others). Mistral's
``sliding_window`` is kept; Qwen's per-layer windows (``use_sliding_window``) are rejected.

A ``quantization_config`` (:mod:`roofline_profiler.core.quantization` finds it where vLLM looks)
in a format the plan reads (:func:`weight_formats.weight_format_of`: AWQ 4-bit, GPTQ 4- and 8-bit,
compressed-tensors W8A8 INT8, FP8) sets :attr:`ModelArch.weight_format`: the decoder layers'
GEMMs are in that format, the embeddings, the head and the norms in the model's dtype (as the
checkpoints keep them). Any other declared quantization (another format, or an 8-bit
``torch_dtype`` without one) is a :class:`QuantizedConfig`: planning those weights at 16 or 32
bits would be wrong by a factor of 2 to 8. A quantized mixture of experts is refused too (its
experts run through fused MoE kernels this plan does not time).

Presets are the models' published ``config.json`` files, copied verbatim into ``presets/``:

* ``llama-3.1-8b``: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
* ``llama-3.1-70b``: https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
* ``qwen3-8b``: https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
* ``mixtral-8x7b``: https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
* ``qwen3-30b-a3b``: https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json

Pure module: no torch, no numpy. :mod:`roofline_profiler.core.models` re-exports its public names.
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

from roofline_profiler.core.limits import MAX_CONFIG_BYTES, MAX_CONFIG_FIELDS, MODEL_FIELD_LIMITS
from roofline_profiler.core.quantization import (
    QUANTIZATION_KEYS,
    TEXT_CONFIG_KEY,
    DeclaredQuantization,
    declared_quantization,
)
from roofline_profiler.core.weight_formats import (
    KV_CACHE_DTYPES,
    PLANNED_FORMATS,
    UnplannedFormat,
    WeightFormat,
    parse_weight_format,
    weight_format_of,
)

_PRESET_NAMES = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "mixtral-8x7b", "qwen3-30b-a3b")


def _read_presets() -> Mapping[str, Mapping[str, Any]]:
    folder = resources.files("roofline_profiler.core") / "presets"
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
    """A model or config that cannot be planned; ``str()`` is one line naming the field.

    ``redacted`` is the same line without any value of the config (``None`` when it shows
    none): what the operator reports of a config read from a ConfigMap anyone in the namespace
    may have written, whose values it never echoes into a status that tenants read.
    """

    def __init__(self, message: str, *, redacted: str | None = None) -> None:
        super().__init__(message)
        self.redacted = redacted

    def without_values(self) -> str:
        return self.redacted or str(self)


#: Why a quantized config is refused, the end of every :class:`QuantizedConfig` message.
QUANTIZED_NOT_PLANNED = (
    f"it plans {PLANNED_FORMATS}; counting these weights at 16 or 32 bits would be wrong"
)


class QuantizedConfig(ModelError):
    """A config that declares a quantized format no plan reads: one line naming the field, the
    ``quant_method`` when it is a plain name, what is not read, and what is."""

    def __init__(
        self, source: str, declared: DeclaredQuantization, unread: str = "this format"
    ) -> None:
        why = f"the plan does not read {unread} ({QUANTIZED_NOT_PLANNED})"
        super().__init__(
            f"{source}: {declared.field} {declared.detail}: {why}",
            redacted=f"{source}: {declared.field} {declared.redacted}: {why}",
        )
        self.declared = declared


def field_error(source: str, key: str, detail: str) -> ModelError:
    """``{source}: {key} {detail}``, whose ``detail`` may show the field's value; redacted, the
    field is named only."""
    return ModelError(f"{source}: {key} {detail}", redacted=f"{source}: {key} is not valid")


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
    #: The decoder layers' GEMM weights' format (:attr:`WeightFormat.name`); empty: the dtype's.
    weight_format: str = ""
    #: How the engine stores the KV cache (vLLM's ``--kv-cache-dtype``; ``auto``: the dtype).
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        if self.weight_format:
            parse_weight_format(self.weight_format)  # ValueError for a name no format has
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"{self.kv_cache_dtype!r} is not a KV-cache dtype")

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0

    @property
    def quantized(self) -> WeightFormat | None:
        """The decoder layers' weight format, None where they are in the model's dtype."""
        return parse_weight_format(self.weight_format) if self.weight_format else None


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
    config = parse_config_text(text, path.name)
    stem = path.parent.name if path.stem == "config" and path.parent.name else path.stem
    return model_from_config(config, stem, source=path.name)


def parse_config_text(text: str, source: str) -> dict[str, Any]:
    """A ``config.json``'s text as a mapping, within :data:`MAX_CONFIG_BYTES` (checked before
    parsing, so a huge or deeply nested text costs no work)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ModelError(f"{source}: the config has {size} bytes, at most {MAX_CONFIG_BYTES}")
    try:
        config = json.loads(text, parse_int=bounded_int)
    except json.JSONDecodeError as exc:
        raise ModelError(f"{source}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise ModelError(f"{source}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer of more digits than any field may have
        raise ModelError(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ModelError(f"{source}: the config must be a JSON object")
    return config


#: Digits of the longest integer a config may hold: a field's limit has at most 9
#: (``limits.MODEL_FIELD_LIMITS``), so this is generous; Python itself refuses to parse more than
#: 4300 digits with a bare ``ValueError``, and work on long integers grows with their length.
MAX_CONFIG_INT_DIGITS = 100


def bounded_int(text: str) -> int:
    """``json.loads``' ``parse_int`` for a model config: a ``ValueError`` past
    :data:`MAX_CONFIG_INT_DIGITS` digits, before any work on the digits."""
    if len(text.lstrip("-")) > MAX_CONFIG_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def check_config_size(config: Mapping[str, Any], source: str) -> None:
    """An already parsed config within :data:`MAX_CONFIG_FIELDS` fields and
    :data:`MAX_CONFIG_BYTES` bytes as JSON (an inline config of a custom resource)."""
    if len(config) > MAX_CONFIG_FIELDS:
        raise ModelError(
            f"{source}: the config has {len(config)} fields, at most {MAX_CONFIG_FIELDS}"
        )
    try:
        size = len(json.dumps(config, separators=(",", ":"), default=_plain).encode())
    except (RecursionError, TypeError, ValueError):
        raise ModelError(f"{source}: the config is not plain JSON (or nested too deeply)") from None
    if size > MAX_CONFIG_BYTES:
        raise ModelError(f"{source}: the config has {size} bytes, at most {MAX_CONFIG_BYTES}")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def model_from_config(
    config: Mapping[str, Any], name: str, *, source: str = "config.json"
) -> ModelArch:
    """Read the fields a decode step depends on; ``source`` prefixes error messages.

    Every integer field is bounded (``limits.MODEL_FIELD_LIMITS``), so the work is bounded too.
    """
    check_config_size(config, source)
    weight_format = _weight_format(config, source)
    fields = _Fields(config, source)
    model_type = _model_type(config, source)
    hidden = fields.positive("hidden_size")
    heads, kv_heads, head_dim = _attention_heads(fields, hidden, source)
    layers = fields.positive("num_hidden_layers")
    moe = _experts(fields, model_type, layers, source) if model_type in _MOE_TYPES else _Experts()
    needs_dense = model_type in _DENSE_TYPES or moe.layers < layers
    inter = fields.positive("intermediate_size", default=None if needs_dense else 0)
    if weight_format and moe.layers:
        raise ModelError(
            f"{source}: a quantized mixture of experts is not planned (its experts run through "
            "fused MoE kernels the plan does not time)"
        )
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
        num_experts=moe.count,
        experts_per_token=moe.per_token,
        moe_intermediate_size=moe.intermediate_size,
        shared_expert_intermediate_size=moe.shared_intermediate_size,
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        attention_bias=attention_bias,
        max_position_embeddings=fields.positive("max_position_embeddings"),
        moe_layers=moe.layers,
        sliding_window=_sliding_window(fields, model_type, source),
        mlp_bias=model_type == "llama" and fields.boolean("mlp_bias", default=False),
        weight_format=weight_format,
    )


def _weight_format(config: Mapping[str, Any], source: str) -> str:
    """The name of the weight format ``config`` declares (empty: none), or the
    :class:`QuantizedConfig` of one the plan does not read."""
    declared = declared_quantization(config)
    if declared is None:
        return ""
    key = declared.field.removeprefix(f"{TEXT_CONFIG_KEY}.")
    if key not in QUANTIZATION_KEYS:  # an 8-bit dtype without a quantization_config
        raise QuantizedConfig(source, declared, "a narrow dtype without its quantization_config")
    scope = config if key == declared.field else config[TEXT_CONFIG_KEY]
    try:
        return weight_format_of(scope[key]).name
    except UnplannedFormat as exc:
        raise QuantizedConfig(source, declared, str(exc)) from None


def _attention_heads(fields: _Fields, hidden: int, source: str) -> tuple[int, int, int]:
    """Query heads, key/value heads (a divisor of them: grouped-query attention) and the head
    dimension, which defaults to the hidden size split over the query heads."""
    heads = fields.positive("num_attention_heads")
    kv_heads = fields.positive("num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise field_error(
            source, "num_key_value_heads", f"({kv_heads}) must divide num_attention_heads ({heads})"
        )
    head_dim = fields.positive("head_dim", default=0)
    if head_dim == 0:
        if hidden % heads:
            raise field_error(
                source,
                "hidden_size",
                f"({hidden}) is not a multiple of num_attention_heads ({heads}) and head_dim "
                "is missing",
            )
        head_dim = hidden // heads
    return heads, kv_heads, head_dim


@dataclass(frozen=True)
class _Experts:
    """A mixture-of-experts model's experts; all zero for a dense model."""

    count: int = 0
    per_token: int = 0
    intermediate_size: int = 0
    #: Qwen2-MoE's shared expert, which every token runs besides its routed ones.
    shared_intermediate_size: int = 0
    #: Layers whose MLP is the experts (the others are dense).
    layers: int = 0


def _experts(fields: _Fields, model_type: str, layers: int, source: str) -> _Experts:
    """The experts of a mixture-of-experts ``model_type``, each family under its own field names."""
    count = fields.positive("num_local_experts" if model_type == "mixtral" else "num_experts")
    per_token = fields.positive("num_experts_per_tok")
    if per_token > count:
        raise field_error(
            source, "num_experts_per_tok", f"({per_token}) exceeds the experts ({count})"
        )
    if model_type == "mixtral":
        intermediate = fields.positive("intermediate_size")
    else:
        intermediate = fields.positive("moe_intermediate_size")
    shared = 0
    if model_type == "qwen2_moe":
        shared = fields.positive("shared_expert_intermediate_size", default=0)
    return _Experts(
        count=count,
        per_token=per_token,
        intermediate_size=intermediate,
        shared_intermediate_size=shared,
        layers=_count_moe_layers(fields, model_type, layers),
    )


def _model_type(config: Mapping[str, Any], source: str) -> str:
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    model_type = config.get("model_type")
    if model_type is None:
        architectures = config.get("architectures")
        if not isinstance(architectures, list) or not architectures:
            raise ModelError(f"{source}: model_type is missing")
        if architectures[0] not in _ARCHITECTURES:
            raise field_error(
                source,
                "architectures",
                f"{architectures[0]!r} is not supported ({', '.join(_ARCHITECTURES)})",
            )
        return _ARCHITECTURES[architectures[0]]
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise field_error(source, "model_type", f"{model_type!r} is not supported ({supported})")
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


def _shown(value: Any) -> str:
    """A config value in a message: its ``repr`` cut to 40 characters (an integer of 4000
    digits, a string of 64 KiB, a nested object are shown by their start)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**12:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Fields:
    """Typed reads of config fields with one-line errors that name the field."""

    def __init__(self, config: Mapping[str, Any], source: str) -> None:
        self._config = config
        self._source = source

    def positive(self, key: str, default: int | None = None) -> int:
        """A positive integer up to the field's limit; missing or null is an error unless there
        is a ``default``."""
        value = self._config.get(key)
        if value is None:
            if default is None:
                raise ModelError(f"{self._source}: {key} is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise field_error(self._source, key, f"must be a positive integer, got {_shown(value)}")
        upper = MODEL_FIELD_LIMITS[key]
        if value > upper:
            raise field_error(self._source, key, f"must be at most {upper}, got {_shown(value)}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise field_error(self._source, key, f"must be true or false, got {_shown(value)}")
        return value

    def layer_list(self, key: str, layers: int) -> frozenset[int]:
        value = self._config.get(key) or []
        if (
            not isinstance(value, list)
            or len(value) > layers
            or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in value
            )
        ):
            raise ModelError(f"{self._source}: {key} must be a list of layer indices")
        return frozenset(value)
