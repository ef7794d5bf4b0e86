"""The quantization a Hugging Face ``config.json`` declares, found where the engines look for it.

No format but the 16- and 32-bit dtypes of :data:`limits.DTYPE_BYTES` is planned yet: a plan
counts every weight at ``--dtype``'s size, so an FP8 or a 4-bit AWQ model planned that way reads
two to eight times the weight bytes it does, and its step, its max batches and every threshold
exported from them are off by as much. A config that declares a quantized format is therefore
refused (:class:`~roofline_profiler.core.model_config.QuantizedConfig`), never planned as 16-bit.

A checkpoint declares it where vLLM's ``ModelConfig._verify_quantization``
(``vllm/config/model.py``) looks: ``quantization_config``, else ``compression_config`` (the key
of older compressed-tensors checkpoints), at the top level, then the same keys in
``text_config`` (a multimodal model's language model). Its ``quant_method`` names the format;
without one, transformers' ``AutoHfQuantizer.from_config`` reads ``load_in_4bit`` or
``load_in_8bit`` as bitsandbytes, and vLLM reads ``producer.name`` ``modelopt`` as NVIDIA
ModelOpt. A null key declares nothing, as in transformers; any other value, an empty or
malformed one included, is a quantization the plan cannot read. A ``torch_dtype`` (``dtype``
since transformers 5) of 8 bits or fewer (``float8_e4m3fn``, ``int8``, ``float4_e2m1fn_x2``)
is a quantized checkpoint too.

Every value shown comes from the config, which may hold anything: a name is shown only when it
is a short plain name, and :attr:`DeclaredQuantization.redacted` (what the operator reports of a
ConfigMap's config) shows only names from :data:`KNOWN_QUANT_METHODS`, a fixed vocabulary.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The keys that hold a checkpoint's quantization, in the order vLLM reads them.
QUANTIZATION_KEYS: tuple[str, ...] = ("quantization_config", "compression_config")
#: The keys of a checkpoint's dtype: transformers 4 writes ``torch_dtype``, 5 writes ``dtype``.
DTYPE_KEYS: tuple[str, ...] = ("torch_dtype", "dtype")
#: Where a multimodal config keeps its language model's fields.
TEXT_CONFIG_KEY = "text_config"

#: ``quant_method`` names the engines know: transformers' ``QuantizationMethod`` and vLLM's
#: ``QuantizationMethods``. Only these are shown without the config's other values.
KNOWN_QUANT_METHODS: frozenset[str] = frozenset(
    {
        *("aqlm", "auto-round", "awq", "awq_marlin", "bitblas", "bitnet", "bitsandbytes"),
        *("compressed-tensors", "compressed_tensors", "cpu_awq", "cpu_gptq", "deepspeedfp"),
        *("eetq", "experts_int8", "fbgemm_fp8", "fp8", "fp_quant", "gguf", "gptq"),
        *("gptq_bitblas", "gptq_marlin", "gptq_marlin_24", "higgs", "hqq", "inc", "ipex"),
        *("marlin", "modelopt", "modelopt_fp4", "moe_wna16", "mxfp4", "petit_nvfp4"),
        *("ptpc_fp8", "quanto", "quark", "spqr", "torchao", "tpu_int8", "vptq"),
    }
)

#: A value shown as it is: a short name of plain characters (no quotes, spaces or controls).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}")
#: A dtype of 8 bits or fewer: torch's ``int8``, ``uint4``, ``float8_e4m3fn``,
#: ``float4_e2m1fn_x2``, and ``fp8``.
_NARROW_DTYPE = re.compile(r"(?:torch\.)?(?:u?int|float|fp)([1-8])(?![0-9])")


@dataclass(frozen=True)
class DeclaredQuantization:
    """Where a config declares a quantized format and which, in words that are safe to print."""

    #: The field that declares it: ``quantization_config``, ``text_config.torch_dtype``, ...
    field: str
    #: What it declares, after the field's name: ``declares quant_method 'awq'``.
    detail: str
    #: The same without any value the config chose freely.
    redacted: str
    #: The format's name when it is a short plain name (``awq``, ``float8_e4m3fn``), else None.
    method: str | None


def declared_quantization(config: Mapping[str, Any]) -> DeclaredQuantization | None:
    """The first quantized format ``config`` declares, where vLLM looks first; None for none."""
    scopes: list[tuple[str, Mapping[str, Any]]] = [("", config)]
    text_config = config.get(TEXT_CONFIG_KEY)
    if isinstance(text_config, Mapping):
        scopes.append((f"{TEXT_CONFIG_KEY}.", text_config))
    for prefix, scope in scopes:
        for key in QUANTIZATION_KEYS:
            if scope.get(key) is not None:
                return _quantization_config(prefix + key, scope[key])
    for prefix, scope in scopes:
        for key in DTYPE_KEYS:
            declared = _narrow_dtype(prefix + key, scope.get(key))
            if declared is not None:
                return declared
    return None


def plain_name(value: Any) -> str | None:
    """``value`` when it is a short name of plain characters, safe to show on one line."""
    return value if isinstance(value, str) and _PLAIN_NAME.fullmatch(value) else None


def _quantization_config(field: str, value: Any) -> DeclaredQuantization:
    if not isinstance(value, Mapping):
        kind = _json_kind(value)
        return DeclaredQuantization(field, f"is {kind}, not an object", f"is {kind}", None)
    if value.get("quant_method") is None:
        implied = _implied_method(value)
        if implied is None:
            return DeclaredQuantization(field, "has no quant_method", "has no quant_method", None)
        detail = f"declares {implied!r} without a quant_method"
        return DeclaredQuantization(field, detail, detail, implied)
    method = plain_name(value["quant_method"])
    if method is None:
        unreadable = "declares a quant_method that is not a plain name"
        return DeclaredQuantization(field, unreadable, unreadable, None)
    detail = f"declares quant_method {method!r}"
    known = method.lower() in KNOWN_QUANT_METHODS
    redacted = detail if known else "declares a quant_method the engines do not name"
    return DeclaredQuantization(field, detail, redacted, method)


def _implied_method(quantization: Mapping[str, Any]) -> str | None:
    """The format of a config without ``quant_method``, as transformers and vLLM name it."""
    if quantization.get("load_in_4bit") is True or quantization.get("load_in_8bit") is True:
        return "bitsandbytes"
    producer = quantization.get("producer")
    if isinstance(producer, Mapping) and producer.get("name") == "modelopt":
        return "modelopt"
    return None


def _narrow_dtype(field: str, value: Any) -> DeclaredQuantization | None:
    if not isinstance(value, str):
        return None
    match = _NARROW_DTYPE.match(value.strip().lower())
    if match is None:
        return None
    bits = int(match.group(1))
    kind = f"{'an' if bits == 8 else 'a'} {bits}-bit type"
    name = plain_name(value)
    detail = f"is {name!r}, {kind}" if name is not None else f"is {kind}"
    return DeclaredQuantization(field, detail, f"is {kind}", name)


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words (never the value itself)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
