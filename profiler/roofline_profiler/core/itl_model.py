"""A model's inter-token latency as three numbers: ``step(B, C) ≈ α + β·B + γ·B·C``.

Autoscalers and routers that model ITL linearly (llm-d's autoscaler first asked for
``decodeParms.alpha``/``beta`` per model and accelerator) need the plan's predicted decode step as
a formula they can evaluate at any batch ``B`` and context ``C``. The three terms are the roofline
of a decode step (Williams, Waterman, Patterson 2009) read as a cost model:

* **α** (seconds): what a step costs whatever the batch — streaming the weights once, the
  head, the fixed per-step work;
* **β** (seconds per sequence): what each sequence of the batch adds beside its attention — the
  GEMMs' growing compute share and activations;
* **γ** (seconds per sequence per context token): decode attention, which reads each sequence's
  KV cache, ``C`` tokens of it, every step.

The coefficients are fitted to the plan's own predicted steps (whatever predicts them) by least
squares on *relative* residuals, ``Σ ((fit − step) / step)²``: predicted steps span an order of
magnitude between batch 1 and the largest batch, and an absolute fit would spend its accuracy on
the slowest steps and miss the small batches, where latency matters most. No coefficient may be
negative (a negative per-sequence cost is not a cost): the fit is the non-negative least-squares
optimum, found exactly by solving the unconstrained problem on every subset of the three terms and
keeping the best feasible one (the optimum is the unconstrained fit on its own support). The fit
states its own worst relative error over the points it was fitted to; a consumer of α, β, γ
should widen a threshold by it.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Contexts the fit covers, as fractions of the planned context: a running sequence holds between
#: its prompt and the planned context, so the fit must hold across that range, not at its end only.
CONTEXT_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: Fewest batches a fit needs: two tell the per-sequence terms from the intercept.
MIN_BATCHES = 2
#: Names of the three terms, in the order of :attr:`ItlModel.coefficients`.
TERMS = ("intercept", "per sequence", "per sequence and context token")


class ItlFitError(ValueError):
    """The predictions cannot determine the three terms (too few batches or contexts)."""


@dataclass(frozen=True)
class ItlPoint:
    """One predicted decode step the fit reproduces."""

    batch: int
    context_tokens: int
    step_seconds: float


@dataclass(frozen=True)
class ItlModel:
    """``step(B, C) ≈ α + β·B + γ·B·C`` and the worst relative error of the fit over its points."""

    intercept_seconds: float
    per_sequence_seconds: float
    per_sequence_context_token_seconds: float
    #: ``max |fit − step| / step`` over the fitted points.
    max_relative_error: float
    #: The points' batches and contexts, kept so that a reader can tell where the fit holds.
    batches: tuple[int, ...]
    contexts: tuple[int, ...]

    @property
    def coefficients(self) -> tuple[float, float, float]:
        return (
            self.intercept_seconds,
            self.per_sequence_seconds,
            self.per_sequence_context_token_seconds,
        )

    def step_seconds(self, batch: float, context_tokens: float) -> float:
        """The modelled decode step at ``batch`` sequences of ``context_tokens`` each."""
        alpha, beta, gamma = self.coefficients
        return alpha + beta * batch + gamma * batch * context_tokens

    def max_batch_within(self, itl_seconds: float, context_tokens: int) -> int:
        """The largest batch whose modelled step is within ``itl_seconds`` at ``context_tokens``;
        0 when not even one sequence is."""
        slope = self.per_sequence_seconds + self.per_sequence_context_token_seconds * context_tokens
        room = itl_seconds - self.intercept_seconds
        if room < slope:
            return 0
        if slope <= 0:
            raise ValueError("a model without per-sequence cost bounds no batch")
        return math.floor(room / slope + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {
            "interceptSeconds": self.intercept_seconds,
            "perSequenceSeconds": self.per_sequence_seconds,
            "perSequenceContextTokenSeconds": self.per_sequence_context_token_seconds,
            "maxRelativeError": self.max_relative_error,
            "batches": list(self.batches),
            "contexts": list(self.contexts),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ItlModel:
        return cls(
            intercept_seconds=float(d["interceptSeconds"]),
            per_sequence_seconds=float(d["perSequenceSeconds"]),
            per_sequence_context_token_seconds=float(d["perSequenceContextTokenSeconds"]),
            max_relative_error=float(d["maxRelativeError"]),
            batches=tuple(int(b) for b in d["batches"]),
            contexts=tuple(int(c) for c in d["contexts"]),
        )


def stated_error(error: float, digits: int = 2) -> float:
    """``error`` rounded *up* to ``digits`` significant digits: a bound that stays one."""
    if error <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(error)) - digits + 1)
    return float(f"{math.ceil(error / scale - 1e-9) * scale:.{digits}g}")


def fit_contexts(context_tokens: int) -> tuple[int, ...]:
    """The contexts a plan at ``context_tokens`` is fitted over (:data:`CONTEXT_FRACTIONS`)."""
    return tuple(sorted({max(1, round(context_tokens * f)) for f in CONTEXT_FRACTIONS}))


def fit_batches(batches: Sequence[int], max_batch_by_memory: int) -> tuple[int, ...]:
    """The predicted batches a fit uses: those that fit in memory at the planned context, and at
    least the :data:`MIN_BATCHES` smallest, so that a model with little room still gets a fit."""
    ordered = sorted(set(batches))
    within = [b for b in ordered if b <= max_batch_by_memory]
    return tuple(within if len(within) >= MIN_BATCHES else ordered[:MIN_BATCHES])


def _design(points: Sequence[ItlPoint]) -> list[tuple[float, float, float]]:
    """Each point's row ``(1, B, B·C)`` divided by its step: the relative residual's terms."""
    return [
        (1 / p.step_seconds, p.batch / p.step_seconds, p.batch * p.context_tokens / p.step_seconds)
        for p in points
    ]


def _least_squares(rows: Sequence[Sequence[float]], columns: Sequence[int]) -> list[float] | None:
    """``argmin ‖A x − 1‖`` over the chosen columns of ``A`` (modified Gram–Schmidt QR on the
    columns scaled to unit length, so that ``B·C`` in the millions and ``1/step`` in the tens sit
    side by side); ``None`` when the columns are linearly dependent."""
    vectors = [[row[c] for row in rows] for c in columns]
    scales = [math.sqrt(sum(v * v for v in vec)) for vec in vectors]
    if any(s == 0 for s in scales):
        return None
    q = [[v / s for v in vec] for vec, s in zip(vectors, scales, strict=True)]
    r = [[0.0] * len(columns) for _ in columns]
    for j in range(len(columns)):
        for i in range(j):
            r[i][j] = sum(a * b for a, b in zip(q[i], q[j], strict=True))
            q[j] = [b - r[i][j] * a for a, b in zip(q[i], q[j], strict=True)]
        r[j][j] = math.sqrt(sum(v * v for v in q[j]))
        if r[j][j] < 1e-12:
            return None
        q[j] = [v / r[j][j] for v in q[j]]
    rhs = [sum(q[j]) for j in range(len(columns))]
    solution = [0.0] * len(columns)
    for j in reversed(range(len(columns))):
        tail = sum(r[j][k] * solution[k] for k in range(j + 1, len(columns)))
        solution[j] = (rhs[j] - tail) / r[j][j]
    return [x / s for x, s in zip(solution, scales, strict=True)]


def _residual(rows: Sequence[Sequence[float]], coefficients: Sequence[float]) -> float:
    return sum(
        (sum(a * x for a, x in zip(row, coefficients, strict=True)) - 1) ** 2 for row in rows
    )


def _non_negative_fit(rows: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """The non-negative least-squares optimum of three terms, by enumerating their supports."""
    best: tuple[float, tuple[float, float, float]] | None = None
    for size in (3, 2, 1):
        for columns in itertools.combinations(range(3), size):
            solved = _least_squares(rows, columns)
            if solved is None or any(x < 0 for x in solved):
                continue
            full = [0.0, 0.0, 0.0]
            for c, x in zip(columns, solved, strict=True):
                full[c] = x
            coefficients = (full[0], full[1], full[2])
            residual = _residual(rows, coefficients)
            if best is None or residual < best[0]:
                best = (residual, coefficients)
    if best is None:
        raise ItlFitError("no non-negative fit of the predicted steps exists")
    return best[1]


def fit_itl(points: Sequence[ItlPoint]) -> ItlModel:
    """The :class:`ItlModel` of ``points``; :class:`ItlFitError` when they cannot determine it
    (fewer than two batches or two contexts, or a step that is not positive)."""
    if any(not (p.step_seconds > 0 and math.isfinite(p.step_seconds)) for p in points):
        raise ItlFitError("every predicted step must be a positive number of seconds")
    batches = tuple(sorted({p.batch for p in points}))
    contexts = tuple(sorted({p.context_tokens for p in points}))
    if len(batches) < MIN_BATCHES or len(contexts) < 2:
        raise ItlFitError(
            f"a fit needs at least {MIN_BATCHES} batches and 2 contexts "
            f"(got {len(batches)} and {len(contexts)})"
        )
    alpha, beta, gamma = _non_negative_fit(_design(points))
    model = ItlModel(alpha, beta, gamma, 0.0, batches, contexts)
    worst = max(
        abs(model.step_seconds(p.batch, p.context_tokens) - p.step_seconds) / p.step_seconds
        for p in points
    )
    return ItlModel(alpha, beta, gamma, worst, batches, contexts)


def fit_plan(
    predict: Callable[[int, int], float],
    batches: Sequence[int],
    context_tokens: int,
    max_batch_by_memory: int,
) -> ItlModel | None:
    """The ITL model of one plan: ``predict(batch, context)`` (the plan's predicted step) fitted
    over :func:`fit_batches` × :func:`fit_contexts`; ``None`` when those cannot determine it."""
    points = [
        ItlPoint(batch, context, predict(batch, context))
        for batch in fit_batches(batches, max_batch_by_memory)
        for context in fit_contexts(context_tokens)
    ]
    try:
        return fit_itl(points)
    except ItlFitError:
        return None
