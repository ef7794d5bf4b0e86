"""Model plans in the compact result: they must arrive whole in the termination message."""

import json
from dataclasses import replace

import pytest

from roofline_profiler.core.itl_model import ItlModel
from roofline_profiler.core.planning import ModelPlan, StepPrediction
from roofline_profiler.wire.compact import (
    MAX_COMPACT_BYTES,
    encode_compact,
)
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.compact_models import compact_plan, compact_plans
from tests.profiler.wire.compact_builders import BATCHES
from tests.profiler.wire.compact_builders import plan as _plan
from tests.profiler.wire.compact_builders import profile as _profile


def test_eight_gpus_with_eight_models_of_the_longest_names_arrive_whole() -> None:
    profile = _profile(gpus=8, models=8)
    text = encode_compact(profile)
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    decoded = decode_compact(text)
    assert len(decoded.devices) == 8
    for device in decoded.devices:
        assert [p.name for p in device.models] == [p.name for p in profile.devices[0].models]
        for plan in device.models:
            assert len(plan.name) == 63
            assert (plan.min_batch, plan.max_batch_by_memory, plan.max_batch_by_latency) == (
                1234,
                65536,
                12345,
            )
            assert plan.context_tokens == 131072
            assert plan.tensor_parallel == 8
            assert plan.step_seconds_at_min_batch == pytest.approx(0.01235, rel=1e-9)
            assert plan.step_seconds_at_max_batch == pytest.approx(0.2346, rel=1e-9)


def test_in_the_largest_result_the_itl_travels_once_per_model_as_the_gpus_envelope() -> None:
    """The ITL terms of every GPU do not fit beside 8 × 8 plans: the first GPU carries each
    model's line at or above every GPU's (the largest of each term and of the error), the others
    none, and the node's fold of them is that line."""
    decoded = decode_compact(encode_compact(_profile(gpus=8, models=8)))
    first, *others = decoded.devices
    for plan in first.models:
        assert plan.itl_intercept_seconds == pytest.approx(0.008123456 * 1.1, rel=1e-3)
        assert plan.itl_per_sequence_seconds == pytest.approx(1.2345678e-5 * 1.07, rel=1e-3)
        assert plan.itl_per_sequence_context_token_seconds == pytest.approx(
            3.1234567e-8 * 1.14, rel=1e-3
        )
        assert plan.itl_max_relative_error == pytest.approx(0.16)
    assert all(p.itl_intercept_seconds is None for d in others for p in d.models)


def test_a_small_result_keeps_every_gpus_itl_model() -> None:
    decoded = decode_compact(encode_compact(_profile(gpus=2, models=2, name_chars=8)))
    second = decoded.devices[1].models[0]
    assert second.itl_per_sequence_context_token_seconds == pytest.approx(
        3.1234567e-8 * 1.02, rel=1e-3
    )
    assert second.itl_max_relative_error == pytest.approx(0.1)
    assert second.itl_seconds(8, 4096) == pytest.approx(
        0.008123 + 8 * 1.247e-5 + 8 * 4096 * 3.186e-8, rel=1e-3
    )


def test_a_plan_without_an_itl_model_travels_in_the_shorter_layout() -> None:
    profile = _profile(gpus=1, models=1, name_chars=4)
    bare = replace(
        profile.devices[0].models[0],
        itl_intercept_seconds=None,
        itl_per_sequence_seconds=None,
        itl_per_sequence_context_token_seconds=None,
        itl_max_relative_error=None,
    )
    profile = replace(profile, devices=(replace(profile.devices[0], models=(bare,)),))
    text = encode_compact(profile)
    assert len(json.loads(text)["p"][0][0]) == 6
    decoded = decode_compact(text).devices[0].models[0]
    assert (decoded.min_batch, decoded.itl_intercept_seconds) == (1234, None)


def test_a_version_2_result_reads_with_no_itl_model() -> None:
    raw = json.loads(_wire())
    raw["v"] = 2
    raw["p"] = [[raw["p"][0][0][:5] + raw["p"][0][0][9:]]]
    plan = decode_compact(json.dumps(raw)).devices[0].models[0]
    assert plan.min_batch == 1234
    assert plan.itl_intercept_seconds is None


def test_a_version_2_result_with_the_itl_positions_is_refused() -> None:
    raw = json.loads(_wire())
    raw["v"] = 2
    with pytest.raises(CompactDecodeError, match="not an array of 6 fields"):
        decode_compact(json.dumps(raw))


def test_model_names_are_written_once_not_per_gpu() -> None:
    text = encode_compact(_profile(gpus=8, models=1, name_chars=40))
    assert text.count("m" * 39) == 1


def test_model_step_times_then_per_gpu_itl_go_before_the_sweeps_step_times() -> None:
    decoded = decode_compact(encode_compact(_profile(gpus=8, models=7)))
    assert decoded.batches == BATCHES
    assert all(d.step_seconds for d in decoded.devices)
    assert not any(p.step_seconds for d in decoded.devices for p in d.models)
    assert decoded.devices[1].models[0].itl_intercept_seconds is None
    largest = decode_compact(encode_compact(_profile(gpus=8, models=8)))
    assert not largest.batches
    assert largest.devices[0].models[0].itl_intercept_seconds is not None


def test_a_small_profile_keeps_every_models_step_times() -> None:
    decoded = decode_compact(encode_compact(_profile(gpus=2, models=2, name_chars=8)))
    plan = decoded.devices[1].models[1]
    assert plan.step_seconds == pytest.approx([0.0123456 * (i + 1) for i in range(10)], rel=1e-3)


def test_tokens_per_second_at_the_range_ends_are_batch_over_step() -> None:
    plan = _plan("m", min_batch=32, max_batch_by_latency=96, max_batch_by_memory=4096)
    assert plan.max_batch == 96
    assert plan.tokens_per_second_at_min_batch == pytest.approx(32 / 0.01234567)
    assert plan.tokens_per_second_at_max_batch == pytest.approx(96 / 0.2345678)
    assert plan.kv_cache_tokens == 4096 * 131072


def test_without_an_efficient_batch_the_range_starts_at_its_high_end() -> None:
    plan = _plan("m", min_batch=None, max_batch_by_latency=None, max_batch_by_memory=40)
    assert plan.range_low == plan.max_batch == 40


def test_without_an_efficient_batch_there_are_no_tokens_per_second_at_a_min_batch() -> None:
    plan = _plan("m", min_batch=None, max_batch_by_latency=None, max_batch_by_memory=40)
    assert plan.tokens_per_second_at_min_batch is None
    assert plan.tokens_per_second_at_max_batch == pytest.approx(40 / 0.2345678)


def test_a_gpu_without_a_plan_for_a_model_keeps_the_others() -> None:
    profile = _profile(gpus=2, models=2, name_chars=4)
    first = profile.devices[0]
    devices = (replace(first, models=first.models[1:]), profile.devices[1])
    decoded = decode_compact(encode_compact(replace(profile, devices=devices)))
    assert [p.name for p in decoded.devices[0].models] == ["1mmm"]
    assert sorted(p.name for p in decoded.devices[1].models) == ["0mmm", "1mmm"]


def test_optional_numbers_survive_as_null() -> None:
    plan = _plan(
        "m",
        min_batch=None,
        max_batch_by_latency=None,
        step_seconds_at_min_batch=None,
        step_seconds_at_max_batch=None,
        step_seconds=(),
        itl_intercept_seconds=0.008123,
        itl_per_sequence_seconds=None,
        itl_per_sequence_context_token_seconds=3.123e-8,
        itl_max_relative_error=0.09,
    )
    profile = _profile(gpus=1, models=0)
    profile = replace(profile, devices=(replace(profile.devices[0], models=(plan,)),))
    assert decode_compact(encode_compact(profile)).devices[0].models == (plan,)


def test_a_result_without_models_has_no_model_keys() -> None:
    raw = json.loads(encode_compact(_profile(gpus=1, models=0)))
    assert "m" not in raw
    assert "p" not in raw


def _wire(**changes: object) -> str:
    raw = json.loads(encode_compact(_profile(gpus=1, models=1, name_chars=4)))
    raw.update(changes)
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(_wire(p=[]), "differ in count", id="plans-for-fewer-devices"),
        pytest.param(_wire(p=[[]]), "one entry per model", id="plans-for-fewer-models"),
        pytest.param(_wire(m=[["x", 0, 1]]), "context", id="zero-context"),
        pytest.param(_wire(m=[["x", 4096]]), "model #0", id="short-model-array"),
        pytest.param(_wire(p=[[[1, -1, None, 1, 1]]]), "max batch by memory", id="negative-max"),
        pytest.param(_wire(p=[[[1, 2, None, 0, 1]]]), "step at min", id="zero-step"),
        pytest.param(_wire(p=[[[1, 2, None, 1, 1, [1] * 11]]]), "more step times", id="long-steps"),
        pytest.param(_wire(p=[[[True, 2, None, 1, 1]]]), "min batch", id="boolean-min"),
        pytest.param(
            _wire(p=[[[1, 2, None, 1, 1, -1, 1, 1, 0.1]]]), "itl intercept", id="negative-itl"
        ),
        pytest.param(_wire(p=[[[1, 2, None, 1, 1, 1, 1, 1, "x"]]]), "itl error", id="string-error"),
        pytest.param(_wire(p=[[[1, 2, None, 1, 1, 1, 1]]]), "10 fields", id="half-an-itl"),
    ],
)
def test_malformed_model_plans_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason):
        decode_compact(text)


def _planned(**changes: object) -> ModelPlan:
    base = ModelPlan(
        name="m",
        dtype="bfloat16",
        weight_bytes=1,
        kv_cache_bytes_per_token=1,
        context_tokens=4096,
        tensor_parallel=1,
        tensor_parallel_measured=True,
        min_batch=8,
        min_batch_reason=None,
        max_batch_by_memory=20,
        max_batch_by_latency=16,
        recommended_range=(8, 16),
        tokens_per_second_at_range=(800.0, 1280.0),
        predictions=tuple(StepPrediction(b, 4096, 0.001 * b) for b in (1, 4, 16, 64)),
        cost_per_million_tokens=(),
        engine_settings={},
        warnings=(),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_itl_model_travels_with_its_error_rounded_up() -> None:
    itl = ItlModel(0.0081234, 1.2e-5, 3.1e-8, 0.09131, (1, 4), (1024, 4096))
    compact = compact_plan(_planned(itl_model=itl), (1, 4, 16, 64))
    assert compact.itl_intercept_seconds == 0.0081234
    assert compact.itl_per_sequence_context_token_seconds == 3.1e-8
    assert compact.itl_max_relative_error == 0.092
    assert compact_plan(_planned(), (1,)).itl_max_relative_error is None


def test_without_an_efficient_batch_no_step_at_a_min_batch_travels() -> None:
    compact = compact_plan(_planned(min_batch=None, recommended_range=(16, 16)), (1,))
    assert compact.step_seconds_at_min_batch is None
    assert compact.step_seconds_at_max_batch == pytest.approx(0.0125)


def test_a_plan_becomes_the_compact_numbers_with_steps_up_to_the_memory_bound() -> None:
    compact = compact_plan(_planned(), (1, 4, 16, 64))
    assert (compact.min_batch, compact.max_batch_by_memory, compact.max_batch_by_latency) == (
        8,
        20,
        16,
    )
    assert compact.step_seconds_at_min_batch == pytest.approx(0.01)
    assert compact.step_seconds_at_max_batch == pytest.approx(0.0125)
    assert compact.tokens_per_second_at_max_batch == pytest.approx(1280.0)
    assert compact.step_seconds == pytest.approx((0.001, 0.004, 0.016))


def test_an_empty_range_travels_without_step_times_at_its_ends() -> None:
    compact = compact_plan(
        _planned(min_batch=32, recommended_range=None, tokens_per_second_at_range=None), (1,)
    )
    assert compact.step_seconds_at_min_batch is None
    assert compact.step_seconds_at_max_batch is None
    assert compact.min_batch == 32


def test_a_model_planned_at_several_contexts_travels_once() -> None:
    plans = compact_plans([_planned(), _planned(context_tokens=8192)], (1,))
    assert [p.context_tokens for p in plans] == [4096]
