"""Quantized linear layers as vLLM's CPU build runs them, for timing: its weight-only 4-bit GEMM
(``cpu_gemm_wna16``, the AWQ and GPTQ path) and its oneDNN int8 GEMM (``onednn_scaled_mm`` with
the activations quantized per token in the same call, compressed-tensors' W8A8 int8).

The weights are random, in the layout vLLM's kernels hold after loading a checkpoint
(``CPUWNA16LinearKernel._process_gptq_weights_w4a16``: output channels in blocks of 16, eight
4-bit weights per int32; ``create_onednn_scaled_mm``: int8 ``[K, N]`` with a float scale per
output channel). A kernel does the same work whatever the values are, so random contents time
it as it runs on a real checkpoint. Where vLLM's CPU build cannot be imported there is no engine
kernel to time: :func:`prepare` returns None and a plan must say so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from roofline_profiler.core.weight_formats import WeightFormat

#: Int4 weights packed per int32 in vLLM's CPU weight-only kernel.
PACK_FACTOR = 8
#: Output channels per block of that kernel's layout.
BLOCK_CHANNELS = 16

Linear = Callable[[torch.Tensor], torch.Tensor]


def _vllm_ops() -> Any | None:
    try:
        from vllm import _custom_ops
    except Exception:  # not installed, or a build without the CPU platform
        return None
    if not hasattr(torch.ops._C, "cpu_gemm_wna16"):
        return None
    return _custom_ops


def _isa_hint(dtype: torch.dtype) -> str:
    """vLLM's choice for the weight-only kernel (``mixed_precision/cpu.py`` ``_get_isa_hint``)."""
    if torch.cpu._is_amx_tile_supported() and dtype == torch.bfloat16:
        return "amx"
    return "vec"


def _int32(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int32, generator=generator)


def prepare(
    fmt: WeightFormat,
    in_features: int,
    out_features: int,
    dtype: torch.dtype,
    generator: torch.Generator | None = None,
) -> tuple[Linear, int] | None:
    """One ``[out_features, in_features]`` linear layer in ``fmt`` on vLLM's CPU kernel, and the
    bytes its weights, scales and zero points take; None where vLLM's kernel cannot run it."""
    ops = _vllm_ops()
    if ops is None:
        return None
    generator = generator or torch.Generator().manual_seed(0)
    if fmt.weight_only and fmt.weight_bits == 4 and fmt.group_size is not None:
        return _wna16(ops, fmt, in_features, out_features, dtype, generator)
    if fmt.activation == "int8":
        return _w8a8(ops, in_features, out_features, dtype, generator)
    return None


def _wna16(
    ops: Any,
    fmt: WeightFormat,
    in_features: int,
    out_features: int,
    dtype: torch.dtype,
    generator: torch.Generator,
) -> tuple[Linear, int] | None:
    group = fmt.group_size or in_features
    if in_features % 32 or out_features % 32 or in_features % group:
        return None  # CPUWNA16LinearKernel.can_implement refuses these shapes
    groups = in_features // group
    weight = _int32((out_features // BLOCK_CHANNELS, in_features * 2), generator)
    scales = (torch.rand((groups, out_features), generator=generator) * 1e-2).to(dtype)
    zeros = (
        _int32((groups, out_features // PACK_FACTOR), generator) if fmt.zero_point_bits else None
    )
    isa = _isa_hint(dtype)

    def call(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = ops.cpu_gemm_wna16(x, weight, scales, zeros, None, PACK_FACTOR, isa)
        return out

    nbytes = sum(t.numel() * t.element_size() for t in (weight, scales, zeros) if t is not None)
    return call, nbytes


def _w8a8(
    ops: Any, in_features: int, out_features: int, dtype: torch.dtype, generator: torch.Generator
) -> tuple[Linear, int] | None:
    """Symmetric int8 weights with a scale per output channel, activations quantized per token
    in every call, as vLLM's ``CPUScaledMMLinearKernel`` runs them: its SGL kernel where vLLM
    picks it (x86 with AMX, ``check_cpu_sgl_kernel``), else oneDNN's int8 GEMM."""
    from vllm.model_executor.layers.utils import check_cpu_sgl_kernel

    weight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8)
    scales = torch.rand((out_features, 1), generator=generator) * 1e-2
    nbytes = weight.numel() + scales.numel() * scales.element_size()
    if check_cpu_sgl_kernel(out_features, in_features, torch.int8):
        packed = torch.ops._C.convert_weight_packed(weight)

        def sgl(x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = torch.ops._C.int8_scaled_mm_with_quant(
                x, packed, scales, None, x.dtype, True
            )
            return out

        return sgl, nbytes
    columns = weight.t()
    adjust = columns.sum(dim=0, keepdim=True, dtype=torch.float32) * scales.squeeze()
    try:
        handler = ops.create_onednn_scaled_mm(columns, scales, dtype, True, False, 32)
    except RuntimeError:
        return None

    def onednn(x: torch.Tensor) -> torch.Tensor:
        q, x_scales, x_zero = ops.onednn_scaled_int8_quant(x, None, None, True)
        out = torch.empty((x.shape[0], out_features), dtype=x.dtype)
        result: torch.Tensor = ops.onednn_scaled_mm(handler, q, out, x_scales, x_zero, adjust, None)
        return result

    return onednn, nbytes
