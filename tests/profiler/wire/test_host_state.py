"""What a result says about a change of host state: ceilings, sweep and recommendation paired
from one state's rounds, the other state's numbers, and the report in every published form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from roofline_profiler.cli.report import markdown_report, text_summary
from roofline_profiler.core.stats import Measurement
from roofline_profiler.measure.runner import assemble_device_result
from roofline_profiler.wire.compact import encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.host_state import FAST, SLOW
from roofline_profiler.wire.measurement_rounds import restrict
from roofline_profiler.wire.result import DeviceResult, ProfileResult, validate_document
from tests.profiler.synthetic import H200_LIKE, request, synthetic_measurements, synthetic_result

#: Rounds of a synthetic device.
ROUNDS = 8
#: How much slower the memory-bound workloads run in the slow state (55 against 32 GB/s).
SLOW_FACTOR = 1.7
#: The workloads memory bounds on an H200-like device (ridge point ~184 FLOP/byte).
MEMORY_BOUND = (
    "read",
    "readMatvec",
    "copy",
    *(f"decode B={b}" for b in (1, 2, 4, 8, 16, 32, 64, 128)),
)


def _device(
    slow_rounds: Sequence[int],
    present: Mapping[str, Sequence[int]] | None = None,
    rounds: int = ROUNDS,
) -> DeviceResult:
    """An H200-like device whose memory-bound workloads run SLOW_FACTOR slower in
    ``slow_rounds``; ``present[label]`` limits a workload to those rounds."""
    slowdown = {label: dict.fromkeys(slow_rounds, SLOW_FACTOR) for label in MEMORY_BOUND}
    bw, mm, sweep = synthetic_measurements(slowdown=slowdown)
    keep = present or {}

    def cut(m: Measurement) -> Measurement:
        return restrict(m, keep[m.label]) if m.label in keep else m

    return assemble_device_result(
        {
            "index": 0,
            "name": "NVIDIA H200",
            "backend": "cuda",
            "device": "cuda:0",
            "dtype": "bfloat16",
            "memory_bytes": 150_754_820_096,
        },
        request(),
        {label: cut(m) for label, m in bw.items()},
        [(shape, cut(m)) for shape, m in mm],
        [(b, cut(m)) for b, m in sweep],
        {},
    )


def test_a_steady_device_reports_no_host_states() -> None:
    device = _device(slow_rounds=())
    assert device.host_states is None
    assert "HostStateChanged" not in {w.code for w in device.warnings}


def test_numbers_come_from_the_state_that_covers_every_workload_never_a_mix() -> None:
    # Slow in rounds 0-5 for every workload; fast in rounds 6-7, which timed only the bandwidth
    # kernels (the sweep was settled by then). Taking each workload's best would pair a fast
    # ceiling with a slow sweep: every memory-bound point far below its roof, the ridge too low.
    late = tuple(range(6))
    present = {f"decode B={b}": late for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}
    present |= {"mm 8192x8192x8192": late, "mm 4096x4096x4096": late}
    device = _device(slow_rounds=late, present=present)
    assert device.host_states is not None
    assert device.host_states.state == SLOW
    assert device.host_states.complete
    # The slow state's slope (a compute-bound point's byte rate may edge it up a little).
    assert device.bandwidth_bytes_per_second == pytest.approx(
        H200_LIKE["bandwidth"] / SLOW_FACTOR, rel=0.1
    )
    small = next(e for e in device.sweep if e.point.batch == 1)
    assert small.point.roofline_fraction == pytest.approx(0.8, rel=0.08)  # a mix: 0.47
    assert device.ridge_point == pytest.approx(
        H200_LIKE["peak"] / (H200_LIKE["bandwidth"] / SLOW_FACTOR), rel=0.08
    )  # a mix: 184
    assert device.host_states.other.bandwidth_bytes_per_second == pytest.approx(
        H200_LIKE["bandwidth"], rel=0.02
    )


def test_with_both_states_complete_the_one_with_more_rounds_sets_the_numbers() -> None:
    device = _device(slow_rounds=(0, 1, 2))
    assert device.host_states is not None
    assert device.host_states.state == FAST
    assert device.bandwidth_bytes_per_second == pytest.approx(H200_LIKE["bandwidth"], rel=0.02)
    assert device.host_states.fast_rounds == (3, 4, 5, 6, 7)


def test_when_no_state_covers_every_workload_the_one_with_most_rounds_is_taken_and_said() -> None:
    # Slow in rounds 3-7 (five rounds), but B=512 ran only in rounds 0-2 (fast) and the smaller
    # matmul only in rounds 3-7: neither state has every workload.
    device = _device(
        slow_rounds=(3, 4, 5, 6, 7),
        present={"decode B=512": (0, 1, 2), "mm 4096x4096x4096": (3, 4, 5, 6, 7)},
    )
    report = device.host_states
    assert report is not None
    assert report.state == SLOW
    assert not report.complete
    assert report.missing == ("decode B=512",)
    (warning,) = [w for w in device.warnings if w.code == "HostStateChanged"]
    assert "no state covered every workload within the time budget" in warning.message
    assert "decode B=512 (fewer than two rounds in it) keep the rounds they have" in warning.message


def test_the_warning_names_the_workloads_both_levels_the_rounds_and_the_numbers_that_differ() -> (
    None
):
    device = _device(slow_rounds=(4, 5, 6, 7))
    (warning,) = [w for w in device.warnings if w.code == "HostStateChanged"]
    message = warning.message
    assert "read 4.3 TB/s or 2.5" in message
    assert "fast in rounds 0-3, slow in rounds 4-7" in message
    assert "every number comes from the slow state's 4 rounds" in message
    assert "bandwidth slope 2.6" in message
    assert "TB/s in the slow state, 4.3 TB/s in the other" in message
    assert "ridge point" in message
    # The chosen state's rounds are steady: no interference warning on top.
    assert "InterferenceUnresolved" not in {w.code for w in device.warnings}


# --- The result document, the summary, the report and the compact result ---------------------


def _result(device: DeviceResult) -> ProfileResult:
    base = synthetic_result()
    return ProfileResult(**{**base.__dict__, "devices": (device,)})


def test_host_states_validate_and_round_trip_through_the_document() -> None:
    result = _result(_device(slow_rounds=(4, 5, 6, 7)))
    document = result.to_dict()
    validate_document(document)
    states = document["devices"][0]["hostStates"]
    assert states["state"] == "slow"
    assert states["slowRounds"] == [4, 5, 6, 7]
    assert ProfileResult.from_dict(document) == result


def test_the_summary_the_report_and_the_compact_result_carry_the_warning() -> None:
    result = _result(_device(slow_rounds=(4, 5, 6, 7)))
    assert "warning HostStateChanged: the host changed state" in text_summary(result)
    assert "- **HostStateChanged**: the host changed state" in markdown_report(result)
    compact = decode_compact(encode_compact(result.to_compact()))
    assert "HostStateChanged" in compact.devices[0].warnings
