"""Linear layers timed as engines run them: packed once for oneDNN on a CPU, plain elsewhere."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from roofline_profiler.measure import engine_linear
from roofline_profiler.measure.engine_linear import (
    PACKED,
    PLAIN,
    VLLM_LINEAR,
    EngineLinear,
    linear_kind,
    packs,
)
from tests.host_cpu import cpu_flags

CPU = torch.device("cpu")


def onednn_packs_bf16() -> bool:
    """Whether this CPU has what oneDNN's packed bf16 linear asks for (its own refusal names it:
    AVX-512 BW, VL and DQ, or AVX-NE-CONVERT); an AVX2-only CPU has neither, and its bf16 GEMMs
    are timed plain. The CPU's flags, read apart from the profiler's own trial product."""
    flags = cpu_flags()
    if flags is None:
        pytest.skip("no x86 flags in /proc/cpuinfo to say what oneDNN's bf16 path needs")
    return {"avx512bw", "avx512vl", "avx512dq"} <= flags or "avx_ne_convert" in flags


def packed_kind(dtype: torch.dtype) -> str:
    """How a GEMM of ``dtype`` is timed on this CPU: packed in float32 always, in bf16 where
    oneDNN can (:func:`onednn_packs_bf16`)."""
    return PACKED if dtype == torch.float32 or onednn_packs_bf16() else PLAIN


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("batch", [1, 2, 7])
def test_a_packed_linear_computes_what_the_plain_one_does(dtype: torch.dtype, batch: int) -> None:
    weight = torch.randn(96, 40).to(dtype)
    bias = torch.randn(96).to(dtype)
    x = torch.randn(batch, 40).to(dtype)
    layer = EngineLinear.prepare(weight)
    assert layer.packed is (packed_kind(dtype) == PACKED)
    assert layer.nbytes() == weight.numel() * weight.element_size()
    expected = F.linear(x.float(), weight.float(), bias.float())
    assert torch.allclose(layer(x, bias).float(), expected, rtol=0.03, atol=0.1)


def test_a_cpu_with_onednn_times_fp32_gemms_packed_and_bf16_ones_where_its_isa_allows() -> None:
    assert torch.backends.mkldnn.is_available()
    assert linear_kind(CPU, torch.float32) == PACKED
    assert linear_kind(CPU, torch.bfloat16) == packed_kind(torch.bfloat16)


def test_where_torch_cannot_pack_the_plain_linear_is_the_engines_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not packs(torch.device("meta"), torch.bfloat16)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert linear_kind(CPU, torch.bfloat16) == PLAIN
    layer = EngineLinear.prepare(torch.randn(8, 4))
    assert not layer.packed
    assert layer(torch.ones(1, 4)).shape == (1, 8)


def test_without_vllm_asking_for_its_gemms_gives_torchs_packed_linear() -> None:
    assert engine_linear.vllm_linear_kernel() is None  # not in the project's environment
    assert linear_kind(CPU, torch.bfloat16, VLLM_LINEAR) == packed_kind(torch.bfloat16)
    layer = EngineLinear.prepare(torch.randn(8, 4), VLLM_LINEAR)
    assert layer.packed
    assert layer(torch.ones(1, 4)).shape == (1, 8)


def test_beside_vllm_each_weight_is_prepared_by_vllms_own_dispatch_and_called_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM's dispatch gets a module holding the weight, removes the weight as it does at load
    time, and leaves its GEMM as ``cpu_linear``; the profiler then calls only that."""
    calls: list[tuple[int, ...]] = []

    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        weight = layer.weight.detach().clone()
        assert remove_weight
        layer.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)

        def gemm(x: torch.Tensor, _: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
            calls.append(tuple(x.shape))
            return F.linear(x, weight, bias)

        layer.cpu_linear = gemm

    monkeypatch.setattr(engine_linear, "_vllm_dispatch", lambda: (dispatch, "9.9.9"))
    weight, x = torch.randn(12, 5), torch.randn(3, 5)
    layer = EngineLinear.prepare(weight, VLLM_LINEAR)
    torch.testing.assert_close(layer(x), F.linear(x, weight))
    assert calls == [(3, 5)]
    assert layer.nbytes() == weight.numel() * weight.element_size()
    assert linear_kind(CPU, torch.bfloat16, VLLM_LINEAR) == "vllm-cpu-9.9.9"
    assert linear_kind(torch.device("meta"), torch.bfloat16, VLLM_LINEAR) == PLAIN
