"""Warning codes in the compact result: the operator's signal that a profile is suspect."""

import json
from dataclasses import replace

import pytest

from roofline_profiler.wire.compact import MAX_COMPACT_BYTES, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.result import ResultWarning
from tests.profiler.headline_builders import WIDE, with_all_intervals
from tests.profiler.synthetic import synthetic_result


def _warned(*codes: str) -> tuple[ResultWarning, ...]:
    return tuple(ResultWarning(code, f"{code}: what to do") for code in codes)


def test_each_gpus_warning_codes_travel_once_under_w() -> None:
    result = synthetic_result(devices=2)
    first, second = result.devices
    warned = replace(first, warnings=_warned("CpuContention", "InterferenceUnresolved"))
    result = replace(result, devices=(warned, second))
    text = encode_compact(result.to_compact())
    assert json.loads(text)["w"] == [["CpuContention", "InterferenceUnresolved"], []]
    decoded = decode_compact(text)
    assert decoded.devices[0].warnings == ("CpuContention", "InterferenceUnresolved")
    assert decoded.devices[1].warnings == ()
    assert "what to do" not in text  # codes only: the messages stay in the full result


def test_a_result_without_warnings_writes_no_w() -> None:
    compact = synthetic_result(devices=2).to_compact()
    quiet = replace(compact, devices=tuple(replace(d, warnings=()) for d in compact.devices))
    text = encode_compact(quiet)
    assert "w" not in json.loads(text)
    assert all(d.warnings == () for d in decode_compact(text).devices)


def test_warnings_are_dropped_after_the_step_times_and_before_the_intervals() -> None:
    compact = synthetic_result(devices=1, name="G" * 64).to_compact()
    (one,) = compact.devices
    wide = with_all_intervals(one, WIDE)
    codes = ("InterferenceUnresolved", "CpuContention", "SlopeFromDecode")
    fits_without_warnings = tuple(replace(wide, index=i, warnings=codes) for i in range(24))
    doc = json.loads(encode_compact(replace(compact, devices=fits_without_warnings)))
    assert doc["b"] == []  # the step times went first
    assert "w" not in doc
    assert "u" in doc
    few = tuple(replace(wide, index=i, warnings=codes) for i in range(8))
    doc = json.loads(encode_compact(replace(compact, devices=few)))
    assert len(doc["w"]) == 8
    assert len(json.dumps(doc, separators=(",", ":")).encode()) <= MAX_COMPACT_BYTES


def _with_w(w: object) -> str:
    doc = json.loads(encode_compact(synthetic_result(devices=1).to_compact()))
    doc["w"] = w
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(_with_w([]), "warnings and devices differ", id="count"),
        pytest.param(_with_w([[1]]), "'warning' is not a string", id="number"),
        pytest.param(_with_w([[""]]), "is not an allowed string", id="empty"),
        pytest.param(_with_w([["W" * 41]]), "is not an allowed string", id="long"),
        pytest.param(_with_w([["W"] * 17]), "more than 16", id="many"),
        pytest.param(_with_w({"0": []}), "wrong type", id="object"),
    ],
)
def test_malformed_warnings_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason):
        decode_compact(text)
