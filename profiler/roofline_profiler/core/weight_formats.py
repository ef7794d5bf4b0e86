"""The weight formats serving engines run, and what one weight costs in each: the table beside
the dtype table (``limits.DTYPE_BYTES``).

A decode step reads every weight once, so the bytes per weight set the bandwidth-bound step; a
format's scales and zero points are read with its weights and count too. Weight-only formats
(AWQ, GPTQ) keep the activations in 16 bits and dequantize each weight as the GEMM reads it, so
their GEMM also does the dequantizing work on the compute units: on a CPU that work, not the
bytes, sets the step from a small batch on (``bench/quantized_linear.py``), which is why a
quantized plan must time the engine's kernel and never scale the 16-bit step by the bytes.
W8A8 formats quantize the activations too (per token, in the engine's step) and multiply in
8 bits.

Per format (engines' names: vLLM's ``--quantization`` and the ``quant_method`` of a Hugging Face
``quantization_config``):

* ``awq-int4``: 4-bit weights in groups of ``group_size`` input channels, each group with a 16-bit
  scale and a 4-bit zero point per output channel (AutoAWQ's GEMM layout: ``qweight``,
  ``scales``, ``qzeros``).
* ``gptq-int4`` / ``gptq-int8``: 4- or 8-bit weights in groups, a 16-bit scale per group and
  output channel and, when not symmetric, a zero point of the weight's bits (``qweight``,
  ``scales``, ``qzeros``; ``g_idx`` ignored: act-order reorders, it adds no bytes per step).
* ``int8-w8a8``: 8-bit weights with one 32-bit float scale per output channel, activations
  quantized per token (compressed-tensors' W8A8 int8; vLLM's oneDNN int8 GEMM on a CPU).
* ``fp8-w8a8``: 8-bit float weights with a 32-bit scale per output channel (or per tensor),
  activations quantized per token or tensor (vLLM's ``fp8``; on GPUs with FP8 matrix units).

A format has one name (:attr:`WeightFormat.name`: ``awq-int4-g128``, ``gptq-int8-g64-asym``,
``int8-w8a8``, ``fp8-w8a8``), which ``--weight-format`` takes and a result keeps
(:func:`parse_weight_format` reads it back); :func:`weight_format_of` reads the format a Hugging
Face ``quantization_config`` declares. The KV-cache dtypes are vLLM's ``--kv-cache-dtype`` names
(:data:`KV_CACHE_DTYPES`): ``auto`` stores the cache in the model's dtype, the ``fp8`` variants one
byte per element.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Bytes of a 16-bit scale (AWQ and GPTQ store them in the activation dtype).
HALF_SCALE_BYTES = 2
#: Bytes of a 32-bit float scale (per output channel in the W8A8 formats).
FLOAT_SCALE_BYTES = 4


@dataclass(frozen=True)
class WeightFormat:
    """One quantized weight format, at one group size."""

    #: The format's family: ``awq-int4``, ``gptq-int4``, ``gptq-int8``, ``int8-w8a8``,
    #: ``fp8-w8a8`` (:data:`FAMILIES`; the bounded label of a metric).
    family: str
    #: Bits of one stored weight.
    weight_bits: int
    #: Input channels that share a scale (and zero point); None: one per output channel.
    group_size: int | None
    #: Bytes of one scale.
    scale_bytes: int
    #: Bits of one zero point (0: symmetric, none stored).
    zero_point_bits: int
    #: What the GEMM multiplies: ``16-bit`` activations (weight-only) or ``int8``/``fp8``.
    activation: str
    #: vLLM's ``--quantization`` for a checkpoint in this format.
    vllm_quantization: str

    @property
    def weight_only(self) -> bool:
        return self.activation == "16-bit"

    @property
    def name(self) -> str:
        """The format's one name: its family, then the group size and ``asym`` where it has
        them (``awq-int4-g128``, ``gptq-int4-g32-asym``, ``int8-w8a8``)."""
        if self.group_size is None:
            return self.family
        asym = "-asym" if self.family.startswith("gptq") and self.zero_point_bits else ""
        return f"{self.family}-g{self.group_size}{asym}"

    def bytes_per_weight(self, in_features: int) -> float:
        """Bytes a GEMM reads per weight of a layer with ``in_features`` input channels: the weight
        itself plus its share of the scales and zero points."""
        group = self.group_size if self.group_size is not None else in_features
        return (self.weight_bits + (8 * self.scale_bytes + self.zero_point_bits) / group) / 8

    def matrix_bytes(self, in_features: int, out_features: int) -> int:
        """Bytes of one ``[out_features, in_features]`` weight in this format, its scales and zero
        points included (groups rounded up, as the checkpoints store them)."""
        group = self.group_size if self.group_size is not None else in_features
        groups = -(-in_features // group)
        weights = -(-in_features * out_features * self.weight_bits // 8)
        side = groups * out_features * (8 * self.scale_bytes + self.zero_point_bits)
        return weights + -(-side // 8)


def awq_int4(group_size: int = 128) -> WeightFormat:
    return WeightFormat("awq-int4", 4, group_size, HALF_SCALE_BYTES, 4, "16-bit", "awq")


def gptq(bits: int = 4, group_size: int = 128, symmetric: bool = True) -> WeightFormat:
    if bits not in (4, 8):
        raise ValueError(f"GPTQ stores 4- or 8-bit weights, not {bits}-bit")
    zero = 0 if symmetric else bits
    return WeightFormat(
        f"gptq-int{bits}", bits, group_size, HALF_SCALE_BYTES, zero, "16-bit", "gptq"
    )


def int8_w8a8() -> WeightFormat:
    return WeightFormat("int8-w8a8", 8, None, FLOAT_SCALE_BYTES, 0, "int8", "compressed-tensors")


def fp8_w8a8() -> WeightFormat:
    return WeightFormat("fp8-w8a8", 8, None, FLOAT_SCALE_BYTES, 0, "fp8", "fp8")


#: Every family :func:`parse_weight_format` reads, in the order ``--help`` lists them.
FAMILIES: tuple[str, ...] = ("awq-int4", "gptq-int4", "gptq-int8", "int8-w8a8", "fp8-w8a8")
#: Group sizes the engines' kernels take (AutoAWQ and AutoGPTQ quantize in these).
GROUP_SIZES: tuple[int, ...] = (32, 64, 128, 256)
DEFAULT_GROUP_SIZE = 128
#: vLLM's ``--kv-cache-dtype`` values (``vllm/config/cache.py``) and the bytes of one cached
#: element each: None for ``auto``, the model's dtype.
KV_CACHE_DTYPES: Mapping[str, int | None] = {
    "auto": None,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

_NAME = re.compile(
    r"(?P<family>awq-int4|gptq-int4|gptq-int8|int8-w8a8|fp8-w8a8)"
    r"(?:-g(?P<group>[0-9]{1,4}))?(?P<asym>-asym)?"
)


def parse_weight_format(name: str) -> WeightFormat:
    """The format ``name`` names (:attr:`WeightFormat.name`; a 4- or 8-bit family without a
    group size takes :data:`DEFAULT_GROUP_SIZE`); ValueError for any other name."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{_shown(name)} is not a weight format ({', '.join(FAMILIES)})")
    family, asym = match["family"], match["asym"] is not None
    grouped = family.startswith(("awq", "gptq"))
    if match["group"] is not None and not grouped:
        raise ValueError(f"{family} has one scale per output channel, no group size")
    if asym and not family.startswith("gptq"):
        raise ValueError(f"only GPTQ formats are written -asym, not {family}")
    group = int(match["group"]) if match["group"] is not None else DEFAULT_GROUP_SIZE
    if grouped and group not in GROUP_SIZES:
        raise ValueError(f"group size {group} is not one of {', '.join(map(str, GROUP_SIZES))}")
    if family == "awq-int4":
        return awq_int4(group)
    if family.startswith("gptq"):
        return gptq(int(family[-1]), group, symmetric=not asym)
    return int8_w8a8() if family == "int8-w8a8" else fp8_w8a8()


def kv_cache_element_bytes(kv_cache_dtype: str, model_element_bytes: int) -> int:
    """Bytes of one cached K or V element under ``--kv-cache-dtype``."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(
            f"{_shown(kv_cache_dtype)} is not a KV-cache dtype ({', '.join(KV_CACHE_DTYPES)})"
        )
    return KV_CACHE_DTYPES[kv_cache_dtype] or model_element_bytes


#: What the plan reads, in words (the end of every refusal).
PLANNED_FORMATS = "AWQ 4-bit, GPTQ 4- and 8-bit, compressed-tensors W8A8 INT8 and FP8 weights"


class UnplannedFormat(ValueError):
    """A ``quantization_config`` whose format no plan reads; ``str()`` names what is not read in
    words that show none of the config's values."""


def weight_format_of(quantization: Any) -> WeightFormat:
    """The format a ``quantization_config`` (or ``compression_config``) declares, as vLLM reads
    it: AutoAWQ's ``awq`` (4 bits, ``group_size``, ``zero_point``), AutoGPTQ's ``gptq`` (``bits``
    4 or 8, ``group_size``, ``sym``), llm-compressor's ``compressed-tensors`` with one group of
    8-bit integer weights and dynamic 8-bit integer activations (W8A8 INT8), and ``fp8`` (FP8
    weights with a scale per channel or block). Anything else is :class:`UnplannedFormat`."""
    if not isinstance(quantization, Mapping):
        raise UnplannedFormat("a quantization that is not an object")
    method = quantization.get("quant_method")
    method = method.lower() if isinstance(method, str) else None
    if method == "awq":
        bits = quantization.get("bits", 4)
        if bits != 4 or quantization.get("zero_point", True) is not True:
            raise UnplannedFormat("AWQ other than 4-bit with zero points")
        return awq_int4(_group(quantization))
    if method == "gptq":
        bits = quantization.get("bits")
        if bits not in (4, 8) or isinstance(bits, bool):
            raise UnplannedFormat("GPTQ weights of other than 4 or 8 bits")
        symmetric = quantization.get("sym", True)
        if not isinstance(symmetric, bool):
            raise UnplannedFormat("a GPTQ sym other than true or false")
        return gptq(int(bits), _group(quantization), symmetric=symmetric)
    if method == "fp8":
        return fp8_w8a8()
    if method in ("compressed-tensors", "compressed_tensors"):
        return _compressed_tensors(quantization)
    raise UnplannedFormat("this format")


def _group(quantization: Mapping[str, Any]) -> int:
    group = quantization.get("group_size", DEFAULT_GROUP_SIZE)
    if group not in GROUP_SIZES or isinstance(group, bool):
        sizes = ", ".join(map(str, GROUP_SIZES))
        raise UnplannedFormat(f"a group_size other than {sizes}")
    return int(group)


def _compressed_tensors(quantization: Mapping[str, Any]) -> WeightFormat:
    groups = quantization.get("config_groups")
    if not isinstance(groups, Mapping) or len(groups) != 1:
        raise UnplannedFormat("compressed-tensors without exactly one config group")
    (group,) = groups.values()
    weights = group.get("weights") if isinstance(group, Mapping) else None
    inputs = group.get("input_activations") if isinstance(group, Mapping) else None
    if (
        isinstance(weights, Mapping)
        and isinstance(inputs, Mapping)
        and weights.get("num_bits") == 8
        and weights.get("type", "int") == "int"
        and weights.get("strategy", "channel") in ("channel", "tensor")
        and inputs.get("num_bits") == 8
        and inputs.get("type", "int") == "int"
        and inputs.get("dynamic") is True
    ):
        return int8_w8a8()
    raise UnplannedFormat(
        "a compressed-tensors scheme other than W8A8 INT8 (8-bit integer weights per channel, "
        "8-bit dynamic integer activations)"
    )


def _shown(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
