"""The table of a model plan's published numbers: each row names one number in every form, and
the compact encoder and reader follow the table (one more row reaches both)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest

from roofline_profiler.core import plausibility
from roofline_profiler.wire import plan_fields
from roofline_profiler.wire.compact import encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.compact_models import CompactModelPlan, compact_plan
from roofline_profiler.wire.plan_fields import MODEL_PLAN, PlanField
from tests.profiler.synthetic import add_plan_row, planned_result


@pytest.fixture
def one_more_row(monkeypatch: pytest.MonkeyPatch) -> PlanField:
    return add_plan_row(monkeypatch)


def test_every_travelling_row_names_a_quantity_of_the_plausibility_table() -> None:
    for f in plan_fields.travelling():
        assert f.quantity in plausibility.RANGES, f.key


def test_a_travelling_row_is_a_field_of_the_compact_plan_and_a_derived_one_a_property() -> None:
    stored = {f.name for f in dataclasses.fields(CompactModelPlan)}
    for f in MODEL_PLAN:
        assert (f.attribute in stored) == f.travels, f.key
        assert f.travels or isinstance(getattr(CompactModelPlan, f.attribute), property), f.key


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(lambda f: f.attribute, id="attribute"),
        pytest.param(lambda f: f.key, id="key"),
        pytest.param(lambda f: (f.gauge, f.gauge_label), id="gauge"),
    ],
)
def test_no_two_rows_share_a_name(names: Callable[[PlanField], object]) -> None:
    taken = [names(f) for f in MODEL_PLAN if names(f) != (None, None)]
    assert len(set(taken)) == len(taken)


def test_the_compact_positions_are_those_of_the_published_contract() -> None:
    assert plan_fields.plan_positions() == (
        "min batch",
        "max batch by memory",
        "max batch by latency",
        "step at min",
        "step at max",
        "itl intercept",
        "itl per sequence",
        "itl per context token",
        "itl error",
        "step times",
    )
    assert plan_fields.plan_positions(2) == (
        "min batch",
        "max batch by memory",
        "max batch by latency",
        "step at min",
        "step at max",
        "step times",
    )


def test_the_gauges_are_those_of_the_published_contract_each_once() -> None:
    assert [g.name for g in plan_fields.gauges()] == [
        "roofline_model_recommended_min_batch",
        "roofline_model_max_batch",
        "roofline_model_tokens_per_second",
        "roofline_model_itl_intercept_seconds",
        "roofline_model_itl_per_sequence_seconds",
        "roofline_model_itl_per_sequence_context_token_seconds",
    ]


def test_a_batch_travels_exactly_a_step_in_microseconds_and_none_as_null() -> None:
    by_key = {f.key: f for f in MODEL_PLAN}
    min_batch, step_at_min = by_key["minBatch"], by_key["stepSecondsAtMinBatch"]
    assert min_batch.to_wire(96) == 96
    assert min_batch.to_wire(None) is None
    assert step_at_min.to_wire(0.012345678) == 12350
    assert step_at_min.from_wire(12350, "here") == pytest.approx(0.01235)


def test_the_one_number_every_plan_has_is_refused_as_null() -> None:
    by_memory = next(f for f in MODEL_PLAN if not f.optional)
    with pytest.raises(CompactDecodeError, match="max batch by memory"):
        by_memory.from_wire(None, "here")


def test_the_batch_bounds_are_the_json_documents_numbers_under_its_keys() -> None:
    plan = planned_result().devices[0].models[0]
    document = plan.to_dict()
    for f in plan_fields.travelling():
        if f.of_plan is None:
            assert document[f.key] == f.from_plan(plan), f.key


def test_the_steps_at_the_range_ends_are_batch_over_tokens_per_second_there() -> None:
    plan = planned_result().devices[0].models[0]
    assert plan.recommended_range is not None
    assert plan.tokens_per_second_at_range is not None
    compact = compact_plan(plan, ())
    low, high = plan.recommended_range
    assert compact.step_seconds_at_max_batch == high / plan.tokens_per_second_at_range[1]
    # This plan has no min batch (its range is its high end alone): no step at a min batch.
    assert plan.min_batch is None
    assert compact.step_seconds_at_min_batch is None
    efficient = dataclasses.replace(plan, min_batch=low)
    assert compact_plan(efficient, ()).step_seconds_at_min_batch == (
        low / plan.tokens_per_second_at_range[0]
    )


@pytest.mark.parametrize(
    ("fold", "values", "folded"),
    [
        pytest.param(plan_fields.largest_or_none, [16, 32], 32, id="largest"),
        pytest.param(plan_fields.largest_or_none, [16, None], None, id="largest-unknown"),
        pytest.param(plan_fields.smallest_known, [128, None, 64], 64, id="smallest-known"),
        pytest.param(plan_fields.smallest_known, [None, None], None, id="none-known"),
    ],
)
def test_a_fold_gives_the_number_that_holds_on_every_gpu(
    fold: Callable[[list[int | None]], int | None], values: list[int | None], folded: int | None
) -> None:
    assert fold(values) == folded


def test_one_more_row_reaches_the_compact_text_and_its_round_trip(
    one_more_row: PlanField,
) -> None:
    compact = planned_result().to_compact()
    (device,) = compact.devices
    (plan,) = device.models
    plan = dataclasses.replace(plan, min_batch=96)
    text = encode_compact(
        dataclasses.replace(compact, devices=(dataclasses.replace(device, models=(plan,)),))
    )
    ((plan_array,),) = json.loads(text)["p"]
    rows = len(plan_fields.travelling())
    assert len(plan_array) == rows + 1
    assert plan_array[rows - 1] == 96
    ((decoded,),) = (d.models for d in decode_compact(text).devices)
    rounded = ("step_seconds_at_min_batch", "step_seconds_at_max_batch")
    rounded += tuple(f.attribute for f in plan_fields.travelling() if f.digits is not None)
    assert decoded == dataclasses.replace(plan, **{a: getattr(decoded, a) for a in rounded})
    assert decoded.step_seconds_at_max_batch == pytest.approx(plan.step_seconds_at_max_batch, 5e-4)


def test_a_plan_array_of_the_layout_before_the_new_row_is_refused(
    one_more_row: PlanField,
) -> None:
    """The plan array grows with the table: a new row is a new compact version."""
    wire = json.loads(encode_compact(planned_result().to_compact()))
    rows = len(plan_fields.travelling())
    wire["p"][0][0] = wire["p"][0][0][: rows - 1]
    with pytest.raises(CompactDecodeError, match=f"not an array of {rows + 1} fields"):
        decode_compact(json.dumps(wire))
