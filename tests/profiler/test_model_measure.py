"""Measuring a model's decode-step parts on this CPU, with tiny shapes."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch

from roofline_profiler import decode_layer, model_measure
from roofline_profiler.component_timing import Part
from roofline_profiler.decode_layer import (
    DecoderLayer,
    LayerShapes,
    Routing,
    StepState,
    expert_assignment,
    rotary_tables,
)
from roofline_profiler.decode_model import step_seconds
from roofline_profiler.devices import resolve_devices
from roofline_profiler.model_config import model_from_config
from roofline_profiler.model_measure import MeasureSettings, measure_model
from roofline_profiler.models import expected_active_experts
from roofline_profiler.stats import Measurement

TINY_MOE = {
    "model_type": "mixtral",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 500,
    "max_position_embeddings": 4096,
}
TINY_DENSE = {
    "model_type": "qwen3",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 128,
    "vocab_size": 500,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}


@pytest.mark.parametrize("batch", [1, 3, 8, 64])
def test_each_token_reads_k_distinct_experts(batch: int) -> None:
    groups = expert_assignment(8, 2, batch, seed=3)
    assert sum(len(tokens) for _, tokens, _ in groups) == batch * 2
    per_token: Counter[int] = Counter()
    for expert, tokens, slots in groups:
        assert len(set(tokens)) == len(tokens), f"expert {expert} sees a token twice"
        per_token.update(tokens)
        assert set(slots) <= {0, 1}
    assert all(per_token[t] == 2 for t in range(batch))


@pytest.mark.parametrize("batch", [1, 4, 16])
def test_uniform_routing_reads_the_expected_number_of_distinct_experts(batch: int) -> None:
    counts = [len(expert_assignment(8, 2, batch, seed)) for seed in range(400)]
    assert sum(counts) / len(counts) == pytest.approx(
        expected_active_experts(8, 2, batch), rel=0.03
    )


def test_successive_seeds_route_to_other_experts() -> None:
    first = {e for e, _, _ in expert_assignment(64, 2, 1, seed=0)}
    assert any({e for e, _, _ in expert_assignment(64, 2, 1, seed)} != first for seed in (1, 2))


def test_routing_ids_name_the_same_experts_as_the_per_expert_groups() -> None:
    routing = Routing.build(8, 2, 5, seed=3, device=torch.device("cpu"))
    assert routing.expert_ids.shape == (5, 2)
    for expert, tokens, slots in routing.per_expert:
        assert all(routing.expert_ids[t, s] == expert for t, s in zip(tokens, slots, strict=True))
    # Top-k picks distinct experts per token.
    assert all(len(set(row.tolist())) == 2 for row in routing.expert_ids)


def test_grouped_and_looped_experts_compute_the_same_layer() -> None:
    torch.manual_seed(0)
    arch = model_from_config(TINY_MOE, "tiny-moe")
    shapes = LayerShapes.of(arch, 1)
    layer = DecoderLayer(arch, shapes, "moe", torch.float32, torch.device("cpu"))
    layer.experts_gate_up.normal_()
    layer.experts_down.normal_()
    h = torch.randn(5, arch.hidden_size)
    weights = torch.rand(5, 2)
    routing = Routing.build(8, 2, 5, seed=1, device=torch.device("cpu"))
    if decode_layer.GROUPED_MM is None:
        pytest.skip("this torch has no grouped GEMM")
    grouped = layer._grouped_experts(h, weights, routing)
    looped = layer._looped_experts(h, weights, routing)
    torch.testing.assert_close(grouped, looped, rtol=1e-4, atol=1e-4)


def test_a_dense_layer_body_runs_with_qk_norm_and_keeps_the_hidden_shape() -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    shapes = LayerShapes.of(arch, 1)
    layer = DecoderLayer(arch, shapes, "dense", torch.float32, torch.device("cpu"))
    cos, sin = rotary_tables(torch.tensor([7, 9]), shapes.head_dim, torch.float32)
    state = StepState(
        cos=cos,
        sin=sin,
        k_slot=torch.empty(2, shapes.kv_heads, shapes.head_dim),
        v_slot=torch.empty(2, shapes.kv_heads, shapes.head_dim),
        attention_out=torch.randn(2, shapes.q_heads * shapes.head_dim),
        routing=None,
    )
    out = layer.forward(torch.randn(2, arch.hidden_size), state)
    assert out.shape == (2, arch.hidden_size)
    assert torch.isfinite(out).all()


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


def _interleaved(parts: list[Part], *_: object) -> list[Measurement]:
    """``time_parts`` as a round runs it, each batch a few runs then the next, with each part's
    own run index starting over."""
    for runs in (3, 1, 2):
        for part in parts:
            for i in range(runs):
                part.run(i)
    return [Measurement(part.label, (1e-3,)) for part in parts]


def test_the_batches_of_a_layer_share_one_rotation_of_its_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    (info,) = resolve_devices("cpu")
    used: list[int] = []
    real = DecoderLayer.forward

    def recording(self: DecoderLayer, x: torch.Tensor, state: StepState) -> torch.Tensor:
        used.append(id(self))
        return real(self, x, state)

    monkeypatch.setattr(DecoderLayer, "forward", recording)
    monkeypatch.setattr(model_measure, "time_parts", _interleaved)
    settings = MeasureSettings(arch, "float32", 1, (1, 2, 4), (64,), quick=True)
    model_measure.measure_layer_bodies(settings, info, lambda _: None)
    copies = len(set(used))
    assert copies >= 3  # the whole tiny model's worth of layers
    assert used == [used[i % copies] for i in range(len(used))]  # one cycle through all batches


def test_each_attention_run_reads_the_sequences_after_the_previous_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    (info,) = resolve_devices("cpu")
    reads: list[tuple[int, int]] = []
    real = model_measure.F.scaled_dot_product_attention

    def recording(query: torch.Tensor, keys: torch.Tensor, *args: object, **kw: object) -> object:
        row = keys[0].numel() * keys.element_size()
        reads.append((keys.data_ptr(), keys.data_ptr() + keys.shape[0] * row))
        return real(query, keys, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(model_measure.F, "scaled_dot_product_attention", recording)
    monkeypatch.setattr(model_measure, "time_parts", _interleaved)
    settings = MeasureSettings(arch, "float32", 1, (1, 2, 4), (64,), quick=True)
    model_measure.measure_attention(settings, info, lambda _: None)
    first, last = min(start for start, _ in reads), max(end for _, end in reads)
    for (_, end), (start, stop) in itertools.pairwise(reads):
        if start != end:  # not the next sequences: back to the start, only for want of room
            assert start == first
            assert end + (stop - start) > last
