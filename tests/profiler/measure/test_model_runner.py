"""A model the device cannot measure fails alone: the other models are planned as usual."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

from roofline_profiler.core.model_config import model_from_config
from roofline_profiler.core.planning import PlanOptions
from roofline_profiler.measure import model_runner
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.model_runner import ModelRequest, profile_models
from tests.model_configs import TINY_LLAMA


def test_a_model_that_runs_out_of_memory_is_skipped_and_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (cpu,) = resolve_devices("cpu")
    fits = model_from_config(TINY_LLAMA, "fits")
    too_big = replace(fits, name="too-big")
    measure = model_runner.measure_model

    def measure_or_fail(settings: Any, *args: Any) -> Any:
        if settings.arch.name == "too-big":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
        return measure(settings, *args)

    monkeypatch.setattr(model_runner, "measure_model", measure_or_fail)
    request = ModelRequest((too_big, fits), (512,), 1, PlanOptions(min_efficiency_percent=50))
    lines: list[str] = []
    plans, measured, failures = profile_models(
        cpu, "float32", (1, 2, 4), request, True, 1e11, 1e10, lines.append
    )
    assert [p.name for p in plans] == ["fits"]
    assert [m.arch.name for m in measured] == ["fits"]
    (failure,) = failures
    assert failure.name == "too-big"
    assert failure.reason.startswith("out of GPU memory: CUDA out of memory")
    assert "model too-big: out of GPU memory, skipped" in lines
