"""Measure the parts of prefill (``core/prefill_parts``) on the device, as the engine runs them.

* **Layer bodies at prompt-chunk sizes**: the same body the decode batches time (``model_measure``:
  the engine's GEMM path, norms, rotary, the KV write), with a chunk's tokens as its rows, and on a
  CPU its glue alone; a chunk is a batch of tokens to every part but attention.
* **Prefill attention at prompt lengths**: one sequence's whole prompt at once, causal, through
  the source that stands for the engine's kernel (``measure_settings.attention``): vLLM's CPU
  kernel (``cpu_attention_with_kv_cache``, the prompt as a query of its length over its own paged
  KV, as vLLM's CPU backend calls it for a prefill), torch's causal attention on a GPU, else the
  device's roofline: the causal FLOPs at the peak or the KV bytes at the read bandwidth, whichever
  takes longer, labelled ``roofline``.

Prefill is compute-bound (a chunk of a few hundred tokens is far right of the ridge), so no copies
of the weights or the KV are rotated to defeat caches beyond what the bodies already do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F

from roofline_profiler.core.decode_model import AttentionRoofline
from roofline_profiler.core.models import heads_per_gpu
from roofline_profiler.core.prefill_parts import (
    PREFILL_ROOFLINE,
    PrefillAttentionTime,
    PrefillMeasurements,
    PrefillTokensTime,
    causal_pairs,
)
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.core.weight_formats import kv_cache_element_bytes
from roofline_profiler.measure.attention_measure import (
    VLLM_BLOCK_TOKENS,
    _vllm_ops,
    kv_cache_arguments,
    paged_cache,
    vllm_attention_kernel,
)
from roofline_profiler.measure.component_timing import Part, time_parts
from roofline_profiler.measure.decode_layer import LayerShapes, random_tensor
from roofline_profiler.measure.devices import DTYPES, DeviceInfo
from roofline_profiler.measure.measure_settings import (
    TORCH_ATTENTION,
    VLLM_ATTENTION,
    MeasureSettings,
    Progress,
)
from roofline_profiler.measure.model_measure import Bodies, measure_layer_bodies

#: Default prompt-chunk sizes (tokens) and prompt lengths; capped at the step's token budget.
CHUNK_TOKENS = (16, 64, 256, 1024, 2048)
PROMPT_TOKENS = (128, 512, 2048)
QUICK_CHUNK_TOKENS = (64, 512)
QUICK_PROMPT_TOKENS = (256, 1024)


def prefill_sizes(quick: bool, budget: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The chunk sizes (up to the step's token budget, which is timed too) and prompt lengths."""
    chunks = QUICK_CHUNK_TOKENS if quick else CHUNK_TOKENS
    prompts = QUICK_PROMPT_TOKENS if quick else PROMPT_TOKENS
    return tuple(sorted({c for c in chunks if c < budget} | {budget})), prompts


def measure_prefill(
    settings: MeasureSettings,
    info: DeviceInfo,
    progress: Progress,
    notes: list[str] | None = None,
) -> PrefillMeasurements | None:
    """The prefill parts of ``settings``' model; None where no chunk sizes were asked for."""
    if not settings.chunk_tokens or not settings.prompt_tokens:
        return None
    bodies, glue = measure_layer_bodies(
        replace(settings, batches=settings.chunk_tokens), info, progress, notes
    )
    attention, source = _prefill_attention(settings, info, progress, notes)

    def tokens(times: Bodies) -> dict[str, tuple[PrefillTokensTime, ...]]:
        return {
            kind: tuple(PrefillTokensTime(t.batch, t.seconds, t.measurement) for t in ts)
            for kind, ts in times.items()
        }

    return PrefillMeasurements(tokens(bodies), attention, source, tokens(glue))


def _prefill_attention(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress, notes: list[str] | None
) -> tuple[tuple[PrefillAttentionTime, ...], str]:
    roofline = settings.attention_roofline
    if settings.attention == VLLM_ATTENTION:
        runs = [_vllm_prefill(settings, info, p) for p in settings.prompt_tokens]
        source = vllm_attention_kernel() or VLLM_ATTENTION
    elif settings.attention == TORCH_ATTENTION:
        runs = [_torch_prefill(settings, info, p) for p in settings.prompt_tokens]
        source = "torch-sdpa"
    else:
        if roofline is None:
            raise ValueError("attention from the roofline needs the roofline's numbers")
        return tuple(
            PrefillAttentionTime(p, prefill_roofline_seconds(roofline, settings, p))
            for p in settings.prompt_tokens
        ), PREFILL_ROOFLINE
    parts = [
        Part(p, f"{settings.arch.name} prefill attention P={p}", run)
        for p, run in zip(settings.prompt_tokens, runs, strict=True)
    ]
    measured = time_parts(parts, settings.quick, info.device, progress, notes)
    return tuple(
        PrefillAttentionTime(p.batch, m.quiet_median, m)
        for p, m in zip(parts, measured, strict=True)
    ), source


def prefill_roofline_seconds(
    roofline: AttentionRoofline, settings: MeasureSettings, p: int
) -> float:
    """One layer's causal attention over a ``p``-token prompt from the device's roofline: QKᵀ and
    PV over the causal pairs (4·heads·head_dim FLOPs a pair) at the peak, or the prompt's K and V
    at the read bandwidth, whichever takes longer."""
    arch = settings.arch
    q_heads, kv_heads = heads_per_gpu(arch, settings.tensor_parallel)
    flops = 4 * q_heads * arch.head_dim * causal_pairs(p, 0)
    cached = kv_cache_element_bytes(arch.kv_cache_dtype, dtype_bytes(settings.dtype))
    kv_bytes = 2 * p * kv_heads * arch.head_dim * cached
    return max(flops / roofline.peak_flops_per_second, kv_bytes / roofline.read_bytes_per_second)


def _torch_prefill(settings: MeasureSettings, info: DeviceInfo, p: int) -> Callable[[int], object]:
    s = LayerShapes.of(settings.arch, settings.tensor_parallel)
    dtype, device = DTYPES[settings.dtype], info.device
    query = random_tensor((1, s.q_heads, p, s.head_dim), dtype, device)
    keys = random_tensor((1, s.kv_heads, p, s.head_dim), dtype, device)
    values = random_tensor((1, s.kv_heads, p, s.head_dim), dtype, device)

    def run(_: int) -> object:
        with torch.no_grad():
            return F.scaled_dot_product_attention(
                query, keys, values, is_causal=True, scale=s.head_dim**-0.5,
                enable_gqa=s.q_heads != s.kv_heads,
            )  # fmt: skip

    return run


def _vllm_prefill(settings: MeasureSettings, info: DeviceInfo, p: int) -> Callable[[int], object]:
    loaded = _vllm_ops()
    if loaded is None:
        raise RuntimeError("vLLM's CPU attention kernel cannot be imported here")
    ops, choose_isa, _ = loaded
    s = LayerShapes.of(settings.arch, settings.tensor_parallel)
    dtype = DTYPES[settings.dtype]
    blocks = -(-p // VLLM_BLOCK_TOKENS)
    kv_dtype = settings.arch.kv_cache_dtype
    shape = (blocks, s.kv_heads, 2 * VLLM_BLOCK_TOKENS, s.head_dim)
    cache, isa = paged_cache(shape, dtype, kv_dtype, info.device, choose_isa)
    fp8 = kv_cache_arguments(kv_dtype)
    keys, values = cache.chunk(2, dim=2)
    query = random_tensor((p, s.q_heads, s.head_dim), dtype, info.device)
    out = torch.empty_like(query)
    lengths = torch.tensor([p], dtype=torch.int32)
    starts = torch.tensor([0, p], dtype=torch.int32)
    table = torch.arange(blocks, dtype=torch.int32)[None, :]
    schedule = ops.cpu_attn_get_scheduler_metadata(
        num_reqs=1, num_heads=s.q_heads, num_kv_heads=s.kv_heads, head_dim=s.head_dim,
        seq_lens=lengths, dtype=dtype, query_start_loc=starts, causal=True,
        sliding_window_size=-1, isa=isa, enable_kv_split=True, **fp8,
    )  # fmt: skip

    def run(_: int) -> object:
        ops.cpu_attention_with_kv_cache(
            query=query, key_cache=keys, value_cache=values, output=out,
            query_start_loc=starts, seq_lens=lengths, scale=s.head_dim**-0.5, causal=True,
            alibi_slopes=None, sliding_window=-1, block_table=table, softcap=0.0,
            scheduler_metadata=schedule, s_aux=None, **fp8,
        )  # fmt: skip
        return out

    return run
