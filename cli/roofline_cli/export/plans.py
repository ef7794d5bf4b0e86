"""What every export target reads: each model's plan per GPU class, and the measured classes of
nodes, whichever source (a saved result, a RooflineProfile's status) they came from.

A class's numbers hold on every node of the class (the largest min batch, the smallest maxima
and tokens/s), its ITL model is its slowest node's; ``source`` says where each came from, so
that every exported field can name the measurement behind it. Pure module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Itl:
    """``step(B, C) ≈ intercept + per_sequence·B + per_context_token·B·C`` and its fit's error."""

    intercept_seconds: float
    per_sequence_seconds: float
    per_sequence_context_token_seconds: float
    max_relative_error: float
    #: Where the terms were measured (the slowest node of the class, or the device).
    measured_on: str

    def step_seconds(self, batch: float, context_tokens: float) -> float:
        return (
            self.intercept_seconds
            + self.per_sequence_seconds * batch
            + self.per_sequence_context_token_seconds * batch * context_tokens
        )


@dataclass(frozen=True)
class RequestRate:
    """The largest request rate one replica sustains with the median TTFT and ITL within the
    profile's SLOs (``status.models[].classes[].maxRequestRate``: the class's slowest node's),
    what limits it (``load_plan.LIMITS``) and the workload it holds for."""

    requests_per_second: float
    limited_by: str
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ClassPlan:
    """One model's plan on one GPU class."""

    model: str
    gpu_class: str
    context_tokens: int
    tensor_parallel: int
    min_batch: int | None
    max_batch: int
    max_batch_by_memory: int
    max_batch_by_latency: int | None
    kv_cache_tokens: int
    tokens_per_second_at_max_batch: float | None
    #: Nodes of the class with a plan for the model.
    nodes: int
    #: Where the numbers come from, for the comments (``status.models[llama].classes[H200]``).
    source: str
    itl: Itl | None = None
    #: Each engine's flags as the profiler wrote them (a saved result only: the status keeps
    #: no memory split, so the memory fractions cannot be derived from it).
    engine_flags: Mapping[str, tuple[str, ...]] | None = None
    #: ``None`` for a profile without a planned workload, or one written before it existed.
    max_request_rate: RequestRate | None = None
    #: The weight format (``weight_formats`` name; empty: the dtype's) and the KV-cache dtype
    #: the model was planned in.
    weight_format: str = ""
    kv_cache_dtype: str = "auto"

    @property
    def bound_by(self) -> str:
        """Which bound ``max_batch`` is: ``latency`` or ``memory``."""
        by_latency = self.max_batch_by_latency
        return (
            "latency"
            if by_latency is not None and by_latency < self.max_batch_by_memory
            else ("memory")
        )


@dataclass(frozen=True)
class NodeClass:
    """A measured class of nodes as the operator's labels select it: the nodes whose own profiler
    pod measured the same device, labelled ``roofline.dev/class`` with its label-safe name (one
    Kueue flavor). A re-profile that moves a measured number leaves the label unchanged."""

    #: The ``roofline.dev/class`` value: ``label_safe(product)``, as the operator writes it.
    label: str
    #: The device product the class's nodes measured (``status.nodes[].product``).
    product: str
    nodes: tuple[str, ...]
    gpus: int
    #: Each model's tokens/s per replica at its max batch on the slowest node of the class.
    tokens_per_second: Mapping[str, float] = field(default_factory=dict)
    #: ``False`` for a CPU-device profile: its pods request no accelerator.
    accelerated: bool = True


@dataclass(frozen=True)
class ExportSource:
    """Everything a source gives the targets."""

    #: What was read, for the header of every file (``result.json``, ``RooflineProfile fleet``).
    description: str
    plans: tuple[ClassPlan, ...]
    node_classes: tuple[NodeClass, ...]
    #: The ``roofline.dev/profile`` label value that selects the profile's nodes: its name, or
    #: the operator's label-safe form of a name that is no label value (``label_safe``); ``None``
    #: for a saved result (no profile labelled that node yet).
    profile: str | None = None
    #: ``spec.slo.interTokenLatency`` as written, when the source knows it.
    itl_slo: str | None = None

    def models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.model for p in self.plans))

    def classes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.gpu_class for p in self.plans))
