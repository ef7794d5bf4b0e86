"""What the measurement of one model's decode-step parts asks for, and the memory it may use.

Shared by the layer bodies and the head (``model_measure``) and attention (``attention_measure``):
between two uses of one weight copy or KV slice the runs touch several times the device's cache,
within a share of its memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from roofline_profiler.core.decode_model import AttentionRoofline
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.models import weight_bytes
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.measure.devices import DeviceInfo

#: Between two uses of one weight copy (or KV slice) the runs touch this many caches' worth.
CACHE_MULTIPLE = 4
#: Weight copies and KV buffers together may take at most this share of the device's memory.
MEMORY_FRACTION = 0.25
#: The KV buffer attention slices from: at least CACHE_MULTIPLE caches, at most this (or the
#: memory share), unless one sequence needs more.
MAX_KV_BUFFER_BYTES = 2 << 30
#: Fallback when the device does not report its memory.
UNKNOWN_MEMORY_BYTES = 16 << 30

#: Where a step's attention comes from (``MeasureSettings.attention``).
TORCH_ATTENTION = "torch"
VLLM_ATTENTION = "vllm"
ROOFLINE_ATTENTION = "roofline"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MeasureSettings:
    """What to measure for one model on one device."""

    arch: ModelArch
    dtype: str
    tensor_parallel: int
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    quick: bool
    #: ``torch``: torch's scaled-dot-product attention timed (GPUs: the engines' kernels);
    #: ``vllm``: vLLM's own CPU decode kernel timed (``vllm_attention``); ``roofline``: not timed,
    #: :attr:`attention_roofline` instead.
    attention: str = TORCH_ATTENTION
    attention_roofline: AttentionRoofline | None = None
    #: ``torch`` or ``vllm``: where the GEMMs come from (``engine_linear``).
    linear: str = "torch"
    #: Tokens of the prompt chunks the layer bodies are timed at, and the prompt lengths prefill
    #: attention is timed at (``prefill_measure``); empty: prefill is not measured.
    chunk_tokens: tuple[int, ...] = ()
    prompt_tokens: tuple[int, ...] = ()


def memory_budget(info: DeviceInfo) -> int:
    return int((info.memory_bytes or UNKNOWN_MEMORY_BYTES) * MEMORY_FRACTION)


def evicting_bytes(settings: MeasureSettings, info: DeviceInfo) -> int:
    """Bytes the runs must touch between two uses of one weight copy or KV slice.

    :data:`CACHE_MULTIPLE` caches, unless the real step touches less than that between two
    uses of one layer (the whole model's weights): a model that fits the cache is served from
    it in a real decode too, and is measured so.
    """
    model = weight_bytes(settings.arch, dtype_bytes(settings.dtype), settings.tensor_parallel)
    return min(CACHE_MULTIPLE * info.cache_bytes, model)
