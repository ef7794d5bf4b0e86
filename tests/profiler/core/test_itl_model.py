import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from roofline_profiler.core.itl_model import (
    ItlFitError,
    ItlModel,
    ItlPoint,
    fit_batches,
    fit_contexts,
    fit_itl,
    fit_plan,
)

BATCHES = (1, 2, 4, 8, 16, 32, 64)
CONTEXTS = (1024, 2048, 3072, 4096)


def _grid(step, batches=BATCHES, contexts=CONTEXTS) -> list[ItlPoint]:  # type: ignore[no-untyped-def]
    return [ItlPoint(b, c, step(b, c)) for b in batches for c in contexts]


def _weighted_lstsq(points: list[ItlPoint], columns: tuple[int, ...]) -> np.ndarray:
    """The relative least-squares fit as numpy solves it, an independent reference."""
    rows = np.array([[1.0, p.batch, p.batch * p.context_tokens] for p in points])
    steps = np.array([p.step_seconds for p in points])
    solution, *_ = np.linalg.lstsq(rows[:, columns] / steps[:, None], np.ones(len(points)))
    full = np.zeros(3)
    full[list(columns)] = solution
    return full


def test_a_step_that_is_exactly_linear_is_recovered_with_no_error() -> None:
    model = fit_itl(_grid(lambda b, c: 0.008 + 2e-5 * b + 3e-8 * b * c))
    assert model.coefficients == pytest.approx((0.008, 2e-5, 3e-8), rel=1e-10)
    assert model.max_relative_error == pytest.approx(0, abs=1e-12)
    assert model.batches == BATCHES
    assert model.contexts == CONTEXTS


def test_the_fit_minimizes_relative_residuals_as_weighted_least_squares_does() -> None:
    points = _grid(lambda b, c: 0.008 + 1e-4 * b**1.2 + 2e-8 * b * c)
    model = fit_itl(points)
    reference = _weighted_lstsq(points, (0, 1, 2))
    assert all(reference > 0)
    assert model.coefficients == pytest.approx(tuple(reference), rel=1e-9)


def test_the_stated_error_is_the_worst_relative_error_over_the_fitted_points() -> None:
    points = _grid(lambda b, c: 0.008 + 1e-4 * b**1.2 + 2e-8 * b * c)
    model = fit_itl(points)
    worst = max(
        abs(model.step_seconds(p.batch, p.context_tokens) - p.step_seconds) / p.step_seconds
        for p in points
    )
    assert model.max_relative_error == worst
    assert 0 < worst < 0.5


def test_a_term_the_steps_would_make_negative_is_zero_and_the_rest_refitted() -> None:
    """Steps that fall with the batch at a fixed context would need a negative per-sequence
    cost; the fit keeps it at zero and is the least-squares fit of the other two terms, which
    satisfies the optimality conditions of the non-negative problem (the residual grows when the
    zero term is made positive)."""
    points = _grid(lambda b, c: 0.01 + 4e-8 * b * c - 1e-5 * b)
    unconstrained = _weighted_lstsq(points, (0, 1, 2))
    assert unconstrained[1] < 0
    model = fit_itl(points)
    assert model.per_sequence_seconds == 0
    assert model.coefficients == pytest.approx(tuple(_weighted_lstsq(points, (0, 2))), rel=1e-9)
    rows = np.array([[1.0, p.batch, p.batch * p.context_tokens] for p in points])
    steps = np.array([p.step_seconds for p in points])
    residual = rows @ np.array(model.coefficients) / steps - 1
    gradient = 2 * (rows / steps[:, None]).T @ residual
    assert gradient[1] > 0


@pytest.mark.parametrize(
    ("points", "message"),
    [
        pytest.param(_grid(lambda b, c: 0.01, batches=(4,)), "2 batches", id="one-batch"),
        pytest.param(_grid(lambda b, c: 0.01, contexts=(4096,)), "2 contexts", id="one-context"),
        pytest.param([ItlPoint(1, 1024, 0.0), ItlPoint(2, 2048, 0.01)], "positive", id="zero-step"),
        pytest.param(
            [ItlPoint(1, 1024, math.nan), ItlPoint(2, 2048, 0.01)], "positive", id="nan-step"
        ),
    ],
)
def test_predictions_that_cannot_determine_the_terms_are_refused(
    points: list[ItlPoint], message: str
) -> None:
    with pytest.raises(ItlFitError, match=message):
        fit_itl(points)


def test_a_plan_is_fitted_over_quarters_of_its_context_and_the_batches_that_fit() -> None:
    asked: list[tuple[int, int]] = []

    def predict(batch: int, context: int) -> float:
        asked.append((batch, context))
        return 0.01 + 1e-5 * batch + 2e-8 * batch * context

    model = fit_plan(predict, BATCHES, 8192, max_batch_by_memory=20)
    assert model is not None
    assert model.batches == (1, 2, 4, 8, 16)
    assert model.contexts == (2048, 4096, 6144, 8192)
    assert sorted(asked) == sorted((b, c) for b in (1, 2, 4, 8, 16) for c in model.contexts)


def test_fit_batches_keep_the_two_smallest_when_fewer_fit_in_memory() -> None:
    assert fit_batches((8, 1, 2, 4), max_batch_by_memory=1) == (1, 2)
    assert fit_batches((1, 2, 4), max_batch_by_memory=0) == (1, 2)
    assert fit_batches((1, 2, 4), max_batch_by_memory=4) == (1, 2, 4)


def test_fit_contexts_are_distinct_and_at_least_one_token() -> None:
    assert fit_contexts(4096) == (1024, 2048, 3072, 4096)
    assert fit_contexts(2) == (1, 2)


def test_a_plan_whose_predictions_cannot_determine_the_fit_has_none() -> None:
    assert fit_plan(lambda b, c: 0.01, (1,), 4096, 100) is None
    assert fit_plan(lambda b, c: 0.01, BATCHES, 1, 100) is None


def test_the_largest_batch_within_an_itl_follows_the_line() -> None:
    model = ItlModel(0.01, 1e-4, 1e-8, 0.0, BATCHES, CONTEXTS)
    # 0.01 + B * (1e-4 + 1e-8 * 4000) = 0.01 + B * 1.4e-4 <= 0.024 -> B <= 100
    assert model.max_batch_within(0.024, 4000) == 100
    assert model.max_batch_within(0.0101, 4000) == 0


def test_the_model_reads_back_from_its_json_form() -> None:
    model = fit_itl(_grid(lambda b, c: 0.008 + 1e-4 * b**1.2 + 2e-8 * b * c))
    assert ItlModel.from_dict(model.to_dict()) == model


@given(
    alpha=st.floats(1e-4, 1.0),
    beta=st.floats(1e-7, 1e-2),
    gamma=st.floats(1e-11, 1e-6),
    context=st.integers(4, 1 << 17),
)
@example(alpha=1e-4, beta=1e-7, gamma=1e-6, context=1 << 17)
@example(alpha=1.0, beta=1e-2, gamma=1e-11, context=4)
def test_any_linear_step_is_recovered(
    alpha: float, beta: float, gamma: float, context: int
) -> None:
    points = _grid(lambda b, c: alpha + beta * b + gamma * b * c, contexts=fit_contexts(context))
    model = fit_itl(points)
    assert model.max_relative_error < 1e-9
    for p in points:
        assert model.step_seconds(p.batch, p.context_tokens) == pytest.approx(
            p.step_seconds, rel=1e-9
        )
