import json

import pytest

from roofline_profiler.wire.compact import COMPACT_VERSION, MAX_COMPACT_BYTES, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from tests.profiler.synthetic import synthetic_result


def test_an_eight_gpu_node_with_the_default_sweep_fits_in_half_the_termination_message() -> None:
    compact = synthetic_result(
        devices=8, name="NVIDIA H200 NVL with a long product name"
    ).to_compact()
    text = encode_compact(compact)
    # The other half is room for later per-GPU additions (intervals, model plans).
    assert len(text.encode()) <= MAX_COMPACT_BYTES // 2
    decoded = decode_compact(text)
    assert len(decoded.devices) == 8
    assert len(decoded.batches) == 10
    assert all(len(d.step_seconds) == 10 for d in decoded.devices)


def test_compact_round_trip_keeps_four_significant_digits() -> None:
    original = synthetic_result(devices=2).to_compact()
    decoded = decode_compact(encode_compact(original))
    assert decoded.version == COMPACT_VERSION
    assert decoded.batches == original.batches
    for before, after in zip(original.devices, decoded.devices, strict=True):
        assert (after.index, after.name) == (before.index, before.name)
        assert after.recommended_min_batch == before.recommended_min_batch
        assert after.ridge_point == pytest.approx(before.ridge_point, rel=1e-3)
        assert after.bandwidth_bytes_per_second == pytest.approx(
            before.bandwidth_bytes_per_second, rel=1e-3
        )
        assert after.peak_flops_per_second == pytest.approx(before.peak_flops_per_second, rel=1e-3)
        assert after.step_seconds == pytest.approx(before.step_seconds, rel=1e-3)
    assert (decoded.shape_k, decoded.shape_n, decoded.dtype) == (4096, 14336, "bfloat16")
    assert decoded.created_at == 1796272200.0
    assert decoded.duration_seconds == 21.5


def test_the_compact_result_carries_only_what_the_operator_reads() -> None:
    doc = json.loads(encode_compact(synthetic_result().to_compact()))
    assert set(doc) == {"v", "be", "dt", "k", "n", "t", "s", "b", "g", "u"}
    assert "gpu-node-17" not in json.dumps(doc)


def test_an_oversized_profile_drops_step_times_before_headline_numbers() -> None:
    result = synthetic_result(devices=8, batches=tuple(range(1, 129)))
    text = encode_compact(result.to_compact())
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    decoded = decode_compact(text)
    assert decoded.batches == ()
    assert all(d.step_seconds == () for d in decoded.devices)
    assert decoded.devices[7].recommended_min_batch == result.devices[7].recommended_min_batch
