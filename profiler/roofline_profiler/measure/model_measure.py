"""Measure the parts of a model's decode step on the device, as the real model runs them.

Timing the GEMMs of a decode step one by one, each on a weight that stays in the cache, is not a
decode step: on a CPU the sum of such timings was half the real step. So the parts timed here are
whole pieces of the step built from the same torch operations an inference engine (or Hugging
Face ``transformers``) runs, at the model's real shapes, with the weights streamed from memory:

* **layer body**, per batch: RMSNorm, the fused qkv GEMM (with bias and per-head q/k norm where
  the model has them), rotary embedding, the KV-cache write of the new token, the o GEMM and
  residual add, RMSNorm, then the MLP (fused gate_up, SiLU·mul, down) or the mixture of experts
  (router GEMM, softmax/top-k, then per active expert: gather its tokens, gate_up, SiLU·mul,
  down, weight and scatter-add). Everything of a decoder layer except the attention kernel.
* **attention**, per batch and context: scaled-dot-product attention of one query token per
  sequence over a ``[B, n_kv, C, head_dim]`` KV cache, grouped-query heads packed as
  ``transformers`` and the engines' decode kernels do (each KV head read once for its group).
* **head**, per batch: the embedding lookup, the final RMSNorm and the lm_head GEMM.

Caches are defeated the way the GEMM sweep does it: enough copies of a layer's weights are rotated
that between two uses of one copy the step touches several times the device's cache; a mixture of
experts also rotates which experts are active, so a small batch never re-reads experts that are
still cached. KV caches are sliced from a buffer several times the cache, one slice per run. As in
the sweep, the batches of a part share one rotation (and attention one walk through its buffer):
the batches are timed one after another, and a batch rotating on its own would start on the copy
the batch before it had just read.

Economy (the measurements must fit a profile's time budget on a CPU too):

* The lm_head is timed on a slice of its rows (at least twice the cache and 256 MiB) and scaled by
  rows: its time is proportional to the rows it reads while bandwidth-bound and to its FLOPs when
  compute-bound, both linear in rows. The slice is the whole matrix whenever that is smaller.
* Attention is timed for every batch whose KV cache fits a share of the device's memory; larger
  batches are extrapolated in proportion to the batch from the largest one timed (decode
  attention of different sequences is independent work; the result marks them extrapolated).
* Batches are timed in interleaved passes, and a run that takes long (a compute-bound batch of
  a large model) is repeated only once per pass (``component_timing``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from roofline_profiler.core.decode_model import (
    AttentionTime,
    ComponentTime,
    ModelMeasurements,
    layer_kinds,
)
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.models import attended_tokens, weight_bytes
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.measure.component_timing import Part, time_parts
from roofline_profiler.measure.decode_layer import (
    DecoderLayer,
    LayerShapes,
    Routing,
    StepState,
    random_tensor,
    rms_norm,
    rotary_tables,
)
from roofline_profiler.measure.devices import DTYPES, DeviceInfo

#: Between two uses of one weight copy (or KV slice) the runs touch this many caches' worth.
CACHE_MULTIPLE = 4
#: Weight copies and KV buffers together may take at most this share of the device's memory.
MEMORY_FRACTION = 0.25
#: The lm_head slice: at least this many bytes (and the cache), or the whole matrix.
MIN_HEAD_SLICE_BYTES = 128 << 20
#: The KV buffer attention slices from: at least CACHE_MULTIPLE caches, at most this (or the
#: memory share), unless one sequence needs more.
MAX_KV_BUFFER_BYTES = 2 << 30
#: Fallback when the device does not report its memory.
UNKNOWN_MEMORY_BYTES = 16 << 30


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


def _memory_budget(info: DeviceInfo) -> int:
    return int((info.memory_bytes or UNKNOWN_MEMORY_BYTES) * MEMORY_FRACTION)


def _evicting_bytes(settings: MeasureSettings, info: DeviceInfo) -> int:
    """Bytes the runs must touch between two uses of one weight copy or KV slice.

    :data:`CACHE_MULTIPLE` caches, unless the real step touches less than that between two
    uses of one layer (the whole model's weights): a model that fits the cache is served from
    it in a real decode too, and is measured so.
    """
    model = weight_bytes(settings.arch, dtype_bytes(settings.dtype), settings.tensor_parallel)
    return min(CACHE_MULTIPLE * info.cache_bytes, model)


def _layer_copies(settings: MeasureSettings, info: DeviceInfo, layer_bytes: int) -> int:
    wanted = max(1, math.ceil(_evicting_bytes(settings, info) / max(1, layer_bytes)))
    affordable = max(1, _memory_budget(info) // max(1, layer_bytes))
    return min(wanted, affordable)


def measure_layer_bodies(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress, notes: list[str] | None = None
) -> dict[str, tuple[ComponentTime, ...]]:
    """The layer body (everything but the attention kernel) per layer kind and batch."""
    arch, tp = settings.arch, settings.tensor_parallel
    dtype, device = DTYPES[settings.dtype], info.device
    shapes = LayerShapes.of(arch, tp)
    results: dict[str, tuple[ComponentTime, ...]] = {}
    for kind in layer_kinds(arch):
        first = DecoderLayer(arch, shapes, kind, dtype, device)
        copies = [first] + [
            DecoderLayer(arch, shapes, kind, dtype, device)
            for _ in range(_layer_copies(settings, info, first.nbytes()) - 1)
        ]
        turn = itertools.count()  # one rotation of the copies for every batch
        parts = [
            Part(
                batch,
                f"{arch.name} {kind} layer B={batch}",
                *_body_run(copies, turn, batch, settings, info),
            )
            for batch in settings.batches
        ]
        measured = time_parts(parts, settings.quick, device, progress, notes)
        results[kind] = tuple(
            ComponentTime(p.batch, m.median, m) for p, m in zip(parts, measured, strict=True)
        )
        del copies, first, parts
    return results


def _body_run(
    copies: list[DecoderLayer],
    turn: Iterator[int],
    batch: int,
    settings: MeasureSettings,
    info: DeviceInfo,
) -> tuple[Callable[[int], object], int]:
    """A run of the layer body at ``batch`` and the runs after which its inputs repeat."""
    arch, device, kind = settings.arch, info.device, copies[0].kind
    dtype = DTYPES[settings.dtype]
    s = copies[0].shapes
    positions = torch.full((batch,), 1000, dtype=torch.long, device=device)
    cos, sin = rotary_tables(positions, s.head_dim, dtype)
    rounds = max(1, len(copies))
    if kind == "moe":
        # Rotate the routing too: with a single copy, successive runs read other experts.
        rounds = max(rounds, math.ceil(arch.num_experts / max(1, arch.experts_per_token)))
    states = []
    inputs = []
    for r in range(rounds):
        routing = None
        if kind == "moe":
            routing = Routing.build(
                arch.num_experts, arch.experts_per_token, batch, seed=r, device=device
            )
        states.append(
            StepState(
                cos=cos,
                sin=sin,
                k_slot=torch.empty((batch, s.kv_heads, s.head_dim), dtype=dtype, device=device),
                v_slot=torch.empty((batch, s.kv_heads, s.head_dim), dtype=dtype, device=device),
                attention_out=random_tensor((batch, s.q_heads * s.head_dim), dtype, device),
                routing=routing,
            )
        )
        inputs.append(random_tensor((batch, s.hidden), dtype, device))

    def run(i: int) -> object:
        with torch.no_grad():
            layer = copies[next(turn) % len(copies)]
            return layer.forward(inputs[i % rounds], states[i % rounds])

    return run, rounds


def measure_head(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress, notes: list[str] | None = None
) -> tuple[tuple[ComponentTime, ...], float]:
    """Embedding lookup, final RMSNorm and lm_head per batch; returns the times scaled to the
    whole vocabulary and the scale (rows of the whole head ÷ rows timed)."""
    arch, tp, device = settings.arch, settings.tensor_parallel, info.device
    dtype = DTYPES[settings.dtype]
    element = dtype_bytes(settings.dtype)
    hidden = arch.hidden_size
    rows = -(-(math.ceil(arch.vocab_size / 64) * 64) // tp)
    slice_bytes = max(info.cache_bytes, MIN_HEAD_SLICE_BYTES)
    timed_rows = min(rows, max(1, slice_bytes // (hidden * element)))
    scale = rows / timed_rows
    copies = 1 if timed_rows == rows else 2
    tables = [random_tensor((timed_rows, hidden), dtype, device) for _ in range(copies)]
    norm = torch.ones(hidden, dtype=dtype, device=device)
    turn = itertools.count()
    parts = []
    for batch in settings.batches:
        ids = torch.randint(0, timed_rows, (batch,), device=device)

        def run(_: int, ids: torch.Tensor = ids) -> object:
            table = tables[next(turn) % copies]
            with torch.no_grad():
                x = table.index_select(0, ids)
                return F.linear(rms_norm(x, norm), table)

        parts.append(Part(batch, f"{arch.name} lm_head B={batch}", run, period=copies))
    measured = time_parts(parts, settings.quick, device, progress, notes)
    times = tuple(
        ComponentTime(p.batch, m.median * scale, m) for p, m in zip(parts, measured, strict=True)
    )
    return times, scale


def measure_attention(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress, notes: list[str] | None = None
) -> tuple[AttentionTime, ...]:
    """Decode attention per context and batch; batches whose KV does not fit the buffer are
    extrapolated in proportion to the batch from the largest batch timed."""
    results: list[AttentionTime] = []
    for context in settings.contexts:
        results.extend(_attention_at(settings, info, context, progress, notes))
    return tuple(results)


def _kv_sequences(settings: MeasureSettings, info: DeviceInfo, per_sequence: int) -> int:
    """Sequences of KV cache in the measuring buffer: enough for the largest batch, at least
    :data:`CACHE_MULTIPLE` caches, within the memory share (and, on CPUs, the buffer cap)."""
    cap = _memory_budget(info)
    if info.backend not in ("cuda", "rocm"):
        # Filling memory costs a CPU seconds per gigabyte: extrapolate the largest batches instead.
        cap = min(cap, max(CACHE_MULTIPLE * info.cache_bytes, MAX_KV_BUFFER_BYTES))
    wanted = max(max(settings.batches) * per_sequence, _evicting_bytes(settings, info))
    return max(1, min(cap, wanted) // per_sequence)


def _attention_period(
    settings: MeasureSettings, info: DeviceInfo, batch: int, per_sequence: int, sequences: int
) -> int:
    """Runs of one batch after which attention reads the same KV slices again: enough that
    they touch the evicting bytes, within the buffer."""
    evicting = _evicting_bytes(settings, info)
    return max(1, min(sequences // batch, math.ceil(evicting / (batch * per_sequence))))


def _attention_at(
    settings: MeasureSettings,
    info: DeviceInfo,
    context: int,
    progress: Progress,
    notes: list[str] | None = None,
) -> list[AttentionTime]:
    arch, device = settings.arch, info.device
    dtype = DTYPES[settings.dtype]
    s = LayerShapes.of(arch, settings.tensor_parallel)
    group = s.q_heads // s.kv_heads
    tokens = attended_tokens(arch, context)
    per_sequence = 2 * s.kv_heads * tokens * s.head_dim * dtype_bytes(settings.dtype)
    sequences = _kv_sequences(settings, info, per_sequence)
    cache = _KvCache(
        keys=random_tensor((sequences, s.kv_heads, tokens, s.head_dim), dtype, device),
        values=random_tensor((sequences, s.kv_heads, tokens, s.head_dim), dtype, device),
        scale=s.head_dim**-0.5,
    )
    timed = [b for b in settings.batches if b <= sequences] or [min(settings.batches)]
    parts = []
    for batch in timed:
        query = random_tensor((batch, s.kv_heads, group, s.head_dim), dtype, device)
        run = cache.attention(query, _cpu_mask(device, batch, tokens))
        period = _attention_period(settings, info, batch, per_sequence, sequences)
        parts.append(Part(batch, f"{arch.name} attention B={batch} C={context}", run, period))
    measured = time_parts(parts, settings.quick, device, progress, notes)
    results = [
        AttentionTime(p.batch, context, m.median, False, m)
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
    """The KV cache every timed batch's attention reads: each run the sequences after the previous
    run's, whichever batch that was, so no run finds the keys and values the one before it left
    in a cache."""

    keys: torch.Tensor
    values: torch.Tensor
    scale: float
    #: The first sequence the next run reads.
    cursor: int = 0

    def attention(self, query: torch.Tensor, valid: torch.Tensor | None) -> Callable[[int], object]:
        """A run of decode attention for ``query``'s batch (its first dimension)."""
        batch, sequences = query.shape[0], self.keys.shape[0]

        def run(_: int) -> object:
            j = self.cursor if self.cursor + batch <= sequences else 0
            self.cursor = j + batch
            with torch.no_grad():
                return F.scaled_dot_product_attention(
                    query,
                    self.keys[j : j + batch],
                    self.values[j : j + batch],
                    attn_mask=valid,
                    scale=self.scale,
                )

        return run


def _cpu_mask(device: torch.device, batch: int, tokens: int) -> torch.Tensor | None:
    """On CPUs, every position valid in a boolean mask, as a static or padded cache passes it
    (transformers' decode does), which also selects the CPU kernel that serves a grouped query
    well; GPU engines' paged kernels take sequence lengths instead: no mask."""
    if device.type != "cpu":
        return None
    return torch.ones((batch, 1, 1, tokens), dtype=torch.bool, device=device)


def measure_model(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress
) -> ModelMeasurements:
    """Every measured part of one model's decode step on one device."""
    notes: list[str] = []
    bodies = measure_layer_bodies(settings, info, progress, notes)
    head, head_scale = measure_head(settings, info, progress, notes)
    attention = measure_attention(settings, info, progress, notes)
    return ModelMeasurements(
        arch=settings.arch,
        dtype=settings.dtype,
        tensor_parallel=settings.tensor_parallel,
        layer_bodies=bodies,
        head=head,
        head_scale=head_scale,
        attention=attention,
        all_reduce=(),
        all_reduce_measured=settings.tensor_parallel == 1,
        notes=tuple(notes),
    )
