"""One decoder layer built from torch operations: its weights, its forward pass without the
attention kernel, and the uniform routing that stands in for a trained router (CPU, tiny shapes)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from roofline_profiler.core.model_config import model_from_config
from roofline_profiler.core.models import expected_active_experts
from roofline_profiler.measure import decode_layer
from roofline_profiler.measure.decode_layer import (
    DecoderLayer,
    LayerShapes,
    Routing,
    StepState,
    expert_assignment,
    random_tensor,
    rms_norm,
    rotary,
    rotary_tables,
)
from tests.model_configs import TINY_DENSE, TINY_LLAMA, TINY_MOE

CPU = torch.device("cpu")
#: A Qwen2-style mixture of experts with a shared expert and biases on q, k and v.
TINY_SHARED_MOE = {
    **{k: v for k, v in TINY_MOE.items() if k != "num_local_experts"},
    "model_type": "qwen2_moe",
    "num_experts": 8,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
}


def step_state(shapes: LayerShapes, batch: int, routing: Routing | None = None) -> StepState:
    cos, sin = rotary_tables(torch.arange(batch) + 7, shapes.head_dim, torch.float32)
    return StepState(
        cos=cos,
        sin=sin,
        k_slot=torch.zeros(batch, shapes.kv_heads, shapes.head_dim),
        v_slot=torch.zeros(batch, shapes.kv_heads, shapes.head_dim),
        attention_out=torch.randn(batch, shapes.q_heads * shapes.head_dim),
        routing=routing,
    )


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param((3, 5), id="smaller-than-the-block"),
        pytest.param((3, 1 << 16), id="whole-blocks"),
        pytest.param((7, 10_001), id="blocks-and-a-tail"),
        pytest.param((0, 4), id="empty"),
    ],
)
def test_random_tensors_have_the_shape_and_small_nonzero_values(shape: tuple[int, int]) -> None:
    t = random_tensor(shape, torch.bfloat16, CPU)
    assert t.shape == shape
    assert t.dtype == torch.bfloat16
    if t.numel():
        assert bool((t != 0).any())
        assert float(t.abs().max()) < 1.0


def test_a_large_random_tensor_is_tiled_from_one_block() -> None:
    t = random_tensor((3, 1 << 16), torch.float32, CPU)
    torch.testing.assert_close(t[0], t[2])


def test_rms_norm_scales_each_row_to_unit_root_mean_square() -> None:
    x = torch.tensor([[3.0, 4.0], [0.5, -0.5]])
    out = rms_norm(x, torch.ones(2))
    rms = out.pow(2).mean(-1).sqrt()
    torch.testing.assert_close(rms, torch.ones(2), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rms_norm(x, torch.full((2,), 2.0)), 2 * out)


def test_rms_norm_keeps_the_inputs_dtype() -> None:
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    assert rms_norm(x, torch.ones(8, dtype=torch.bfloat16)).dtype == torch.bfloat16


def test_rotary_tables_are_per_sequence_and_leave_position_zero_unrotated() -> None:
    cos, sin = rotary_tables(torch.tensor([0, 5]), 8, torch.float32)
    assert cos.shape == sin.shape == (2, 1, 8)
    x = torch.randn(2, 3, 8)
    rotated = rotary(x, cos, sin)
    torch.testing.assert_close(rotated[0], x[0])
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert not torch.allclose(rotated[1], x[1])


@pytest.mark.parametrize(
    ("tp", "q_heads", "kv_heads", "inter"),
    [
        pytest.param(1, 4, 2, 128, id="one-gpu"),
        pytest.param(2, 2, 1, 64, id="tp2"),
        pytest.param(4, 1, 1, 32, id="tp4-kv-heads-replicated"),
    ],
)
def test_layer_shapes_are_sharded_per_gpu_as_the_engines_shard_them(
    tp: int, q_heads: int, kv_heads: int, inter: int
) -> None:
    shapes = LayerShapes.of(model_from_config(TINY_LLAMA, "tiny"), tp)
    assert (shapes.hidden, shapes.head_dim) == (64, 16)
    assert (shapes.q_heads, shapes.kv_heads, shapes.inter) == (q_heads, kv_heads, inter)


def test_a_dense_layer_holds_exactly_its_weights() -> None:
    arch = model_from_config(TINY_LLAMA, "tiny")
    shapes = LayerShapes.of(arch, 1)
    layer = DecoderLayer(arch, shapes, "dense", torch.bfloat16, CPU)
    qkv = (4 + 2 * 2) * 16
    elements = 2 * 64 + qkv * 64 + 64 * 4 * 16 + 2 * 128 * 64 + 64 * 128
    assert layer.nbytes() == 2 * elements
    assert layer.qkv_bias is None
    assert layer.q_norm is None


def test_the_new_tokens_keys_and_values_are_written_into_the_cache_slots() -> None:
    arch = model_from_config(TINY_LLAMA, "tiny")
    shapes = LayerShapes.of(arch, 1)
    layer = DecoderLayer(arch, shapes, "dense", torch.float32, CPU)
    state = step_state(shapes, batch=3)
    layer.forward(torch.randn(3, arch.hidden_size), state)
    assert bool((state.k_slot != 0).any())
    assert bool((state.v_slot != 0).any())


def test_a_moe_layer_with_a_shared_expert_and_qkv_biases_keeps_the_hidden_shape() -> None:
    arch = model_from_config(TINY_SHARED_MOE, "tiny-shared-moe")
    shapes = LayerShapes.of(arch, 1)
    layer = DecoderLayer(arch, shapes, "moe", torch.float32, CPU)
    assert layer.qkv_bias is not None
    assert layer.shared_gate_up.weight.shape == (2 * 48, 64)
    assert layer.experts_gate_up.shape == (8, 2 * 32, 64)
    routing = Routing.build(8, 2, 4, seed=0, device=CPU)
    out = layer.forward(torch.randn(4, arch.hidden_size), step_state(shapes, 4, routing))
    assert out.shape == (4, arch.hidden_size)
    assert bool(torch.isfinite(out).all())


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


@pytest.mark.parametrize("config", [TINY_DENSE, TINY_SHARED_MOE], ids=["dense-qk-norm", "moe"])
def test_the_glue_alone_computes_the_layer_from_its_gemms_outputs(
    config: dict[str, object],
) -> None:
    """The glue run takes the GEMMs' outputs made beforehand and does everything else: the same
    layer output, the same cache writes, with none of the GEMMs called."""
    torch.manual_seed(0)
    arch = model_from_config(config, "tiny")
    shapes = LayerShapes.of(arch, 1)
    kind = "moe" if arch.is_moe else "dense"
    layer = DecoderLayer(arch, shapes, kind, torch.float32, CPU)
    routing = (
        Routing.build(arch.num_experts, arch.experts_per_token, 3, 0, CPU)
        if kind == "moe"
        else None
    )
    x = torch.randn(3, arch.hidden_size)
    whole_state, glue_state = step_state(shapes, 3, routing), step_state(shapes, 3, routing)
    glue_state.attention_out.copy_(whole_state.attention_out)
    made = layer.glue_inputs(x, whole_state)
    whole = layer.forward(x, whole_state)

    def untouchable(*_: object) -> None:
        raise AssertionError("a GEMM ran in the glue")

    for name, value in vars(layer).items():
        if isinstance(value, decode_layer.EngineLinear):
            setattr(layer, name, untouchable)
    layer.experts_gate_up = layer.experts_down = None  # type: ignore[assignment]
    glue = layer.forward(x, glue_state, made)
    torch.testing.assert_close(glue, whole)
    torch.testing.assert_close(glue_state.k_slot, whole_state.k_slot)
    torch.testing.assert_close(glue_state.v_slot, whole_state.v_slot)
