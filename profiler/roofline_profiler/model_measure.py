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
still cached. KV caches are sliced from a buffer several times the cache, one slice per run.

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

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from roofline_profiler.component_timing import Part, time_parts
from roofline_profiler.decode_model import (
    AttentionTime,
    ComponentTime,
    ModelMeasurements,
    layer_kinds,
)
from roofline_profiler.devices import DTYPES, DeviceInfo
from roofline_profiler.models import (
    ModelArch,
    attended_tokens,
    weight_bytes,
)
from roofline_profiler.roofline import dtype_bytes

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
RMS_EPS = 1e-6
ROPE_THETA = 10000.0


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


#: Elements of the random block that larger tensors are tiled from.
_PATTERN_ELEMENTS = 1 << 16


def _random(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Small random normal values (never zeros), tiled from one random block.

    Filling gigabytes with fresh random numbers takes seconds on a CPU; what the measurements
    need is distinct memory with realistic values, and a tiled block gives that at copy speed.
    """
    out = torch.empty(*shape, dtype=dtype, device=device)
    flat = out.view(-1)
    n = flat.numel()
    block = min(n, _PATTERN_ELEMENTS)
    if block == 0:
        return out
    pattern = torch.randn(block, device=device, dtype=torch.float32).mul_(0.05).to(dtype)
    whole = n // block
    if whole:
        flat[: whole * block].view(whole, block).copy_(pattern.expand(whole, block))
    if n - whole * block:
        flat[whole * block :].copy_(pattern[: n - whole * block])
    return out


def _memory_budget(info: DeviceInfo) -> int:
    return int((info.memory_bytes or UNKNOWN_MEMORY_BYTES) * MEMORY_FRACTION)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Llama's RMSNorm: statistics in float32, scaled in the model's dtype."""
    dtype = x.dtype
    x32 = x.to(torch.float32)
    variance = x32.pow(2).mean(-1, keepdim=True)
    return weight * (x32 * torch.rsqrt(variance + RMS_EPS)).to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


def rotary_tables(
    positions: torch.Tensor, head_dim: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each sequence's position, ``[B, 1, head_dim]`` (once per step)."""
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, device=positions.device) / head_dim))
    freqs = positions.to(torch.float32)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]
    return emb.cos().to(dtype), emb.sin().to(dtype)


@dataclass(frozen=True)
class _Shapes:
    """Per-device shapes of one layer under tensor parallelism (engines' sharding)."""

    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    inter: int
    expert_inter: int
    shared_inter: int

    @classmethod
    def of(cls, arch: ModelArch, tp: int) -> _Shapes:
        return cls(
            hidden=arch.hidden_size,
            q_heads=arch.num_heads // tp,
            kv_heads=max(1, arch.num_kv_heads // tp),
            head_dim=arch.head_dim,
            inter=-(-arch.intermediate_size // tp),
            expert_inter=-(-arch.moe_intermediate_size // tp),
            shared_inter=-(-arch.shared_expert_intermediate_size // tp),
        )


class _Layer:
    """One copy of a decoder layer's weights, and its forward pass without the attention kernel."""

    def __init__(
        self, arch: ModelArch, shapes: _Shapes, kind: str, dtype: torch.dtype, device: torch.device
    ) -> None:
        s, h, hd = shapes, shapes.hidden, shapes.head_dim
        self.arch, self.shapes, self.kind = arch, shapes, kind
        self.grouped = True
        qkv = (s.q_heads + 2 * s.kv_heads) * hd
        self.norm_in = torch.ones(h, dtype=dtype, device=device)
        self.norm_post = torch.ones(h, dtype=dtype, device=device)
        self.qkv = _random((qkv, h), dtype, device)
        self.qkv_bias = _random((qkv,), dtype, device) if arch.attention_bias else None
        self.q_norm = torch.ones(hd, dtype=dtype, device=device) if arch.qk_norm else None
        self.k_norm = torch.ones(hd, dtype=dtype, device=device) if arch.qk_norm else None
        self.o = _random((h, s.q_heads * hd), dtype, device)
        if kind == "dense":
            self.gate_up = _random((2 * s.inter, h), dtype, device)
            self.down = _random((h, s.inter), dtype, device)
        else:
            e = arch.num_experts
            self.router = _random((e, h), dtype, device)
            self.experts_gate_up = _random((e, 2 * s.expert_inter, h), dtype, device)
            self.experts_down = _random((e, h, s.expert_inter), dtype, device)
            if s.shared_inter:
                self.shared_gate_up = _random((2 * s.shared_inter, h), dtype, device)
                self.shared_down = _random((h, s.shared_inter), dtype, device)
                self.shared_gate = _random((1, h), dtype, device)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in vars(self).values() if _is_tensor(t))

    def forward(self, x: torch.Tensor, state: _StepState) -> torch.Tensor:
        s = self.shapes
        batch = x.shape[0]
        h = rms_norm(x, self.norm_in)
        qkv = F.linear(h, self.qkv, self.qkv_bias)
        q, k, v = qkv.split(
            (s.q_heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim), dim=-1
        )
        q = q.view(batch, s.q_heads, s.head_dim)
        k = k.view(batch, s.kv_heads, s.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q = rms_norm(q, self.q_norm)
            k = rms_norm(k, self.k_norm)
        q = rotary(q, state.cos, state.sin)
        k = rotary(k, state.cos, state.sin)
        # The new token's K and V go into the cache in place, as a static or paged cache does.
        state.k_slot.copy_(k)
        state.v_slot.copy_(v.view(batch, s.kv_heads, s.head_dim))
        # The attention kernel is timed on its own (per context); its output stands in here.
        x = x + F.linear(state.attention_out, self.o)
        h = rms_norm(x, self.norm_post)
        if self.kind == "dense":
            return x + self._mlp(h, self.gate_up, self.down)
        return x + self._moe(h, state)

    @staticmethod
    def _mlp(h: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(h, gate_up).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, down)

    def _moe(self, h: torch.Tensor, state: _StepState) -> torch.Tensor:
        logits = F.linear(h, self.router)
        probs = torch.softmax(logits.to(torch.float32), dim=-1)
        weights, _ = torch.topk(probs, self.arch.experts_per_token, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(h.dtype)
        # The router's choice is replaced by uniform random routing (``expert_assignment``):
        # random weights would route arbitrarily, a trained router balances its experts.
        routing = state.routing
        assert routing is not None
        out = None
        if _GROUPED_MM is not None and self.grouped:
            try:
                out = self._grouped_experts(h, weights, routing)
            except (RuntimeError, NotImplementedError):
                self.grouped = False  # no grouped GEMM for this device or dtype: loop instead
        if out is None:
            out = self._looped_experts(h, weights, routing)
        if self.shapes.shared_inter:
            shared = self._mlp(h, self.shared_gate_up, self.shared_down)
            out = out + torch.sigmoid(F.linear(h, self.shared_gate)) * shared
        return out

    def _grouped_experts(
        self, h: torch.Tensor, weights: torch.Tensor, routing: _Routing
    ) -> torch.Tensor:
        """Token–expert pairs sorted by expert, one grouped GEMM per projection (as fused MoE
        kernels and ``transformers``' default ``grouped_mm`` experts do)."""
        assert _GROUPED_MM is not None
        selected = h.index_select(0, routing.rows)
        gate_up = _GROUPED_MM(
            selected, self.experts_gate_up.transpose(-2, -1), offs=routing.offsets
        )
        gate, up = gate_up.chunk(2, dim=-1)
        down = _GROUPED_MM(
            F.silu(gate) * up, self.experts_down.transpose(-2, -1), offs=routing.offsets
        )
        weighted = down * weights[routing.rows, routing.slots].unsqueeze(-1)
        restored = weighted.index_select(0, routing.inverse)
        return restored.view(h.shape[0], self.arch.experts_per_token, -1).sum(dim=1)

    def _looped_experts(
        self, h: torch.Tensor, weights: torch.Tensor, routing: _Routing
    ) -> torch.Tensor:
        """Without a grouped GEMM: gather, MLP and scatter-add per active expert."""
        out = torch.zeros_like(h)
        for expert, tokens, slots in routing.per_expert:
            y = self._mlp(
                h.index_select(0, tokens), self.experts_gate_up[expert], self.experts_down[expert]
            )
            out.index_add_(0, tokens, y * weights[tokens, slots, None])
        return out


def _is_tensor(value: object) -> bool:
    return isinstance(value, torch.Tensor)


#: torch's grouped GEMM (torch ≥ 2.10 as ``F.grouped_mm``, earlier ``torch._grouped_mm``).
_GROUPED_MM = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


@dataclass
class _Routing:
    """Which experts see which tokens in one run: pairs sorted by expert for the grouped GEMM
    (``rows``/``slots`` of each pair, per-expert ``offsets``, the ``inverse`` permutation) and
    the same per expert for the looped fallback."""

    rows: torch.Tensor
    slots: torch.Tensor
    offsets: torch.Tensor
    inverse: torch.Tensor
    per_expert: list[tuple[int, torch.Tensor, torch.Tensor]]

    @classmethod
    def build(
        cls,
        num_experts: int,
        experts_per_token: int,
        batch: int,
        seed: int,
        device: torch.device,
    ) -> _Routing:
        groups = expert_assignment(num_experts, experts_per_token, batch, seed)
        rows = [t for _, tokens, _ in groups for t in tokens]
        slots = [s for _, _, ss in groups for s in ss]
        counts = [0] * num_experts
        for expert, tokens, _ in groups:
            counts[expert] = len(tokens)
        offsets = [sum(counts[: i + 1]) for i in range(num_experts)]
        pair_index = [t * experts_per_token + s for t, s in zip(rows, slots, strict=True)]
        inverse = [0] * len(pair_index)
        for sorted_position, pair in enumerate(pair_index):
            inverse[pair] = sorted_position

        def tensor(values: list[int], dtype: torch.dtype = torch.long) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        return cls(
            rows=tensor(rows),
            slots=tensor(slots),
            offsets=tensor(offsets, torch.int32),
            inverse=tensor(inverse),
            per_expert=[(e, tensor(t), tensor(s)) for e, t, s in groups],
        )


@dataclass
class _StepState:
    """Per-run inputs of a layer body: rotary tables, cache slots, the stand-in attention output
    and (mixture of experts) the routing."""

    cos: torch.Tensor
    sin: torch.Tensor
    k_slot: torch.Tensor
    v_slot: torch.Tensor
    attention_out: torch.Tensor
    routing: _Routing | None


def expert_assignment(
    num_experts: int, experts_per_token: int, batch: int, seed: int
) -> list[tuple[int, list[int], list[int]]]:
    """Uniform top-k routing: each token picks k distinct experts uniformly at random.

    Per expert that got tokens: ``(expert, tokens, slots)``, sorted by expert. This reads
    ``E·(1 − (1 − k/E)^B)`` distinct experts in expectation and gives them multinomial loads,
    as a trained router with load balancing does on average; ``seed`` makes each run's routing
    reproducible and different from the last, so successive runs read other experts.
    """
    rng = random.Random(seed)
    tokens: dict[int, list[int]] = {}
    slots: dict[int, list[int]] = {}
    for token in range(batch):
        for slot, expert in enumerate(rng.sample(range(num_experts), experts_per_token)):
            tokens.setdefault(expert, []).append(token)
            slots.setdefault(expert, []).append(slot)
    return [(e, tokens[e], slots[e]) for e in sorted(tokens)]


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
    settings: MeasureSettings, info: DeviceInfo, progress: Progress
) -> dict[str, tuple[ComponentTime, ...]]:
    """The layer body (everything but the attention kernel) per layer kind and batch."""
    arch, tp = settings.arch, settings.tensor_parallel
    dtype, device = DTYPES[settings.dtype], info.device
    shapes = _Shapes.of(arch, tp)
    results: dict[str, tuple[ComponentTime, ...]] = {}
    for kind in layer_kinds(arch):
        first = _Layer(arch, shapes, kind, dtype, device)
        copies = [first] + [
            _Layer(arch, shapes, kind, dtype, device)
            for _ in range(_layer_copies(settings, info, first.nbytes()) - 1)
        ]
        parts = [
            Part(
                batch,
                f"{arch.name} {kind} layer B={batch}",
                _body_run(copies, batch, settings, info),
            )
            for batch in settings.batches
        ]
        measured = time_parts(parts, settings.quick, device, progress)
        results[kind] = tuple(
            ComponentTime(p.batch, m.median, m) for p, m in zip(parts, measured, strict=True)
        )
        del copies, first, parts
    return results


def _body_run(
    copies: list[_Layer], batch: int, settings: MeasureSettings, info: DeviceInfo
) -> Callable[[int], object]:
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
            routing = _Routing.build(
                arch.num_experts, arch.experts_per_token, batch, seed=r, device=device
            )
        states.append(
            _StepState(
                cos=cos,
                sin=sin,
                k_slot=torch.empty((batch, s.kv_heads, s.head_dim), dtype=dtype, device=device),
                v_slot=torch.empty((batch, s.kv_heads, s.head_dim), dtype=dtype, device=device),
                attention_out=_random((batch, s.q_heads * s.head_dim), dtype, device),
                routing=routing,
            )
        )
        inputs.append(_random((batch, s.hidden), dtype, device))

    def run(i: int) -> object:
        with torch.no_grad():
            return copies[i % len(copies)].forward(inputs[i % rounds], states[i % rounds])

    return run


def measure_head(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress
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
    tables = [_random((timed_rows, hidden), dtype, device) for _ in range(copies)]
    norm = torch.ones(hidden, dtype=dtype, device=device)
    parts = []
    for batch in settings.batches:
        ids = torch.randint(0, timed_rows, (batch,), device=device)

        def run(i: int, ids: torch.Tensor = ids) -> object:
            table = tables[i % copies]
            with torch.no_grad():
                x = table.index_select(0, ids)
                return F.linear(rms_norm(x, norm), table)

        parts.append(Part(batch, f"{arch.name} lm_head B={batch}", run))
    measured = time_parts(parts, settings.quick, device, progress)
    times = tuple(
        ComponentTime(p.batch, m.median * scale, m) for p, m in zip(parts, measured, strict=True)
    )
    return times, scale


def measure_attention(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress
) -> tuple[AttentionTime, ...]:
    """Decode attention per context and batch; batches whose KV does not fit the buffer are
    extrapolated in proportion to the batch from the largest batch timed."""
    results: list[AttentionTime] = []
    for context in settings.contexts:
        results.extend(_attention_at(settings, info, context, progress))
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


def _attention_at(
    settings: MeasureSettings, info: DeviceInfo, context: int, progress: Progress
) -> list[AttentionTime]:
    arch, device = settings.arch, info.device
    dtype = DTYPES[settings.dtype]
    s = _Shapes.of(arch, settings.tensor_parallel)
    group = s.q_heads // s.kv_heads
    tokens = attended_tokens(arch, context)
    per_sequence = 2 * s.kv_heads * tokens * s.head_dim * dtype_bytes(settings.dtype)
    sequences = _kv_sequences(settings, info, per_sequence)
    keys = _random((sequences, s.kv_heads, tokens, s.head_dim), dtype, device)
    values = _random((sequences, s.kv_heads, tokens, s.head_dim), dtype, device)
    scale = s.head_dim**-0.5
    timed = [b for b in settings.batches if b <= sequences] or [min(settings.batches)]
    parts = []
    for batch in timed:
        slices = max(1, sequences // batch)
        query = _random((batch, s.kv_heads, group, s.head_dim), dtype, device)
        # On CPUs, every position valid in a boolean mask, as a static or padded cache passes it
        # (transformers' decode does), which also selects the CPU kernel that serves a grouped
        # query well; GPU engines' paged kernels take sequence lengths instead: no mask.
        valid = None
        if device.type == "cpu":
            valid = torch.ones((batch, 1, 1, tokens), dtype=torch.bool, device=device)

        def run(
            i: int,
            batch: int = batch,
            slices: int = slices,
            query: torch.Tensor = query,
            valid: torch.Tensor | None = valid,
        ) -> object:
            j = (i % slices) * batch
            with torch.no_grad():
                return F.scaled_dot_product_attention(
                    query,
                    keys[j : j + batch],
                    values[j : j + batch],
                    attn_mask=valid,
                    scale=scale,
                )

        parts.append(Part(batch, f"{arch.name} attention B={batch} C={context}", run))
    measured = time_parts(parts, settings.quick, device, progress)
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


def measure_model(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress
) -> ModelMeasurements:
    """Every measured part of one model's decode step on one device."""
    bodies = measure_layer_bodies(settings, info, progress)
    head, head_scale = measure_head(settings, info, progress)
    attention = measure_attention(settings, info, progress)
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
    )
