"""Measuring a model's decode-step parts on this CPU, with tiny shapes."""

from __future__ import annotations

import pytest
import torch

from roofline_profiler.core.decode_model import step_seconds
from roofline_profiler.core.model_config import model_from_config
from roofline_profiler.measure import model_measure
from roofline_profiler.measure.decode_layer import DecoderLayer, GlueInputs, StepState
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.model_measure import MeasureSettings, measure_model
from tests.model_configs import TINY_DENSE, TINY_MOE
from tests.profiler.measure.part_runs import interleaved


@pytest.mark.parametrize("config", [TINY_DENSE, TINY_MOE], ids=["dense", "moe"])
def test_a_tiny_model_is_measured_at_every_batch_and_context(config: dict[str, object]) -> None:
    arch = model_from_config(config, "tiny")
    (info,) = resolve_devices("cpu")
    settings = MeasureSettings(arch, "float32", 1, (1, 4), (64, 256), quick=True)
    m = measure_model(settings, info, lambda _: None)
    assert m.batches == (1, 4)
    assert m.contexts == (64, 256)
    assert all(t.seconds > 0 and t.measurement is not None for t in m.head)
    kinds = ("moe",) if arch.is_moe else ("dense",)
    assert tuple(m.layer_bodies) == kinds
    assert all(not a.extrapolated for a in m.attention)
    assert step_seconds(m, 4, 256) > 0
    assert m.has_glue()
    assert tuple(t.batch for t in m.layer_glue[kinds[0]]) == (1, 4)
    assert all(t.seconds > 0 and t.measurement is not None for t in m.layer_glue[kinds[0]])
    assert 0 < step_seconds(m, 4, 256, eager_glue=False) < step_seconds(m, 4, 256)


def test_the_batches_of_a_layer_share_one_rotation_of_its_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    (info,) = resolve_devices("cpu")
    used: list[int] = []
    real = DecoderLayer.forward

    def recording(
        self: DecoderLayer, x: torch.Tensor, state: StepState, glue: GlueInputs | None = None
    ) -> torch.Tensor:
        if glue is None:  # the glue alone runs on one layer, apart from the rotation
            used.append(id(self))
        return real(self, x, state, glue)

    monkeypatch.setattr(DecoderLayer, "forward", recording)
    monkeypatch.setattr(model_measure, "time_parts", interleaved)
    settings = MeasureSettings(arch, "float32", 1, (1, 2, 4), (64,), quick=True)
    model_measure.measure_layer_bodies(settings, info, lambda _: None)
    copies = len(set(used))
    assert copies >= 3  # the whole tiny model's worth of layers
    assert used == [used[i % copies] for i in range(len(used))]  # one cycle through all batches
