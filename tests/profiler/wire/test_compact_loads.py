"""Each model's largest request rate in the compact result: it arrives whole, checked, rounded
down, and a result without it reads as before."""

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline_profiler.core.load_plan import (
    LIMITED_BY_ITL,
    LIMITED_BY_TTFT,
    LIMITS,
    LoadPlan,
    MaxRate,
    SchedulerLimits,
    Workload,
)
from roofline_profiler.wire.compact import MAX_COMPACT_BYTES, CompactProfile, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.compact_loads import CompactLoad, compact_loads, rate_down
from tests.profiler.synthetic import planned_result
from tests.profiler.wire.compact_builders import profile as _profile


def _with_loads(profile: CompactProfile, rate: float = 12.345678) -> CompactProfile:
    names = [p.name for p in profile.devices[0].models]
    loads = tuple(
        CompactLoad(name, rate * (i + 1), LIMITS[i % len(LIMITS)], 1048576, 1048576)
        for i, name in enumerate(names)
    )
    return replace(profile, loads=loads)


def _load_plan(name: str, max_rate: MaxRate | None) -> LoadPlan:
    return LoadPlan(
        name=name,
        dtype="bfloat16",
        tensor_parallel=1,
        engine="vllm",
        workload=Workload(1000, 200),
        limits=SchedulerLimits(8192, 256),
        ttft_slo_seconds=2.0,
        itl_slo_seconds=0.05,
        ttft_ladder=(),
        rates=(),
        max_rate=max_rate,
        method="",
    )


def test_eight_gpus_with_eight_models_and_their_rates_arrive_whole() -> None:
    profile = _with_loads(_profile(gpus=8, models=8))
    text = encode_compact(profile)
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    decoded = decode_compact(text)
    assert [load.name for load in decoded.loads] == [load.name for load in profile.loads]
    for sent, read in zip(profile.loads, decoded.loads, strict=True):
        assert read.limited_by == sent.limited_by
        assert (read.prompt_tokens, read.output_tokens) == (1048576, 1048576)
        assert read.requests_per_second <= sent.requests_per_second
        assert read.requests_per_second == pytest.approx(sent.requests_per_second, rel=1e-3)


def test_a_result_without_rates_has_no_rate_key_and_reads_none() -> None:
    text = encode_compact(_profile(gpus=1, models=2))
    assert "l" not in json.loads(text)
    assert decode_compact(text).loads == ()


def test_a_model_without_a_rate_is_null_and_the_others_keep_theirs() -> None:
    profile = _profile(gpus=1, models=2, name_chars=4)
    second = profile.devices[0].models[1].name
    raw = json.loads(
        encode_compact(replace(profile, loads=(CompactLoad(second, 3.5, "itl", 9, 9),)))
    )
    assert raw["l"] == [None, [3.5, "itl", 9, 9]]
    assert decode_compact(json.dumps(raw)).loads == (CompactLoad(second, 3.5, "itl", 9, 9),)


def test_a_rate_is_rounded_down_so_the_bound_holds() -> None:
    assert rate_down(12.345678) == 12.34
    assert rate_down(0.99999) == 0.9999
    assert rate_down(2.0) == 2
    assert rate_down(0.0) == 0


@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))
def test_a_rate_rounded_down_is_never_above_it_and_within_four_digits(value: float) -> None:
    rounded = rate_down(value)
    assert rounded <= value
    assert value - rounded <= 10 ** (math.floor(math.log10(value)) - 3) * 1.000001
    assert rate_down(rounded) == rounded


def test_the_first_rate_of_a_model_travels_and_a_plan_without_one_does_not() -> None:
    loads = compact_loads(
        [
            [
                _load_plan("a", MaxRate(4.0, LIMITED_BY_TTFT)),
                _load_plan("a", MaxRate(2.0, LIMITED_BY_ITL)),
                _load_plan("b", None),
            ]
        ]
    )
    assert loads == (CompactLoad("a", 4.0, LIMITED_BY_TTFT, 1000, 200),)


def test_a_node_of_several_gpus_sends_each_models_slowest_gpus_rate() -> None:
    loads = compact_loads(
        [
            [_load_plan("a", MaxRate(4.0, LIMITED_BY_TTFT)), _load_plan("b", None)],
            [_load_plan("b", MaxRate(9.0, LIMITED_BY_ITL)), _load_plan("a", MaxRate(3.5, "itl"))],
            [_load_plan("a", MaxRate(5.0, LIMITED_BY_TTFT))],
        ]
    )
    assert loads == (
        CompactLoad("a", 3.5, LIMITED_BY_ITL, 1000, 200),
        CompactLoad("b", 9.0, LIMITED_BY_ITL, 1000, 200),
    )


def _wire(**changes: object) -> str:
    profile = _profile(gpus=1, models=1, name_chars=4)
    raw = json.loads(encode_compact(_with_loads(profile)))
    raw.update(changes)
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(_wire(l=[]), "request rates and models differ", id="fewer-entries"),
        pytest.param(_wire(l=[[1, "ttft", 1]]), "4 fields", id="short-entry"),
        pytest.param(_wire(l=[[1, "memory", 1, 1]]), "limited by", id="unknown-limit"),
        pytest.param(_wire(l=[[-1, "ttft", 1, 1]]), "requests per second", id="negative-rate"),
        pytest.param(_wire(l=[[2e6, "ttft", 1, 1]]), "requests per second", id="rate-too-high"),
        pytest.param(_wire(l=[[True, "ttft", 1, 1]]), "requests per second", id="boolean-rate"),
        pytest.param(_wire(l=[[1, "ttft", 0, 1]]), "prompt tokens", id="zero-prompt"),
        pytest.param(_wire(l=[[1, "ttft", 1, 2**21]]), "output tokens", id="long-output"),
        pytest.param(_wire(l=[[1, "itl", 1, 1]] * 9), "more than 8", id="too-many"),
    ],
)
def test_malformed_rates_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason):
        decode_compact(text)


def test_rates_without_models_are_rejected() -> None:
    raw = json.loads(encode_compact(_profile(gpus=1, models=0)))
    raw["l"] = [[1, "itl", 1, 1]]
    with pytest.raises(CompactDecodeError, match="request rates without models"):
        decode_compact(json.dumps(raw))


def test_a_results_device_loads_reach_the_termination_message_and_read_back() -> None:
    result = planned_result()
    (device,) = result.devices
    (name,) = {plan.name for plan in device.models}
    loaded = replace(
        result,
        devices=(replace(device, loads=(_load_plan(name, MaxRate(6.54321, LIMITED_BY_ITL)),)),),
    )
    text = encode_compact(loaded.to_compact())
    assert json.loads(text)["l"] == [[6.543, "itl", 1000, 200]]
    assert decode_compact(text).loads == (CompactLoad(name, 6.543, LIMITED_BY_ITL, 1000, 200),)
    assert "l" not in json.loads(encode_compact(result.to_compact()))
