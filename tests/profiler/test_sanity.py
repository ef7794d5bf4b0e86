import dataclasses

from roofline_profiler.recommend import Recommendation
from roofline_profiler.sanity import plausibility_warnings
from roofline_profiler.stats import Measurement
from tests.profiler.synthetic import synthetic_device


def _codes(device, **overrides) -> set[str]:  # type: ignore[no-untyped-def]
    args = {
        "bandwidth": device.bandwidth,
        "peak_candidates": device.peak_candidates,
        "sweep": device.sweep,
        "ridge": device.ridge_point,
        "recommendation": Recommendation(device.recommended_min_batch, "sweep", 0.5),
        "precision_target": 0.01,
        "bandwidth_kind": "read",
    }
    args.update(overrides)
    return {w.code for w in plausibility_warnings(**args)}


def test_a_clean_device_gets_no_warnings() -> None:
    assert _codes(synthetic_device()) == set()


def test_noisy_timings_are_flagged() -> None:
    device = synthetic_device()
    noisy = {**device.bandwidth, "read": Measurement("read", (1.0, 1.3, 0.7, 1.0), work=4.3e12)}
    assert "NoisyMeasurement" in _codes(device, bandwidth=noisy)


def test_a_sweep_faster_than_the_measured_peak_is_flagged() -> None:
    device = synthetic_device(efficiency=1.0)
    slow_peak = tuple(
        dataclasses.replace(
            c,
            measurement=Measurement(
                c.measurement.label,
                tuple(t * 2 for t in c.measurement.times),
                work=c.measurement.work,
            ),
        )
        for c in device.peak_candidates
    )
    assert "SweepAbovePeak" in _codes(device, peak_candidates=slow_peak)


def test_a_sweep_faster_than_the_measured_bandwidth_is_flagged() -> None:
    device = synthetic_device(efficiency=1.0)
    slow = {
        k: Measurement(m.label, tuple(t * 3 for t in m.times), work=m.work)
        for k, m in device.bandwidth.items()
    }
    assert "SweepAboveBandwidth" in _codes(device, bandwidth=slow)


def test_a_model_based_minimum_batch_is_explained() -> None:
    device = synthetic_device()
    assert "MinBatchFromModel" in _codes(device, recommendation=Recommendation(95, "model", 0.5))


def test_impossible_ceilings_are_flagged() -> None:
    device = synthetic_device(bandwidth=90e12, peak=90e15)
    codes = _codes(device)
    assert {"ImplausibleBandwidth", "ImplausiblePeak"} <= codes
