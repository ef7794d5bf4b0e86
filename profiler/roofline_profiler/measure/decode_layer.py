"""One decoder layer of a model as the decode step runs it, built from torch operations.

The layer body is everything of a decoder layer except the attention kernel (which is timed on
its own, per context): RMSNorm, the fused qkv GEMM (with bias and per-head q/k RMSNorm where the
model has them), rotary embedding, the in-place KV-cache write of the new token, the o GEMM and
residual add, RMSNorm, then the MLP (fused gate_up, SiLU·mul, down) or the mixture of experts
(router GEMM, softmax/top-k, then the token–expert pairs sorted by expert through one grouped GEMM
per projection, weighted and summed back per token — or, without a grouped GEMM, gather, MLP and
scatter-add per active expert). Shapes are per GPU under tensor parallelism, sharded as the
engines shard them (``models.decode_gemms``). The dense GEMMs run as the device's engines run them
(``engine_linear``: on a CPU vLLM's own GEMMs beside vLLM, else weights packed once for oneDNN).

A quantized model's qkv, o, gate_up and down GEMMs run in its weight format through the engine's
kernel where it runs here, else as 16-bit GEMMs reading the format's bytes
(``quantized_linear.engine_linear``; :attr:`DecoderLayer.weight_kernels` says which).

The layer's *glue* is the body without its GEMMs (and without a mixture of experts' block): the
norms, rotary embedding, cache write, activation and residual adds, a few dozen small operations
on ``B × hidden`` values. Run eagerly, each is a separate call into torch, and on a CPU those calls
cost more than their work (0.16 ms of a 1.8 ms layer for Qwen3-0.6B's shapes at batch 1 in bf16
on a 2-vCPU Intel Xeon);
an engine that compiles its step (vLLM's CPU build: inductor) fuses them into a few kernels. So the
glue is also timed alone (``forward`` with :class:`GlueInputs`), and a plan for such an engine
takes it out of the body and adds that engine's own measured per-layer work (``engines``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.measure import quantized_linear
from roofline_profiler.measure.engine_linear import TORCH_LINEAR, EngineLinear

RMS_EPS = 1e-6
ROPE_THETA = 10000.0


#: Elements of the random block that larger tensors are tiled from.
_PATTERN_ELEMENTS = 1 << 16


def random_tensor(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
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
class LayerShapes:
    """Per-device shapes of one layer under tensor parallelism (engines' sharding)."""

    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    inter: int
    expert_inter: int
    shared_inter: int

    @classmethod
    def of(cls, arch: ModelArch, tp: int) -> LayerShapes:
        return cls(
            hidden=arch.hidden_size,
            q_heads=arch.num_heads // tp,
            kv_heads=max(1, arch.num_kv_heads // tp),
            head_dim=arch.head_dim,
            inter=-(-arch.intermediate_size // tp),
            expert_inter=-(-arch.moe_intermediate_size // tp),
            shared_inter=-(-arch.shared_expert_intermediate_size // tp),
        )


class DecoderLayer:
    """One copy of a decoder layer's weights, and its forward pass without the attention kernel."""

    def __init__(
        self,
        arch: ModelArch,
        shapes: LayerShapes,
        kind: str,
        dtype: torch.dtype,
        device: torch.device,
        linear: str = TORCH_LINEAR,
    ) -> None:
        s, h, hd = shapes, shapes.hidden, shapes.head_dim

        #: How the quantized GEMMs ran (``quantized_linear`` labels); empty without a format.
        self.weight_kernels: set[str] = set()
        fmt = arch.quantized

        def prepare(shape: tuple[int, int]) -> EngineLinear:
            if fmt is not None:
                layer, label = quantized_linear.engine_linear(fmt, shape, dtype, device, linear)
                self.weight_kernels.add(label)
                return layer
            return EngineLinear.prepare(random_tensor(shape, dtype, device), linear)

        self.arch, self.shapes, self.kind = arch, shapes, kind
        self.grouped = True
        qkv = (s.q_heads + 2 * s.kv_heads) * hd
        self.norm_in = torch.ones(h, dtype=dtype, device=device)
        self.norm_post = torch.ones(h, dtype=dtype, device=device)
        self.qkv = prepare((qkv, h))
        self.qkv_bias = random_tensor((qkv,), dtype, device) if arch.attention_bias else None
        self.q_norm = torch.ones(hd, dtype=dtype, device=device) if arch.qk_norm else None
        self.k_norm = torch.ones(hd, dtype=dtype, device=device) if arch.qk_norm else None
        self.o = prepare((h, s.q_heads * hd))
        if kind == "dense":
            self.gate_up = prepare((2 * s.inter, h))
            self.down = prepare((h, s.inter))
        else:
            e = arch.num_experts
            self.router = prepare((e, h))
            self.experts_gate_up = random_tensor((e, 2 * s.expert_inter, h), dtype, device)
            self.experts_down = random_tensor((e, h, s.expert_inter), dtype, device)
            if s.shared_inter:
                self.shared_gate_up = prepare((2 * s.shared_inter, h))
                self.shared_down = prepare((h, s.shared_inter))
                self.shared_gate = prepare((1, h))

    def nbytes(self) -> int:
        return sum(_nbytes(value) for value in vars(self).values())

    def forward(
        self, x: torch.Tensor, state: StepState, glue: GlueInputs | None = None
    ) -> torch.Tensor:
        """The layer body; with ``glue``, only its glue: every GEMM (and a mixture of experts'
        whole block) replaced by its output, made once beforehand."""
        s = self.shapes
        batch = x.shape[0]
        h = rms_norm(x, self.norm_in)
        qkv = self.qkv(h, self.qkv_bias) if glue is None else glue.qkv
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
        x = x + (self.o(state.attention_out) if glue is None else glue.o)
        h = rms_norm(x, self.norm_post)
        if glue is not None:
            if self.kind == "dense":
                gate, up = glue.gate_up.chunk(2, dim=-1)
                _ = F.silu(gate) * up  # what the down GEMM would read; its output stands in
            return x + glue.mlp
        if self.kind == "dense":
            return x + self._mlp(h, self.gate_up, self.down)
        return x + self._moe(h, state)

    def glue_inputs(self, x: torch.Tensor, state: StepState) -> GlueInputs:
        """The outputs of this layer's GEMMs (and mixture-of-experts block) for ``x``, which
        :meth:`forward` takes instead of computing them when it runs the glue alone."""
        with torch.no_grad():
            qkv = self.qkv(rms_norm(x, self.norm_in), self.qkv_bias)
            o = self.o(state.attention_out)
            h = rms_norm(x + o, self.norm_post)
            if self.kind == "dense":
                gate_up = self.gate_up(h)
                gate, up = gate_up.chunk(2, dim=-1)
                return GlueInputs(qkv, o, gate_up, self.down(F.silu(gate) * up))
            return GlueInputs(qkv, o, h[:, :0], self._moe(h, state))

    @staticmethod
    def _mlp(h: torch.Tensor, gate_up: EngineLinear, down: EngineLinear) -> torch.Tensor:
        gate, up = gate_up(h).chunk(2, dim=-1)
        return down(F.silu(gate) * up)

    def _moe(self, h: torch.Tensor, state: StepState) -> torch.Tensor:
        logits = self.router(h)
        probs = torch.softmax(logits.to(torch.float32), dim=-1)
        weights, _ = torch.topk(probs, self.arch.experts_per_token, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(h.dtype)
        # The router's choice is replaced by uniform random routing (``expert_assignment``):
        # random weights would route arbitrarily, a trained router balances its experts.
        routing = state.routing
        assert routing is not None
        out = None
        if GROUPED_MM is not None and self.grouped:
            try:
                out = self._grouped_experts(h, weights, routing)
            except (RuntimeError, NotImplementedError):
                self.grouped = False  # no grouped GEMM for this device or dtype: loop instead
        if out is None:
            out = self._looped_experts(h, weights, routing)
        if self.shapes.shared_inter:
            shared = self._mlp(h, self.shared_gate_up, self.shared_down)
            out = out + torch.sigmoid(self.shared_gate(h)) * shared
        return out

    def _grouped_experts(
        self, h: torch.Tensor, weights: torch.Tensor, routing: Routing
    ) -> torch.Tensor:
        """Token–expert pairs sorted by expert, one grouped GEMM per projection (as fused MoE
        kernels and ``transformers``' default ``grouped_mm`` experts do).

        The bookkeeping runs on the device inside the step, as it does in a real decode step:
        the pairs are sorted by expert, counted per expert into the GEMM's offsets, and put back
        in token order afterwards.
        """
        assert GROUPED_MM is not None
        k = self.arch.experts_per_token
        sorted_experts, order = torch.sort(routing.expert_ids.view(-1))
        # Each expert's end offset: the pairs routed to it or to a lower expert. (A bincount
        # would size its output from the largest id, read on the host: no CUDA graph then.)
        experts = torch.arange(self.arch.num_experts, device=h.device)
        offsets = torch.searchsorted(sorted_experts, experts, right=True).to(torch.int32)
        selected = h.index_select(0, order // k)
        gate_up = GROUPED_MM(selected, self.experts_gate_up.transpose(-2, -1), offs=offsets)
        gate, up = gate_up.chunk(2, dim=-1)
        down = GROUPED_MM(F.silu(gate) * up, self.experts_down.transpose(-2, -1), offs=offsets)
        weighted = down * weights.reshape(-1).index_select(0, order).unsqueeze(-1)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        restored = weighted.index_select(0, inverse)
        return restored.view(h.shape[0], k, -1).sum(dim=1)

    def _looped_experts(
        self, h: torch.Tensor, weights: torch.Tensor, routing: Routing
    ) -> torch.Tensor:
        """Without a grouped GEMM: gather, MLP and scatter-add per active expert."""
        out = torch.zeros_like(h)
        for expert, tokens, slots in routing.per_expert:
            y = self._mlp(
                h.index_select(0, tokens),
                EngineLinear(self.experts_gate_up[expert], packed=False),
                EngineLinear(self.experts_down[expert], packed=False),
            )
            out.index_add_(0, tokens, y * weights[tokens, slots, None])
        return out


def _nbytes(value: object) -> int:
    if isinstance(value, EngineLinear):
        return value.nbytes()
    if isinstance(value, torch.Tensor):
        return int(value.numel() * value.element_size())
    return 0


#: torch's grouped GEMM (torch ≥ 2.10 as ``F.grouped_mm``, earlier ``torch._grouped_mm``).
GROUPED_MM = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


@dataclass
class Routing:
    """Which experts see which tokens in one run: ``expert_ids[token, slot]`` as a router's
    top-k gives them (the grouped GEMM sorts them itself, inside the timed step), and the same
    grouped per expert for the looped fallback."""

    expert_ids: torch.Tensor
    per_expert: list[tuple[int, torch.Tensor, torch.Tensor]]

    @classmethod
    def build(
        cls,
        num_experts: int,
        experts_per_token: int,
        batch: int,
        seed: int,
        device: torch.device,
    ) -> Routing:
        groups = expert_assignment(num_experts, experts_per_token, batch, seed)
        ids = [[0] * experts_per_token for _ in range(batch)]
        for expert, tokens, slots in groups:
            for token, slot in zip(tokens, slots, strict=True):
                ids[token][slot] = expert

        def tensor(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        return cls(
            expert_ids=torch.tensor(ids, dtype=torch.long, device=device),
            per_expert=[(e, tensor(t), tensor(s)) for e, t, s in groups],
        )


@dataclass(frozen=True)
class GlueInputs:
    """What a layer's GEMMs produce in one run, handed to its glue timed alone."""

    qkv: torch.Tensor
    o: torch.Tensor
    gate_up: torch.Tensor
    mlp: torch.Tensor


@dataclass
class StepState:
    """Per-run inputs of a layer body: rotary tables, cache slots, the stand-in attention output
    and (mixture of experts) the routing."""

    cos: torch.Tensor
    sin: torch.Tensor
    k_slot: torch.Tensor
    v_slot: torch.Tensor
    attention_out: torch.Tensor
    routing: Routing | None


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
