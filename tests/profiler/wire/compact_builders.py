"""The largest compact results: eight GPUs of eight models with the longest names, for the tests
of what must arrive whole in the termination message."""

from dataclasses import replace

from roofline_profiler.wire.compact import CompactDevice, CompactProfile
from roofline_profiler.wire.compact_models import CompactModelPlan
from tests.profiler.headline_builders import headline_numbers

BATCHES = tuple(2**i for i in range(10))


def plan(name: str, **changes: object) -> CompactModelPlan:
    plan = CompactModelPlan(
        name=name,
        context_tokens=131072,
        tensor_parallel=8,
        min_batch=1234,
        max_batch_by_memory=65536,
        max_batch_by_latency=12345,
        step_seconds_at_min_batch=0.01234567,
        step_seconds_at_max_batch=0.2345678,
        step_seconds=tuple(0.0123456 * (i + 1) for i in range(len(BATCHES))),
        itl_intercept_seconds=0.008123456,
        itl_per_sequence_seconds=1.2345678e-5,
        itl_per_sequence_context_token_seconds=3.1234567e-8,
        itl_max_relative_error=0.091,
    )
    return replace(plan, **changes)  # type: ignore[arg-type]


def slower(plan: CompactModelPlan, gpu: int) -> CompactModelPlan:
    """GPU ``gpu``'s copy of ``plan``: each ITL term a little larger on later GPUs, and the
    intercept larger on the first, so that no one GPU's line is above all the others."""
    return replace(
        plan,
        itl_intercept_seconds=0.008123456 * (1.1 if gpu == 0 else 1.0),
        itl_per_sequence_seconds=1.2345678e-5 * (1 + gpu / 100),
        itl_per_sequence_context_token_seconds=3.1234567e-8 * (1 + gpu / 50),
        itl_max_relative_error=0.09 + gpu / 100,
    )


def profile(gpus: int, models: int, name_chars: int = 63) -> CompactProfile:
    plans = tuple(plan(f"{j}".ljust(name_chars, "m")) for j in range(models))
    devices = tuple(
        CompactDevice(
            index=i,
            name="G" * 64,
            numbers=headline_numbers(4.812345e12, 989.4321e12, 205.6789, 65536),
            step_seconds=tuple(1.2345678e-4 * (k + 1) for k in range(len(BATCHES))),
            models=tuple(slower(p, i) for p in plans),
        )
        for i in range(gpus)
    )
    return CompactProfile(
        dtype="bfloat16",
        shape_k=1048576,
        shape_n=1048576,
        created_at=1764756000.123,
        duration_seconds=1234.567,
        batches=BATCHES,
        devices=devices,
        backend="cuda",
    )
