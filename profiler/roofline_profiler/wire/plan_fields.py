"""The published numbers of a model's plan, each declared once: what it is called in every form.

A model's plan on a GPU (:class:`~roofline_profiler.core.planning.ModelPlan`) travels to the
operator as a ``CompactModelPlan`` (``compact_models.py``): the numbers in :data:`MODEL_PLAN`
whose row names a wire position travel, in the table's order, and the others are derived from
them (properties of ``CompactModelPlan``: ``maxBatch`` is the smaller bound, tokens/s are
``batch / step``), so they cost no bytes in the termination message. The operator writes every
row into a ``status.nodes[].models[]`` entry, summarizes some across nodes in ``status.models``,
keeps the batch bounds when an entry must shed its detail, folds a node's GPUs into one plan row
by row and publishes the rows with a gauge as ``roofline_model_*``. The compact encoder and
reader, the operator's status entry and its reader, the summary, the size trimming, the fold and
the gauges walk the table, so a new published number is one more row (and, when it travels, its
field on ``CompactModelPlan``; the plan arrays grow with the table, which makes a new compact
version).

The JSON document's plan (``ModelPlan.to_dict``) is the profiler's whole record of it: reasons,
pairs, predictions and engine flags in an order of their own, written by the pure planning module
that this one builds on. The rows name how each travelling number is taken from it
(:attr:`PlanField.of_plan`); the batch bounds keep their document keys in the status.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.core.itl_model import stated_error
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.wire.compact_fields import (
    ITL_CONTEXT_TERM_UNIT,
    SIGNIFICANT_DIGITS,
    STEP_UNIT,
    in_unit,
    measured,
    whole,
)

#: The compact version whose plan arrays hold every row of :data:`MODEL_PLAN`; a row says from
#: which version on it travels (:attr:`PlanField.since`), so the reader of an older result takes
#: the positions it had and leaves the later rows unknown.
PLAN_ARRAY_VERSION = 3
#: Significant digits of a fit's worst relative error: a bound, rounded up.
ERROR_SIGNIFICANT_DIGITS = 2


def largest_or_none(values: Sequence[Any]) -> Any:
    """The largest, or ``None`` when one is unknown: a min batch or a step that holds on every
    GPU is the worst GPU's, and an unknown one leaves the node's unknown."""
    return None if any(v is None for v in values) else max(values)


def smallest_known(values: Sequence[Any]) -> Any:
    """The smallest known value, ``None`` when none is known: a bound that holds on every GPU."""
    known = [v for v in values if v is not None]
    return min(known) if known else None


@dataclass(frozen=True)
class PlanGauge:
    """A ``roofline_model_*`` gauge that rows of the table publish."""

    name: str
    help: str
    #: The extra label that tells the gauge's rows apart (``bound``); ``None`` for one row.
    label: str | None = None


@dataclass(frozen=True)
class PlanField:
    """One published number of a model's plan and its name in every form that carries it."""

    #: The ``CompactModelPlan`` attribute that holds it: a field for a number that travels, a
    #: property for one derived from those.
    attribute: str
    #: Its key in a ``status.nodes[].models[]`` entry and in ``status.models`` (the JSON
    #: document's key too, where the document holds the number as such).
    key: str
    #: Its position's name in a plan's compact array, which the reader's messages name;
    #: ``None`` for a derived number, which does not travel and is not read back.
    wire_name: str | None = None
    #: The plausibility table's quantity its readers check (a number that travels).
    quantity: str | None = None
    #: ``False`` for a number every plan has (an entry without it is a failure's).
    optional: bool = True
    #: Significant digits of a decimal on the wire and in the status; ``None`` for a whole
    #: number, written exactly.
    digits: int | None = None
    #: The compact format's unit of a decimal (the value is divided by it, then rounded).
    wire_unit: float = 1.0
    #: How a node's GPUs combine into the number that holds on all of them (a number that
    #: travels; a derived one follows from those).
    fold: Callable[[Sequence[Any]], Any] = largest_or_none
    #: How the profiler's full plan gives it; ``None``: the ``ModelPlan`` attribute of the same
    #: name (and the same JSON document key).
    of_plan: Callable[[ModelPlan], Any] | None = None
    #: Summarized across nodes in ``status.models`` as ``{min, median, max}``.
    summarized: bool = True
    #: A batch bound: kept in a status entry whose detail is dropped for size.
    bound: bool = False
    #: Its gauge, and the value of the gauge's extra label that names this row.
    gauge: PlanGauge | None = None
    gauge_label: str | None = None
    #: The first compact version whose plan arrays carry it (a number that travels); ``None``:
    #: only the newest layout (a row being added, which makes a new compact version).
    since: int | None = None

    @property
    def travels(self) -> bool:
        return self.wire_name is not None

    @property
    def is_whole(self) -> bool:
        return self.digits is None

    def value_of(self, plan: Any) -> Any:
        """The number of a ``CompactModelPlan``; ``None`` where the plan has none."""
        return getattr(plan, self.attribute)

    def from_plan(self, plan: ModelPlan) -> Any:
        """The number as the profiler's full plan gives it."""
        if self.of_plan is None:
            return getattr(plan, self.attribute)
        return self.of_plan(plan)

    def to_wire(self, value: float | None) -> float | int | None:
        """The value as a plan's compact array writes it (``null`` for none)."""
        if value is None or self.digits is None:
            return value
        return in_unit(value, self.wire_unit, self.digits)

    def from_wire(self, raw: Any, where: str) -> Any:
        """The value read from a plan's compact array, checked against the plausibility table."""
        if self.wire_name is None or self.quantity is None:
            raise TypeError(f"{self.key} is derived: it does not travel")
        if raw is None and self.optional:
            return None
        if self.is_whole:
            return whole(raw, self.quantity, self.wire_name, where)
        return measured(raw, self.quantity, self.wire_name, where, self.wire_unit)

    def from_status(self, entry: Mapping[str, Any]) -> Any:
        """The value kept in a status entry, checked likewise (``ValueError`` when it is not)."""
        if self.quantity is None:
            raise TypeError(f"{self.key} is derived: it is not read back")
        value = entry.get(self.key)
        if value is None and self.optional:
            return None
        if self.is_whole:
            return plausibility.integer(value, self.quantity, self.key)
        return plausibility.number(value, self.quantity, self.key)


def _step_at_range_end(plan: ModelPlan, end: int) -> float | None:
    """The predicted step at one end of the recommended range: ``batch / tokens per second``
    there, as the plan computed them; ``None`` when the range is empty, and at the low end when
    no batch reaches the efficiency threshold (the range is then its high end alone, and a step
    "at the min batch" would publish a min batch there is not)."""
    if plan.recommended_range is None or plan.tokens_per_second_at_range is None:
        return None
    if end == 0 and plan.min_batch is None:
        return None
    return plan.recommended_range[end] / plan.tokens_per_second_at_range[end]


def _itl_term(plan: ModelPlan, term: int) -> float | None:
    """One term of the plan's ITL model (``itl_model.TERMS``); ``None`` without one."""
    return None if plan.itl_model is None else plan.itl_model.coefficients[term]


def _itl_error(plan: ModelPlan) -> float | None:
    """The ITL model's worst relative error, rounded *up* to its digits: a bound stays one."""
    if plan.itl_model is None:
        return None
    return stated_error(plan.itl_model.max_relative_error, ERROR_SIGNIFICANT_DIGITS)


MIN_BATCH_GAUGE = PlanGauge(
    "roofline_model_recommended_min_batch",
    "Smallest decode batch of the model that reaches the efficiency threshold on the GPU.",
)
MAX_BATCH_GAUGE = PlanGauge(
    "roofline_model_max_batch",
    "Largest decode batch of the model by memory (KV cache at the planned context) or by "
    "the inter-token latency SLO.",
    label="bound",
)
TOKENS_GAUGE = PlanGauge(
    "roofline_model_tokens_per_second",
    "Predicted decode tokens/s of one replica at the recommended range's low and high end.",
    label="range_end",
)
ITL_INTERCEPT_GAUGE = PlanGauge(
    "roofline_model_itl_intercept_seconds",
    "α of the model's ITL model step(B, C) ≈ α + β·B + γ·B·C: seconds of a decode step "
    "whatever the batch.",
)
ITL_PER_SEQUENCE_GAUGE = PlanGauge(
    "roofline_model_itl_per_sequence_seconds",
    "β of the model's ITL model: seconds each sequence of the batch adds, attention aside.",
)
ITL_CONTEXT_GAUGE = PlanGauge(
    "roofline_model_itl_per_sequence_context_token_seconds",
    "γ of the model's ITL model: seconds each sequence adds per token of its context.",
)

#: The published numbers of a model's plan, in the order of every form.
MODEL_PLAN: tuple[PlanField, ...] = (
    PlanField(
        attribute="min_batch",
        key="minBatch",
        wire_name="min batch",
        since=1,
        quantity="min batch",
        bound=True,
        gauge=MIN_BATCH_GAUGE,
    ),
    PlanField(
        attribute="max_batch_by_memory",
        key="maxBatchByMemory",
        wire_name="max batch by memory",
        since=1,
        quantity="batch bound",
        optional=False,
        fold=smallest_known,
        bound=True,
        gauge=MAX_BATCH_GAUGE,
        gauge_label="memory",
    ),
    PlanField(
        attribute="max_batch_by_latency",
        key="maxBatchByLatency",
        wire_name="max batch by latency",
        since=1,
        quantity="batch bound",
        fold=smallest_known,
        bound=True,
        gauge=MAX_BATCH_GAUGE,
        gauge_label="latency",
    ),
    PlanField(attribute="max_batch", key="maxBatch", bound=True),
    PlanField(attribute="kv_cache_tokens", key="kvCacheTokens"),
    PlanField(
        attribute="tokens_per_second_at_min_batch",
        key="tokensPerSecondAtMinBatch",
        digits=SIGNIFICANT_DIGITS,
        gauge=TOKENS_GAUGE,
        gauge_label="low",
    ),
    PlanField(
        attribute="tokens_per_second_at_max_batch",
        key="tokensPerSecondAtMaxBatch",
        digits=SIGNIFICANT_DIGITS,
        gauge=TOKENS_GAUGE,
        gauge_label="high",
    ),
    PlanField(
        attribute="step_seconds_at_min_batch",
        key="stepSecondsAtMinBatch",
        wire_name="step at min",
        since=1,
        quantity="model step",
        digits=SIGNIFICANT_DIGITS,
        wire_unit=STEP_UNIT,
        of_plan=lambda plan: _step_at_range_end(plan, 0),
        summarized=False,
    ),
    PlanField(
        attribute="step_seconds_at_max_batch",
        key="stepSecondsAtMaxBatch",
        wire_name="step at max",
        since=1,
        quantity="model step",
        digits=SIGNIFICANT_DIGITS,
        wire_unit=STEP_UNIT,
        of_plan=lambda plan: _step_at_range_end(plan, 1),
        summarized=False,
    ),
    # The ITL model travels in full, so that the operator publishes it per GPU; a node's is the
    # largest of each term over its GPUs (a line at or above every GPU's at any batch and
    # context) and the largest error.
    PlanField(
        attribute="itl_intercept_seconds",
        key="itlInterceptSeconds",
        wire_name="itl intercept",
        since=3,
        quantity="itl term",
        digits=SIGNIFICANT_DIGITS,
        wire_unit=STEP_UNIT,
        of_plan=lambda plan: _itl_term(plan, 0),
        summarized=False,
        gauge=ITL_INTERCEPT_GAUGE,
    ),
    PlanField(
        attribute="itl_per_sequence_seconds",
        key="itlPerSequenceSeconds",
        wire_name="itl per sequence",
        since=3,
        quantity="itl term",
        digits=SIGNIFICANT_DIGITS,
        wire_unit=STEP_UNIT,
        of_plan=lambda plan: _itl_term(plan, 1),
        summarized=False,
        gauge=ITL_PER_SEQUENCE_GAUGE,
    ),
    PlanField(
        attribute="itl_per_sequence_context_token_seconds",
        key="itlPerSequenceContextTokenSeconds",
        wire_name="itl per context token",
        since=3,
        quantity="itl term",
        digits=SIGNIFICANT_DIGITS,
        wire_unit=ITL_CONTEXT_TERM_UNIT,
        of_plan=lambda plan: _itl_term(plan, 2),
        summarized=False,
        gauge=ITL_CONTEXT_GAUGE,
    ),
    PlanField(
        attribute="itl_max_relative_error",
        key="itlMaxRelativeError",
        wire_name="itl error",
        since=3,
        quantity="relative error",
        digits=ERROR_SIGNIFICANT_DIGITS,
        of_plan=_itl_error,
        summarized=False,
    ),
)


def travelling(version: int | None = None) -> tuple[PlanField, ...]:
    """The rows that travel in a plan's compact array of ``version`` (``None``: the newest
    layout, every row), in its order."""
    return tuple(
        f
        for f in MODEL_PLAN
        if f.travels and (version is None or (f.since is not None and f.since <= version))
    )


def newest() -> tuple[PlanField, ...]:
    """The rows the newest layout adds to the one before it."""
    return tuple(f for f in travelling() if f.since is None or f.since >= PLAN_ARRAY_VERSION)


def plan_positions(version: int | None = None) -> tuple[str, ...]:
    """The positions of a plan's array under ``p`` in ``version``, named as the reader's
    messages name them: the travelling numbers, then the optional step times."""
    named = (f.wire_name for f in travelling(version) if f.wire_name is not None)
    return (*named, "step times")


def required_keys() -> tuple[str, ...]:
    """The status keys every planned entry has; a failed model's entry has none of them."""
    return tuple(f.key for f in MODEL_PLAN if not f.optional)


def gauges() -> tuple[PlanGauge, ...]:
    """The gauges the rows publish, each once, in the order of the table."""
    return tuple(dict.fromkeys(f.gauge for f in MODEL_PLAN if f.gauge is not None))
