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
* **attention**, per batch and context, from the source that stands for the engine's decode kernel
  on the device (``attention_measure``): torch's attention on a GPU, vLLM's own CPU kernel where
  it can be imported, else the device's roofline; the result records which.
* **glue**, per batch, on a CPU: the layer body without its GEMMs (and a mixture of experts'
  block), timed alone on one layer (its inputs are a few kilobytes, cached in a real step too):
  what an engine that compiles its step replaces with fused kernels (``decode_layer``).
* **head**, per batch: the embedding lookup, the final RMSNorm, the lm_head GEMM and sampling the
  next token from the logits as an engine does at temperature 1 (Gumbel-max over fp32 logits:
  vLLM's CPU sampler is one fused kernel of that; in torch's operations it is a few passes over
  the logits, an upper bound of the fused kernel).

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
* Batches are timed in interleaved passes, and a run that takes long (a compute-bound batch of
  a large model) is repeated only once per pass (``component_timing``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator

import torch

from roofline_profiler.core.decode_model import (
    AttentionRoofline,
    ComponentTime,
    ModelMeasurements,
    layer_kinds,
)
from roofline_profiler.core.engines import Engine
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.measure.attention_measure import measure_attention, vllm_attention_kernel
from roofline_profiler.measure.component_timing import Part, time_parts
from roofline_profiler.measure.decode_layer import (
    DecoderLayer,
    GlueInputs,
    LayerShapes,
    Routing,
    StepState,
    random_tensor,
    rms_norm,
    rotary_tables,
)
from roofline_profiler.measure.devices import DTYPES, DeviceInfo
from roofline_profiler.measure.engine_linear import (
    TORCH_LINEAR,
    VLLM_LINEAR,
    EngineLinear,
    linear_kind,
    vllm_linear_kernel,
)
from roofline_profiler.measure.measure_settings import (
    ROOFLINE_ATTENTION,
    TORCH_ATTENTION,
    VLLM_ATTENTION,
    MeasureSettings,
    Progress,
    evicting_bytes,
    memory_budget,
)
from roofline_profiler.measure.quantized_linear import FORMAT_BYTES, TORCH_KERNEL_PREFIX

#: The lm_head slice: at least this many bytes (and the cache), or the whole matrix.
MIN_HEAD_SLICE_BYTES = 128 << 20


def attention_source(
    info: DeviceInfo, engine: Engine, read_bytes_per_second: float, peak_flops_per_second: float
) -> tuple[str, AttentionRoofline | None]:
    """Where a step's attention comes from on ``info``'s device for ``engine``: torch's attention
    on a GPU (the engines' kernels); on a CPU vLLM's own kernel where it can be imported and the
    engine is vLLM's, else the device's roofline (no engine-grade kernel torch can time)."""
    if info.backend != "cpu":
        return TORCH_ATTENTION, None
    if engine.cpu_attention_kernel == VLLM_ATTENTION and vllm_attention_kernel() is not None:
        return VLLM_ATTENTION, None
    return ROOFLINE_ATTENTION, AttentionRoofline(read_bytes_per_second, peak_flops_per_second)


def linear_source(info: DeviceInfo, engine: Engine) -> str:
    """Where a step's GEMMs come from on ``info``'s device for ``engine``: on a CPU vLLM's own
    GEMMs where the engine is vLLM's and they can be imported, else torch's."""
    if (
        info.backend == "cpu"
        and engine.cpu_attention_kernel == VLLM_ATTENTION
        and vllm_linear_kernel() is not None
    ):
        return VLLM_LINEAR
    return TORCH_LINEAR


def _layer_copies(settings: MeasureSettings, info: DeviceInfo, layer_bytes: int) -> int:
    wanted = max(1, math.ceil(evicting_bytes(settings, info) / max(1, layer_bytes)))
    affordable = max(1, memory_budget(info) // max(1, layer_bytes))
    return min(wanted, affordable)


Bodies = dict[str, tuple[ComponentTime, ...]]


def measure_layer_bodies(
    settings: MeasureSettings,
    info: DeviceInfo,
    progress: Progress,
    notes: list[str] | None = None,
    kernels: set[str] | None = None,
) -> tuple[Bodies, Bodies]:
    """The layer body (everything but the attention kernel) per layer kind and batch, and on a
    CPU its glue alone (else nothing); ``kernels`` gets the labels of a quantized model's GEMMs
    (``quantized_linear``)."""
    arch, tp = settings.arch, settings.tensor_parallel
    dtype, device = DTYPES[settings.dtype], info.device
    shapes = LayerShapes.of(arch, tp)
    results: Bodies = {}
    glue: Bodies = {}
    for kind in layer_kinds(arch):
        first = DecoderLayer(arch, shapes, kind, dtype, device, settings.linear)
        copies = [first] + [
            DecoderLayer(arch, shapes, kind, dtype, device, settings.linear)
            for _ in range(_layer_copies(settings, info, first.nbytes()) - 1)
        ]
        if kernels is not None:
            kernels.update(first.weight_kernels)
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
            ComponentTime(p.batch, m.quiet_median, m) for p, m in zip(parts, measured, strict=True)
        )
        if info.backend == "cpu":
            glue[kind] = _time_glue(first, settings, info, progress, notes)
        del copies, first, parts
    return results, glue


def _time_glue(
    layer: DecoderLayer,
    settings: MeasureSettings,
    info: DeviceInfo,
    progress: Progress,
    notes: list[str] | None,
) -> tuple[ComponentTime, ...]:
    """One layer's glue alone per batch: its body with every GEMM's output made beforehand."""
    parts = []
    for batch in settings.batches:
        (state,), (x,) = _step_inputs(layer, batch, 1, settings, info)
        made = layer.glue_inputs(x, state)

        def run(
            _: int, x: torch.Tensor = x, state: StepState = state, made: GlueInputs = made
        ) -> object:
            with torch.no_grad():
                return layer.forward(x, state, made)

        label = f"{settings.arch.name} {layer.kind} layer glue B={batch}"
        parts.append(Part(batch, label, run))
    measured = time_parts(parts, settings.quick, info.device, progress, notes)
    return tuple(
        ComponentTime(p.batch, m.quiet_median, m) for p, m in zip(parts, measured, strict=True)
    )


def _body_run(
    copies: list[DecoderLayer],
    turn: Iterator[int],
    batch: int,
    settings: MeasureSettings,
    info: DeviceInfo,
) -> tuple[Callable[[int], object], int]:
    """A run of the layer body at ``batch`` and the runs after which its inputs repeat."""
    arch, kind = settings.arch, copies[0].kind
    rounds = max(1, len(copies))
    if kind == "moe":
        # Rotate the routing too: with a single copy, successive runs read other experts.
        rounds = max(rounds, math.ceil(arch.num_experts / max(1, arch.experts_per_token)))
    states, inputs = _step_inputs(copies[0], batch, rounds, settings, info)

    def run(i: int) -> object:
        with torch.no_grad():
            layer = copies[next(turn) % len(copies)]
            return layer.forward(inputs[i % rounds], states[i % rounds])

    return run, rounds


def _step_inputs(
    layer: DecoderLayer, batch: int, rounds: int, settings: MeasureSettings, info: DeviceInfo
) -> tuple[list[StepState], list[torch.Tensor]]:
    """``rounds`` sets of a layer body's per-run inputs at ``batch`` (each its own routing)."""
    arch, device, kind = settings.arch, info.device, layer.kind
    dtype = DTYPES[settings.dtype]
    s = layer.shapes
    positions = torch.full((batch,), 1000, dtype=torch.long, device=device)
    cos, sin = rotary_tables(positions, s.head_dim, dtype)
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
    return states, inputs


def gumbel_sample(logits: torch.Tensor) -> torch.Tensor:
    """The next token of each sequence at temperature 1: the argmax of the logits plus Gumbel
    noise, in fp32 (the Gumbel-max trick engines sample with; vLLM's CPU sampler fuses it)."""
    noise = torch.empty(logits.shape, dtype=torch.float32, device=logits.device).uniform_()
    return (logits.float() - noise.log_().neg_().log_()).argmax(dim=-1)


def measure_head(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress, notes: list[str] | None = None
) -> tuple[tuple[ComponentTime, ...], float]:
    """Embedding lookup, final RMSNorm, lm_head and sampling per batch; returns the times scaled
    to the whole vocabulary and the scale (rows of the whole head ÷ rows timed: the GEMM and the
    sampling both grow in proportion to the rows)."""
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
    heads = [EngineLinear.prepare(table.clone(), settings.linear) for table in tables]
    norm = torch.ones(hidden, dtype=dtype, device=device)
    turn = itertools.count()
    parts = []
    for batch in settings.batches:
        ids = torch.randint(0, timed_rows, (batch,), device=device)

        def run(_: int, ids: torch.Tensor = ids) -> object:
            i = next(turn) % copies
            with torch.no_grad():
                x = tables[i].index_select(0, ids)
                return gumbel_sample(heads[i](rms_norm(x, norm)))

        parts.append(Part(batch, f"{arch.name} lm_head B={batch}", run, period=copies))
    measured = time_parts(parts, settings.quick, device, progress, notes)
    times = tuple(
        ComponentTime(p.batch, m.quiet_median * scale, m)
        for p, m in zip(parts, measured, strict=True)
    )
    return times, scale


def measure_model(
    settings: MeasureSettings, info: DeviceInfo, progress: Progress
) -> ModelMeasurements:
    """Every measured part of one model's decode step on one device."""
    notes: list[str] = []
    kernels: set[str] = set()
    bodies, glue = measure_layer_bodies(settings, info, progress, notes, kernels)
    notes.extend(weight_kernel_notes(settings.arch, kernels))
    if settings.arch.kv_cache_dtype != "auto" and settings.attention == TORCH_ATTENTION:
        notes.append(
            f"attention is timed reading a {settings.dtype} KV cache (torch's attention has no "
            f"{settings.arch.kv_cache_dtype} cache): it reads two or four times an FP8 cache's "
            "bytes, so steps at long contexts and large batches are predicted too slow"
        )
    head, head_scale = measure_head(settings, info, progress, notes)
    attention = measure_attention(settings, info, progress, notes)
    return ModelMeasurements(
        arch=settings.arch,
        dtype=settings.dtype,
        tensor_parallel=settings.tensor_parallel,
        layer_bodies=bodies,
        layer_glue=glue,
        head=head,
        head_scale=head_scale,
        attention=attention,
        all_reduce=(),
        all_reduce_measured=settings.tensor_parallel == 1,
        notes=tuple(notes),
        linear=linear_kind(info.device, DTYPES[settings.dtype], settings.linear),
        attention_kernel=_attention_kernel(settings.attention),
        attention_roofline=settings.attention_roofline,
        weight_kernel="/".join(sorted(kernels)),
    )


def weight_kernel_notes(arch: ModelArch, kernels: set[str]) -> tuple[str, ...]:
    """What a plan says when a quantized model's GEMMs could not run the engine's kernel: torch's
    own quantized GEMM stood in, or a 16-bit GEMM over the format's bytes."""
    fmt = arch.quantized
    if fmt is None:
        return ()
    notes = []
    stand_ins = sorted(k for k in kernels if k.startswith(TORCH_KERNEL_PREFIX))
    if stand_ins:
        notes.append(
            f"{fmt.name} GEMMs timed through torch's own kernel ({', '.join(stand_ins)}), not the "
            "serving engine's (vLLM's CPU kernels run from vLLM's environment; on GPUs engines "
            "run Marlin, Machete or CUTLASS kernels): a step is predicted as fast as torch's "
            "kernel runs it"
        )
    if FORMAT_BYTES in kernels:
        notes.append(
            f"no kernel for {fmt.name} weights runs here (vLLM's CPU kernels run 4-bit "
            "weight-only and INT8 W8A8, from vLLM's environment; torch's need a recent torch): "
            "its GEMMs are timed as 16-bit GEMMs reading the format's bytes, the bandwidth side "
            "only, so steps are predicted too fast wherever the engine's kernel dequantizes or "
            "multiplies slower than 16-bit"
        )
    return tuple(notes)


def _attention_kernel(attention: str) -> str:
    """The kernel attention was timed with (empty where it comes from the roofline)."""
    if attention == VLLM_ATTENTION:
        return vllm_attention_kernel() or ""
    return "torch-sdpa" if attention == TORCH_ATTENTION else ""
