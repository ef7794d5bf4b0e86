from roofline_profiler.core import roofline
from tests.profiler.synthetic import H200_LIKE, synthetic_device

K, N = 4096, 14336
BW, PEAK = H200_LIKE["bandwidth"], H200_LIKE["peak"]


def _codes(**kwargs: object) -> set[str]:
    return {w.code for w in synthetic_device(**kwargs).warnings}  # type: ignore[arg-type]


def test_a_clean_device_gets_no_warnings() -> None:
    assert _codes() == set()


def test_bursts_the_rounds_absorb_are_no_warning() -> None:
    burst = {0: 1.5, 2: 1.3, 4: 1.4}
    assert _codes(slowdown={"read": burst, "copy": burst, "mm 8192x8192x8192": burst}) == set()


def test_a_level_shift_in_a_headline_workload_is_flagged_with_what_to_do() -> None:
    shifted = {4: 1.3, 5: 1.3, 6: 1.3, 7: 1.3}
    device = synthetic_device(slowdown={"read": shifted})
    (warning,) = device.warnings
    assert warning.code == "InterferenceUnresolved"
    assert "read (bandwidth slope)" in warning.message
    assert "re-run when nothing else uses the device" in warning.message


def test_a_slope_measured_while_another_process_held_the_cpus_is_flagged() -> None:
    every_round = dict.fromkeys(range(8), 0.35)
    device = synthetic_device(cpu_waits={"read": every_round})
    (warning,) = device.warnings
    assert warning.code == "CpuContention"
    assert "read (bandwidth slope)" in warning.message
    assert "35%" in warning.message
    assert "whole CPUs of its own" in warning.message


def test_cpu_waits_only_in_rounds_slower_than_the_confirmed_best_are_no_warning() -> None:
    # A burst held the CPUs in three rounds, which ran slower; the confirmed best is a quiet one.
    burst = {0: 1.5, 2: 1.3, 4: 1.4}
    waits = {0: 0.4, 2: 0.3, 4: 0.35}
    assert _codes(slowdown={"read": burst}, cpu_waits={"read": waits}) == set()


def test_a_quiet_round_among_the_two_fastest_is_no_warning() -> None:
    # Rounds 0 and 3 are the fastest (jitter 0.0 and 0.001); round 3, which gives the confirmed
    # time, shared the CPUs, but round 0 did not and came within the timing noise of it.
    assert _codes(cpu_waits={"read": {1: 0.4, 2: 0.4, 3: 0.4, 4: 0.4}}) == set()


def test_a_little_cpu_waiting_is_timing_noise_not_a_warning() -> None:
    assert _codes(cpu_waits={"read": dict.fromkeys(range(8), 0.05)}) == set()


def test_a_level_shift_in_a_workload_no_number_rests_on_is_not_flagged() -> None:
    assert _codes(slowdown={"decode B=4": {4: 1.3, 5: 1.3, 6: 1.3, 7: 1.3}}) == set()


def test_a_decode_step_that_outruns_the_read_kernels_names_the_suspect() -> None:
    fast = roofline.decode_gemm_bytes(1, K, N, 2) / (1.3 * BW)
    device = synthetic_device(steps={1: fast})
    assert device.source("bandwidth_bytes_per_second") == "decode B=1"
    (warning,) = device.warnings
    assert warning.code == "SlopeFromDecode"
    assert "1.30x" in warning.message
    assert "--shape" in warning.message


def test_a_decode_step_a_little_faster_than_the_read_kernels_just_sets_the_slope() -> None:
    fast = roofline.decode_gemm_bytes(1, K, N, 2) / (1.15 * BW)
    device = synthetic_device(steps={1: fast})
    assert device.source("bandwidth_bytes_per_second") == "decode B=1"
    assert device.warnings == ()


def test_a_sweep_point_that_outruns_the_peak_search_names_the_suspect() -> None:
    fast = roofline.decode_gemm_flops(512, K, N) / (1.2 * PEAK)
    assert _codes(steps={512: fast}) == {"PeakFromDecode"}


def test_a_model_based_minimum_batch_is_explained() -> None:
    assert "MinBatchFromModel" in _codes(batches=(1, 2, 4))


def test_impossible_ceilings_are_flagged() -> None:
    assert {"ImplausibleBandwidth", "ImplausiblePeak"} <= _codes(bandwidth=90e12, peak=90e15)
