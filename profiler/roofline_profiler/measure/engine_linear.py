"""Linear layers as serving engines run them: on a CPU, weights packed once for oneDNN.

A serving engine prepares its weights once, at load time, for the GEMM library it calls: vLLM's
CPU build wraps each unquantized linear layer's weight in a oneDNN matmul handle with the weight
reordered to oneDNN's blocked layout (``create_onednn_mm``), and ``torch.compile`` with freezing
does the same for torch's own oneDNN linear (``mkldnn._reorder_linear_weight``). Eager
``F.linear`` on a CPU takes the plain row-major weight at every call; for bf16 its batch-1 path
is a matrix-vector product that streamed a decode step's weights slower than at batch 2
(so a plan timed with it predicted batch 1 slower than batch 2, which no engine shows).

So on a CPU the profiler times its GEMMs the engine's way, through torch's oneDNN linear on a
weight packed once (the same library and layout vLLM uses; torch ships it, so no engine is
needed on the profiled node). Where torch cannot pack (a GPU, whose engines call cuBLAS through
``F.linear`` as the profiler does; a CPU build without oneDNN; a dtype oneDNN cannot run on this
CPU) the plain ``F.linear`` is the engine's path too, and is used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: What :func:`linear_kind` reports, recorded in the result's model measurements.
PACKED = "onednn-packed"
PLAIN = "torch-linear"


class EngineLinear:
    """One linear layer's weight, prepared once as the device's engines prepare it."""

    def __init__(self, weight: torch.Tensor, packed: bool) -> None:
        self.weight = weight
        self.packed = packed

    @classmethod
    def prepare(cls, weight: torch.Tensor) -> EngineLinear:
        """``weight`` (``[out, in]``) packed for oneDNN where the device's engines do so."""
        if not packs(weight.device, weight.dtype):
            return cls(weight, packed=False)
        return cls(torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 1), packed=True)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, bias, "none", [], "")
        return F.linear(x, self.weight, bias)

    def nbytes(self) -> int:
        return int(self.weight.numel() * self.weight.element_size())


_SUPPORT: dict[torch.dtype, bool] = {}


def packs(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether weights of ``dtype`` on ``device`` are timed packed for oneDNN: on a CPU whose
    torch has oneDNN and can run a packed linear of that dtype (checked once per dtype against
    ``F.linear`` on a small product)."""
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if dtype not in _SUPPORT:
        _SUPPORT[dtype] = _packed_linear_works(dtype)
    return _SUPPORT[dtype]


def _packed_linear_works(dtype: torch.dtype) -> bool:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 32, generator=generator).to(dtype)
    x = torch.randn(2, 32, generator=generator).to(dtype)
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
        y = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
    except (RuntimeError, NotImplementedError):
        return False
    expected = F.linear(x.float(), weight.float())
    return bool(torch.allclose(y.float(), expected, rtol=0.05, atol=0.05))


def linear_kind(device: torch.device, dtype: torch.dtype) -> str:
    """How the GEMMs of a model's step are timed on ``device`` in ``dtype``."""
    return PACKED if packs(device, dtype) else PLAIN
