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

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes of a 16-bit scale (AWQ and GPTQ store them in the activation dtype).
HALF_SCALE_BYTES = 2
#: Bytes of a 32-bit float scale (per output channel in the W8A8 formats).
FLOAT_SCALE_BYTES = 4


@dataclass(frozen=True)
class WeightFormat:
    """One quantized weight format, at one group size."""

    name: str
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
