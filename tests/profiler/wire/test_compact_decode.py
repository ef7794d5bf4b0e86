"""Reading a compact result back: every defect is rejected with a reason that names the field."""

import json

import pytest

from roofline_profiler.wire.compact import MAX_COMPACT_BYTES, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from tests.profiler.synthetic import synthetic_result

#: A result as version 1 of the format wrote it (two GPUs), from a pod that ran before an upgrade.
VERSION_1_MESSAGE = json.dumps(
    {
        "v": 1,
        "dt": "bfloat16",
        "k": 4096,
        "n": 14336,
        "t": 1796272200.0,
        "s": 21.5,
        "h": "gpu-node-17",
        "d": [
            {
                "i": i,
                "nm": "NVIDIA H200",
                "be": "cuda",
                "mem": 150754820096,
                "bw": 4.3e12,
                "pk": 7.9e14,
                "rp": 183.7,
                "mb": 64 * (i + 1),
                "kn": 128,
                "b": [1, 64, 256],
                "st": [2.7e-5, 2.9e-5, 6.1e-5],
                "w": ["noisy"],
            }
            for i in range(2)
        ],
    }
)


def test_a_version_1_result_is_still_read() -> None:
    decoded = decode_compact(VERSION_1_MESSAGE)
    assert decoded.version == 1
    assert decoded.backend == "cuda"
    assert decoded.batches == (1, 64, 256)
    assert [d.recommended_min_batch for d in decoded.devices] == [64, 128]
    assert decoded.devices[1].bandwidth_bytes_per_second == 4.3e12
    assert decoded.devices[0].step_seconds == (2.7e-5, 2.9e-5, 6.1e-5)
    assert (decoded.shape_k, decoded.created_at) == (4096, 1796272200.0)


def _valid() -> dict[str, object]:
    return json.loads(encode_compact(synthetic_result().to_compact()))  # type: ignore[no-any-return]


def test_the_backend_travels_with_the_result() -> None:
    decoded = decode_compact(json.dumps(_valid()))
    assert (decoded.version, decoded.backend) == (4, "cuda")


@pytest.mark.parametrize("version", [2, 3])
def test_a_result_of_a_profiler_before_the_backend_is_still_read(version: int) -> None:
    """What profilers before version 4 wrote: the same result less ``be`` (a result without
    model plans is laid out alike in versions 2 and 3)."""
    doc = _valid()
    del doc["be"]
    doc["v"] = version
    decoded = decode_compact(json.dumps(doc))
    assert (decoded.version, decoded.backend) == (version, None)
    assert (
        decoded.devices[0].recommended_min_batch
        == synthetic_result().devices[0].recommended_min_batch
    )


def _with_backend(value: object) -> str:
    doc = _valid()
    if value is None:
        del doc["be"]
    else:
        doc["be"] = value
    return json.dumps(doc)


def _mutated(position: int, value: object) -> str:
    doc = _valid()
    gpu = doc["g"][0]  # type: ignore[index]
    if value is None:
        gpu.pop(position)
    else:
        gpu[position] = value
    return json.dumps(doc)


def _mutated_v1(**changes: object) -> str:
    doc = json.loads(VERSION_1_MESSAGE)
    doc["d"][0].update(changes)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param(
            "roofline: device failure: out of memory", "not a JSON", id="plain-text-error"
        ),
        pytest.param(
            encode_compact(synthetic_result(devices=4).to_compact())[:300],
            "not a JSON",
            id="truncated",
        ),
        pytest.param("[1, 2]", "not a JSON object", id="array"),
        pytest.param('{"v": 99, "g": []}', "version 99", id="future-version"),
        pytest.param(
            '{"v": 2, "dt": "bfloat16", "k": 1, "n": 1, "t": 0, "s": 0, "b": [], "g": []}',
            "no devices",
            id="no-devices",
        ),
        pytest.param(_mutated(4, -3), "'ridge point' = -3 is outside 0 < x", id="negative-ridge"),
        pytest.param(_mutated(5, 0), "'min batch' = 0 is outside 1 ≤ x", id="zero-min-batch"),
        pytest.param(_mutated(2, "fast"), "'bandwidth' is not a number", id="string-bandwidth"),
        pytest.param(_mutated(5, True), "'min batch' is not an integer", id="boolean-batch"),
        pytest.param(_mutated(6, None), "not an array of 7 fields", id="missing-field"),
        pytest.param(_mutated(6, [0.1]), "differ in length", id="ragged-sweep"),
        pytest.param(_mutated_v1(rp=-3), "'rp' = -3 is outside 0 < x", id="v1-negative-ridge"),
        pytest.param(_mutated_v1(b=[0] * 3), "'b' = 0 is outside 1 ≤ x", id="v1-zero-batch"),
        pytest.param(_mutated_v1(pk=None), "'pk' is not a number", id="v1-null-peak"),
        pytest.param("x" * (MAX_COMPACT_BYTES + 1), "longer than", id="too-long"),
        pytest.param(_with_backend(None), "missing field 'be'", id="v4-without-backend"),
        pytest.param(_with_backend("tpu"), "'be' is not one of cuda", id="unknown-backend"),
        pytest.param(_with_backend("cuda\n"), "'be' is not one of cuda", id="backend-newline"),
        pytest.param(_with_backend(["cuda"]), "'be' is not one of cuda", id="backend-list"),
        pytest.param(_mutated_v1(be="gpu"), "'be' is not one of cuda", id="v1-unknown-backend"),
        pytest.param(_mutated_v1(be="cpu"), "different backends", id="v1-mixed-backends"),
    ],
)
def test_malformed_results_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CompactDecodeError, match=reason):
        decode_compact(text)
