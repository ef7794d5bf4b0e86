"""The table of a device's headline numbers: each row names one number in every published form,
and the JSON document and the compact format follow the table (one more row reaches both)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from roofline_profiler.core import plausibility
from roofline_profiler.wire import fields
from roofline_profiler.wire.compact import encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.fields import DEVICE_HEADLINE, HeadlineField
from roofline_profiler.wire.result import DeviceResult, ProfileResult
from tests.profiler.headline_builders import BANDWIDTH
from tests.profiler.synthetic import add_headline_row, synthetic_result


@pytest.fixture
def one_more_row(monkeypatch: pytest.MonkeyPatch) -> HeadlineField:
    return add_headline_row(monkeypatch)


def test_every_row_names_a_quantity_of_the_plausibility_table() -> None:
    for f in DEVICE_HEADLINE:
        assert f.quantity in plausibility.RANGES, f.quantity


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(lambda f: f.attribute, id="attribute"),
        pytest.param(lambda f: f.key, id="key"),
        pytest.param(lambda f: f.interval_key, id="interval key"),
        pytest.param(lambda f: f.metric, id="metric"),
        pytest.param(lambda f: f.interval_metric, id="interval metric"),
    ],
)
def test_no_two_rows_share_a_name(names: Callable[[HeadlineField], str]) -> None:
    taken = [names(f) for f in DEVICE_HEADLINE]
    assert len(set(taken)) == len(taken)


def test_the_compact_positions_are_those_of_the_published_contract() -> None:
    assert fields.gpu_fields() == (
        "index",
        "name",
        "bandwidth",
        "peak",
        "ridge point",
        "min batch",
        "step times",
    )
    assert fields.interval_fields() == (
        "bandwidth below",
        "bandwidth above",
        "peak below",
        "peak above",
        "ridge point below",
        "ridge point above",
        "min batch low",
        "min batch high",
    )


def test_a_whole_number_travels_exactly_and_a_measured_one_in_its_unit_and_digits() -> None:
    bandwidth, _, _, min_batch = DEVICE_HEADLINE
    assert bandwidth.to_wire(2_039_456_789_012.0) == 2039
    assert bandwidth.wire_value(2_039_456_789_012.0) == 2.039e12
    assert min_batch.to_wire(96) == 96
    assert min_batch.interval_ends == ("low", "high")
    assert bandwidth.interval_ends == ("below", "above")


def test_a_device_result_holds_each_number_with_its_interval_and_source() -> None:
    (device,) = synthetic_result().devices
    assert list(device.numbers) == [f.attribute for f in DEVICE_HEADLINE]
    for f in DEVICE_HEADLINE:
        number = f.estimate_of(device)
        assert number.interval is not None
        assert number.interval[0] <= number.value <= number.interval[1], f.quantity
        assert (number.source is not None) == (f.source_key is not None), f.quantity
    assert device.source("bandwidth_bytes_per_second") == device.numbers[BANDWIDTH].source
    assert device.interval("ridge_point") == device.numbers["ridge_point"].interval


def test_a_document_older_than_intervals_and_sources_reads_bare_values_and_old_sources() -> None:
    (device,) = synthetic_result().devices
    document = device.to_dict()
    for f in DEVICE_HEADLINE:
        document.pop(f.interval_key)
    del document["bandwidthKernel"], document["peakKernel"]
    old = DeviceResult.from_dict(document)
    assert old.interval(BANDWIDTH) == (device.bandwidth_bytes_per_second,) * 2
    assert old.interval("recommended_min_batch") == (device.recommended_min_batch,) * 2
    assert old.source(BANDWIDTH) == device.bandwidth_kind
    shape = document["peak"]["shape"]
    assert old.source("peak_flops_per_second") == f"mm {shape['m']}x{shape['n']}x{shape['k']}"


def test_a_document_without_the_min_batch_source_is_refused() -> None:
    document = synthetic_result().devices[0].to_dict()
    del document["recommendedMinBatchSource"]
    with pytest.raises(KeyError, match="recommendedMinBatchSource"):
        DeviceResult.from_dict(document)


def test_one_more_row_reaches_the_json_document_and_reads_back(
    one_more_row: HeadlineField,
) -> None:
    result = synthetic_result()
    (device,) = result.devices
    document = result.to_dict()
    (written,) = document["devices"]
    assert written[one_more_row.key] == device.read_bandwidth_bytes_per_second
    low, high = device.read_bandwidth_interval
    assert written[one_more_row.interval_key] == {"low": low, "high": high}
    assert one_more_row.source_key is not None
    assert written[one_more_row.source_key] == device.read_bandwidth_kernel
    assert ProfileResult.from_dict(json.loads(json.dumps(document))) == result


def test_one_more_row_reaches_the_compact_text_and_its_round_trip(
    one_more_row: HeadlineField,
) -> None:
    compact = synthetic_result().to_compact()
    text = encode_compact(compact)
    wire = json.loads(text)
    (gpu,) = wire["g"]
    (widths,) = wire["u"]
    assert len(gpu) == 8
    assert len(widths) == 10
    (device,) = compact.devices
    sent = one_more_row.estimate_of(device)
    assert gpu[-2] == one_more_row.to_wire(sent.value)
    (decoded,) = decode_compact(text).devices
    received = one_more_row.estimate_of(decoded)
    assert received.value == pytest.approx(sent.value, rel=5e-4)
    assert received.interval is not None
    assert received.interval[0] <= sent.value <= received.interval[1]
