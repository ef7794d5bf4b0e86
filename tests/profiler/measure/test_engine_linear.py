"""Linear layers timed as engines run them: packed once for oneDNN on a CPU, plain elsewhere."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from roofline_profiler.measure.engine_linear import (
    PACKED,
    PLAIN,
    EngineLinear,
    linear_kind,
    packs,
)

CPU = torch.device("cpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("batch", [1, 2, 7])
def test_a_packed_linear_computes_what_the_plain_one_does(dtype: torch.dtype, batch: int) -> None:
    weight = torch.randn(96, 40).to(dtype)
    bias = torch.randn(96).to(dtype)
    x = torch.randn(batch, 40).to(dtype)
    layer = EngineLinear.prepare(weight)
    assert layer.packed
    assert layer.nbytes() == weight.numel() * weight.element_size()
    expected = F.linear(x.float(), weight.float(), bias.float())
    assert torch.allclose(layer(x, bias).float(), expected, rtol=0.03, atol=0.1)


def test_a_cpu_with_onednn_times_fp32_and_bf16_gemms_packed() -> None:
    assert torch.backends.mkldnn.is_available()
    assert linear_kind(CPU, torch.float32) == PACKED
    assert linear_kind(CPU, torch.bfloat16) == PACKED


def test_where_torch_cannot_pack_the_plain_linear_is_the_engines_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not packs(torch.device("meta"), torch.bfloat16)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert linear_kind(CPU, torch.bfloat16) == PLAIN
    layer = EngineLinear.prepare(torch.randn(8, 4))
    assert not layer.packed
    assert layer(torch.ones(1, 4)).shape == (1, 8)
