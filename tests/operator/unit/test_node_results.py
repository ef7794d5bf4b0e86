from __future__ import annotations

from dataclasses import replace

from tests.operator.unit.operator_builders import device, profile

from roofline_operator.node_results import from_compact, from_status, to_status


def test_the_worst_gpu_is_the_one_needing_the_largest_batch() -> None:
    result = from_compact(
        profile(device(0), device(1, min_batch=512, bandwidth=1e12), device(2)), "h"
    )
    assert result.worst_gpu().index == 1


def test_ties_on_batch_go_to_the_lower_bandwidth_then_the_lower_index() -> None:
    slow = from_compact(profile(device(0), device(1, bandwidth=3e12), device(2)), "h")
    assert slow.worst_gpu().index == 1
    same = from_compact(profile(device(3), device(1), device(2)), "h")
    assert same.worst_gpu().index == 1


def test_a_pod_result_keeps_its_step_times_paired_with_the_sweep_batches() -> None:
    result = from_compact(profile(device(0, name="NVIDIA H100")), "abc")
    (gpu,) = result.gpus
    assert gpu.product == "NVIDIA H100"
    assert gpu.step_seconds == ((1, 3.2e-5), (256, 4.1e-5))
    assert (result.spec_hash, result.profiled_at, result.shape_k) == ("abc", 1_700_000_000.0, 8192)


def test_a_result_rebuilt_from_status_equals_the_original_but_for_its_step_times() -> None:
    original = from_compact(profile(device(0), device(1, min_batch=256)), "h")
    rebuilt = from_status({"name": "gpu-1", **to_status(original)})
    assert rebuilt is not None
    assert rebuilt.gpus == tuple(replace(g, step_seconds=()) for g in original.gpus)
    assert (rebuilt.dtype, rebuilt.shape_k, rebuilt.shape_n) == ("bfloat16", 8192, 8192)
    assert rebuilt.duration_seconds == original.duration_seconds


def test_a_status_entry_without_a_result_rebuilds_none() -> None:
    assert from_status({"name": "gpu-1", "state": "Queued"}) is None
