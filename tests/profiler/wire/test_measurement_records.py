"""The measurements a result keeps behind its numbers: each reads back from its JSON exactly, and
a document older than rounds, CPU waits or intervals reads with their neutral values."""

from __future__ import annotations

import json
from typing import Any

from roofline_profiler.core.recommend import SweepPoint
from roofline_profiler.core.stats import Measurement
from roofline_profiler.wire import measurement_records as records
from roofline_profiler.wire.measurement_records import PeakCandidate, SweepEntry

TIMED = Measurement(
    label="read",
    times=(1.0e-3, 1.1e-3, 0.9e-3, 1.2e-3),
    work=4.0e9,
    warmup_runs=2,
    rounds=(0, 0, 1, 1),
    cpu_waits=(0.0, 0.125),
)


def through_json(document: dict[str, Any]) -> Any:
    return json.loads(json.dumps(document))


def test_a_measurement_reads_back_from_its_json_with_its_rounds_and_cpu_waits() -> None:
    document = records.measurement_to_dict(TIMED, "bytes")
    assert document["bytes"] == 4.0e9
    assert document["roundsCpuWait"] == [0.0, 0.125]
    assert records.measurement_from_dict(through_json(document), "bytes") == TIMED


def test_a_measurement_older_than_rounds_and_cpu_waits_reads_as_one_round_without_waits() -> None:
    document = records.measurement_to_dict(TIMED, "flops")
    del document["samplesRound"], document["roundsCpuWait"]
    old = records.measurement_from_dict(document, "flops")
    assert (old.rounds, old.cpu_waits) == ((), ())
    assert old.times == TIMED.times


def test_a_measurement_without_cpu_waits_writes_no_key_for_them() -> None:
    quiet = Measurement(label="copy", times=(1.0e-3,), work=1.0, rounds=(0,))
    assert "roundsCpuWait" not in records.measurement_to_dict(quiet, "bytes")


def test_an_interval_reads_back_and_a_document_without_one_gets_the_bare_value() -> None:
    assert records.interval_from_dict(records.interval_to_dict((1.5, 2.5)), 2.0) == (1.5, 2.5)
    assert records.interval_from_dict(None, 2.0) == (2.0, 2.0)


def test_a_peak_candidate_reads_back_and_its_rate_is_the_confirmed_one() -> None:
    candidate = PeakCandidate(m=4096, n=4096, k=4096, measurement=TIMED)
    document = candidate.to_dict()
    assert document["shape"] == {"m": 4096, "n": 4096, "k": 4096}
    assert PeakCandidate.from_dict(through_json(document)) == candidate
    assert candidate.flops_per_second == TIMED.confirmed_rate


def test_a_sweep_entry_reads_back_with_its_point_and_measurement() -> None:
    point = SweepPoint(
        batch=16,
        step_seconds=1.0e-3,
        flops_per_second=2.0e12,
        bytes_per_second=4.0e9,
        arithmetic_intensity=500.0,
        roofline_flops_per_second=2.5e12,
        roofline_fraction=0.8,
        peak_fraction=0.4,
        seconds_per_token=6.25e-5,
    )
    entry = SweepEntry(point=point, measurement=TIMED)
    document = entry.to_dict()
    assert (document["batch"], document["rooflineFraction"]) == (16, 0.8)
    assert SweepEntry.from_dict(through_json(document)) == entry
