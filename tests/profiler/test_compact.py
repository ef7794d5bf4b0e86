import dataclasses
import json

import pytest

from roofline_profiler.compact import (
    MAX_COMPACT_BYTES,
    CompactDecodeError,
    decode_compact,
    encode_compact,
)
from tests.profiler.synthetic import synthetic_result


def test_an_eight_gpu_node_with_the_default_sweep_fits_the_termination_message() -> None:
    compact = synthetic_result(
        devices=8, name="NVIDIA H200 NVL with a long product name"
    ).to_compact()
    text = encode_compact(compact)
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    decoded = decode_compact(text)
    assert len(decoded.devices) == 8
    assert all(len(d.sweep) == 10 for d in decoded.devices)


def test_compact_round_trip_keeps_four_significant_digits() -> None:
    original = synthetic_result(devices=2).to_compact()
    decoded = decode_compact(encode_compact(original))
    for before, after in zip(original.devices, decoded.devices, strict=True):
        assert after.recommended_min_batch == before.recommended_min_batch
        assert after.ridge_point == pytest.approx(before.ridge_point, rel=1e-3)
        assert after.bandwidth_bytes_per_second == pytest.approx(
            before.bandwidth_bytes_per_second, rel=1e-3
        )
        assert after.peak_flops_per_second == pytest.approx(before.peak_flops_per_second, rel=1e-3)
        for p, q in zip(before.sweep, after.sweep, strict=True):
            assert q.batch == p.batch
            assert q.step_seconds == pytest.approx(p.step_seconds, rel=1e-3)
    assert decoded.hostname == "gpu-node-17"
    assert (decoded.shape_k, decoded.shape_n, decoded.dtype) == (4096, 14336, "bfloat16")


def test_an_oversized_profile_drops_sweeps_before_headline_numbers() -> None:
    result = synthetic_result(devices=8, batches=tuple(range(1, 129)))
    text = encode_compact(result.to_compact())
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    decoded = decode_compact(text)
    assert all(d.sweep == () for d in decoded.devices)
    assert decoded.devices[7].recommended_min_batch == result.devices[7].recommended_min_batch


def test_worst_device_is_the_one_needing_the_largest_batch() -> None:
    compact = synthetic_result(devices=3).to_compact()
    weak = dataclasses.replace(
        compact.devices[1], recommended_min_batch=512, bandwidth_bytes_per_second=1e12
    )
    node = dataclasses.replace(compact, devices=(compact.devices[0], weak, compact.devices[2]))
    assert node.worst_device().index == 1


def _valid() -> dict[str, object]:
    return json.loads(encode_compact(synthetic_result().to_compact()))  # type: ignore[no-any-return]


def _mutated(**changes: object) -> str:
    doc = _valid()
    device = doc["d"][0]  # type: ignore[index]
    for key, value in changes.items():
        if value is None:
            device.pop(key)
        else:
            device[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param(
            "roofline: device failure: out of memory", "not a JSON", id="plain-text-error"
        ),
        pytest.param(
            encode_compact(synthetic_result(devices=4).to_compact())[:700],
            "not a JSON",
            id="truncated",
        ),
        pytest.param("[1, 2]", "not a JSON object", id="array"),
        pytest.param('{"v": 99, "d": []}', "version 99", id="future-version"),
        pytest.param(
            '{"v": 1, "dt": "bfloat16", "k": 1, "n": 1, "t": 0, "s": 0, "h": "", "d": []}',
            "no devices",
            id="no-devices",
        ),
        pytest.param(_mutated(rp=-3), "'rp' must be a positive", id="negative-ridge"),
        pytest.param(_mutated(mb=0), "'mb' must be a positive integer", id="zero-min-batch"),
        pytest.param(_mutated(b=[0] * 10), "'b' must be a positive integer", id="zero-sweep-batch"),
        pytest.param(_mutated(bw="fast"), "'bw' has the wrong type", id="string-bandwidth"),
        pytest.param(_mutated(mb=True), "'mb' has the wrong type", id="boolean-batch"),
        pytest.param(_mutated(pk=None), "missing field 'pk'", id="missing-peak"),
        pytest.param(_mutated(st=[0.1]), "differ in length", id="ragged-sweep"),
        pytest.param("x" * (MAX_COMPACT_BYTES + 1), "longer than", id="too-long"),
    ],
)
def test_malformed_results_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason):
        decode_compact(text)
