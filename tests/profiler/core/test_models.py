import dataclasses
import math

import pytest

from roofline_profiler.core import model_config, models
from roofline_profiler.core.model_config import ModelError
from roofline_profiler.core.weight_formats import awq_int4


@pytest.fixture
def llama8() -> model_config.ModelArch:
    return model_config.load_model("llama-3.1-8b")


def _config(**overrides: object) -> dict[str, object]:
    config = dict(model_config.PRESETS["llama-3.1-8b"])
    config.update(overrides)
    return {k: v for k, v in config.items() if v is not ...}


def test_llama_3_1_8b_has_its_published_parameter_count(llama8: model_config.ModelArch) -> None:
    assert models.parameter_count(llama8) == 8_030_261_248


def test_llama_3_1_8b_layer_and_embeddings_match_the_published_breakdown(
    llama8: model_config.ModelArch,
) -> None:
    layer = sum(g.k * g.n for g in models.decode_gemms(llama8, 1) if g.per_layer) + 2 * 4096
    assert layer == 218_112_000
    (lm_head,) = [g for g in models.decode_gemms(llama8, 1) if g.name == "lm_head"]
    assert lm_head.k * lm_head.n == 525_336_576
    assert models.parameter_count(llama8) == 32 * layer + 2 * 525_336_576 + 4096


@pytest.mark.parametrize(
    ("preset", "kv_bytes"),
    [
        pytest.param("llama-3.1-8b", 131_072, id="llama-3.1-8b"),
        pytest.param("mixtral-8x7b", 131_072, id="mixtral-8x7b"),
        pytest.param("llama-3.1-70b", 327_680, id="llama-3.1-70b"),
        pytest.param("qwen3-8b", 147_456, id="qwen3-8b"),
        pytest.param("qwen3-30b-a3b", 98_304, id="qwen3-30b-a3b"),
    ],
)
def test_kv_cache_bytes_per_token_in_bf16_match_the_published_figures(
    preset: str, kv_bytes: int
) -> None:
    assert models.kv_cache_bytes_per_token(model_config.load_model(preset), 2) == kv_bytes


@pytest.mark.parametrize(
    ("preset", "total", "active"),
    [
        pytest.param("mixtral-8x7b", 46_702_792_704, 12_879_925_248, id="mixtral-46.7b-12.9b"),
        pytest.param("qwen3-30b-a3b", 30_532_122_624, 3_353_032_704, id="qwen3-30.5b-3.3b"),
        pytest.param("qwen3-8b", 8_190_735_360, 8_190_735_360, id="qwen3-8.2b"),
        pytest.param("llama-3.1-70b", 70_553_706_496, 70_553_706_496, id="llama-70.6b"),
    ],
)
def test_total_and_active_parameters_match_the_model_cards(
    preset: str, total: int, active: int
) -> None:
    arch = model_config.load_model(preset)
    assert models.parameter_count(arch) == total
    assert models.active_parameter_count(arch) == active


def test_weight_bytes_on_one_gpu_are_parameters_times_element_size(
    llama8: model_config.ModelArch,
) -> None:
    assert models.weight_bytes(llama8, 2) == 2 * 8_030_261_248


def test_tensor_parallel_shards_weights_but_replicates_norms(
    llama8: model_config.ModelArch,
) -> None:
    norms = 32 * 2 * 4096 + 4096
    sharded = 2 * 8_030_261_248 - 2 * norms
    assert models.weight_bytes(llama8, 2, 4) == sharded // 4 + 2 * norms


def test_kv_heads_fewer_than_the_tp_degree_are_replicated_one_per_gpu(
    llama8: model_config.ModelArch,
) -> None:
    assert models.kv_cache_bytes_per_token(llama8, 2, 4) == 131_072 // 4
    assert models.kv_cache_bytes_per_token(llama8, 2, 16) == 2 * 32 * 1 * 128 * 2
    qkv = models.decode_gemms(llama8, 1, 16)[0]
    assert (qkv.k, qkv.n) == (4096, (2 + 2 * 1) * 128)


def test_decode_gemms_of_a_dense_layer_have_the_engines_shapes(
    llama8: model_config.ModelArch,
) -> None:
    shapes = {
        g.name: (g.k, g.n, g.tokens, g.count, g.per_layer)
        for g in models.decode_gemms(llama8, 8, 2)
    }
    assert shapes == {
        "qkv": (4096, (16 + 2 * 4) * 128, 8, 1.0, True),
        "o": (16 * 128, 4096, 8, 1.0, True),
        "gate_up": (4096, 14336, 8, 1.0, True),
        "down": (7168, 4096, 8, 1.0, True),
        "lm_head": (4096, 128256 // 2, 8, 1.0, False),
    }


def test_vocabulary_is_padded_to_a_multiple_of_64_before_sharding() -> None:
    arch = model_config.model_from_config(_config(vocab_size=32001), "odd")
    (lm_head,) = [g for g in models.decode_gemms(arch, 1, 2) if g.name == "lm_head"]
    assert lm_head.n == 32064 // 2


@pytest.mark.parametrize(
    ("experts", "top_k", "batch", "expected"),
    [
        pytest.param(8, 2, 1, 2.0, id="one-token-reads-k"),
        pytest.param(8, 2, 2, 8 * (1 - 0.75**2), id="two-tokens"),
        pytest.param(128, 8, 64, 128 * (1 - (120 / 128) ** 64), id="qwen3-moe"),
        pytest.param(8, 8, 3, 8.0, id="k-equals-e"),
    ],
)
def test_expected_active_experts_follow_uniform_top_k_routing(
    experts: int, top_k: int, batch: int, expected: float
) -> None:
    assert models.expected_active_experts(experts, top_k, batch) == pytest.approx(expected)


def test_expert_gemms_see_their_share_of_the_batch() -> None:
    arch = model_config.load_model("mixtral-8x7b")
    gemms = {g.name: g for g in models.decode_gemms(arch, 64)}
    active = models.expected_active_experts(8, 2, 64)
    assert gemms["expert_gate_up"].count == pytest.approx(active)
    assert gemms["expert_gate_up"].tokens == round(64 * 2 / active) == 16
    assert (gemms["expert_down"].k, gemms["expert_down"].n) == (14336, 4096)
    assert (gemms["router"].k, gemms["router"].n, gemms["router"].tokens) == (4096, 8, 64)
    assert "gate_up" not in gemms
    assert models.decode_gemms(arch, 1)[3].tokens == 1


def test_moe_step_reads_only_the_active_experts() -> None:
    arch = model_config.load_model("mixtral-8x7b")
    b1 = models.decode_step_bytes(arch, 1, 0, 2)
    assert b1 == 2 * (models.active_parameter_count(arch) - 32000 * 4096 + 4096)
    assert (
        b1
        < models.decode_step_bytes(arch, 64, 0, 2)
        <= models.weight_bytes(arch, 2) + 2 * 64 * 4096
    )


def test_decode_step_bytes_add_every_sequences_kv_cache(llama8: model_config.ModelArch) -> None:
    no_context = models.decode_step_bytes(llama8, 16, 0, 2)
    assert models.decode_step_bytes(llama8, 16, 8192, 2) - no_context == 16 * 8192 * 131_072


def test_kv_traffic_passes_weight_traffic_near_batch_14_at_8k_context(
    llama8: model_config.ModelArch,
) -> None:
    weights = models.weight_bytes(llama8, 2)
    crossing = weights / (8192 * 131_072)
    assert 14 < crossing < 15


def test_decode_step_flops_are_gemms_plus_attention(llama8: model_config.ModelArch) -> None:
    gemm = 2 * 4 * (8_030_261_248 - 525_336_576 - 32 * 2 * 4096 - 4096)
    attention = 32 * 4 * 4 * 32 * 128 * 1000
    assert models.decode_step_flops(llama8, 4, 1000) == pytest.approx(gemm + attention)


def test_moe_flops_count_every_token_expert_pair_exactly() -> None:
    arch = model_config.load_model("mixtral-8x7b")
    dense_part = models.decode_step_flops(arch, 3, 0) - 2 * 3 * 2 * 32 * 3 * 4096 * 14336
    attention_and_rest = 2 * 3 * (32 * (4096 * 6144 + 4096 * 4096 + 4096 * 8) + 4096 * 32000)
    assert dense_part == pytest.approx(attention_and_rest)


def test_sliding_window_caps_the_tokens_attention_reads() -> None:
    arch = model_config.model_from_config(
        _config(model_type="mistral", sliding_window=4096, architectures=["MistralForCausalLM"]),
        "mistral",
    )
    assert models.attended_tokens(arch, 8192) == 4096
    assert models.decode_step_bytes(arch, 1, 8192, 2) == models.decode_step_bytes(arch, 1, 4096, 2)


def test_qwen_moe_dense_layers_count_as_fractions_of_a_layer() -> None:
    config = dict(model_config.PRESETS["qwen3-30b-a3b"], decoder_sparse_step=2, mlp_only_layers=[1])
    arch = model_config.model_from_config(config, "mixed")
    assert arch.moe_layers == 23
    gemms = {g.name: g for g in models.decode_gemms(arch, 1)}
    assert gemms["gate_up"].count == pytest.approx(25 / 48)
    assert gemms["router"].count == pytest.approx(23 / 48)
    assert gemms["expert_down"].count == pytest.approx(8 * 23 / 48)


def test_qwen2_moe_shared_expert_and_qkv_bias_are_counted() -> None:
    config = {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "num_hidden_layers": 24,
        "vocab_size": 151936,
        "intermediate_size": 5632,
        "moe_intermediate_size": 1408,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "shared_expert_intermediate_size": 5632,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    }  # Qwen1.5-MoE-A2.7B: 14.3B parameters
    arch = model_config.model_from_config(config, "qwen1.5-moe")
    assert arch.attention_bias
    assert models.parameter_count(arch) == 14_315_784_192
    assert {"shared_gate_up", "shared_down"} <= {g.name for g in models.decode_gemms(arch, 4)}


def test_tied_embeddings_are_stored_once_but_read_as_lm_head() -> None:
    tied = model_config.model_from_config(_config(tie_word_embeddings=True), "tied")
    untied = model_config.model_from_config(_config(), "untied")
    assert models.parameter_count(untied) - models.parameter_count(tied) == 525_336_576
    assert models.decode_step_bytes(tied, 1, 0, 2) == models.decode_step_bytes(untied, 1, 0, 2)


@pytest.mark.parametrize(
    ("preset", "tp", "message"),
    [
        pytest.param("llama-3.1-8b", 0, "positive integer", id="zero"),
        pytest.param("llama-3.1-8b", 3, "does not divide num_attention_heads", id="heads"),
        pytest.param("odd-experts", 16, "does not divide moe_intermediate_size", id="experts"),
    ],
)
def test_a_tp_degree_the_engines_cannot_shard_by_is_rejected(
    preset: str, tp: int, message: str
) -> None:
    if preset in model_config.PRESETS:
        arch = model_config.load_model(preset)
    else:
        config = dict(model_config.PRESETS["qwen3-30b-a3b"], moe_intermediate_size=1000)
        arch = model_config.model_from_config(config, preset)
    with pytest.raises(ModelError, match=message):
        models.check_tensor_parallel(arch, tp)


def test_tp_degrees_that_divide_or_replicate_kv_heads_are_accepted(
    llama8: model_config.ModelArch,
) -> None:
    for tp in (1, 2, 4, 8, 16, 32):
        models.check_tensor_parallel(llama8, tp)
    kv4 = model_config.model_from_config(_config(num_key_value_heads=4), "x")
    assert math.isclose(kv4.head_dim, 128)
    models.check_tensor_parallel(kv4, 8)
    kv12 = model_config.model_from_config(
        _config(num_key_value_heads=16, num_attention_heads=48, head_dim=128), "x"
    )
    with pytest.raises(ModelError, match="neither divides nor is a multiple"):
        models.check_tensor_parallel(kv12, 12)


def test_a_checked_preset_takes_the_name_it_is_given(llama8: model_config.ModelArch) -> None:
    arch = models.checked_model("chat", "llama-3.1-8b", None, 8, source="spec")
    assert arch == dataclasses.replace(llama8, name="chat")


def test_a_checked_config_is_read_and_its_sharding_checked() -> None:
    assert models.checked_model("x", None, _config(), 2, source="s").name == "x"
    with pytest.raises(ModelError, match=r"^here: .*num_attention_heads"):
        models.checked_model("x", None, _config(num_attention_heads=None), 1, source="here")
    with pytest.raises(ModelError, match="tensor parallel 3"):
        models.checked_model("x", None, _config(), 3, source="here")


def test_an_unknown_preset_is_its_own_model_error() -> None:
    with pytest.raises(models.UnknownPreset) as info:
        models.checked_model("x", "gpt-9", None, 1, source="here")
    assert info.value.preset == "gpt-9"
    assert isinstance(info.value, ModelError)
    assert "llama-3.1-8b" in str(info.value)


FIELDS = models.ServingFields("the model", "format", "cache")


def test_a_model_is_served_in_the_format_and_cache_dtype_it_is_given(
    llama8: model_config.ModelArch,
) -> None:
    served = models.served_in(llama8, "gptq-int4-asym", "fp8_e5m2", FIELDS)
    assert served == dataclasses.replace(
        llama8, weight_format="gptq-int4-g128-asym", kv_cache_dtype="fp8_e5m2"
    )
    assert models.served_in(llama8, None, None, FIELDS) == llama8


def test_the_format_a_config_declares_may_be_named_again_but_no_other(
    llama8: model_config.ModelArch,
) -> None:
    awq = dataclasses.replace(llama8, weight_format="awq-int4-g128")
    assert models.served_in(awq, "awq-int4", None, FIELDS) == awq
    with pytest.raises(ModelError) as info:
        models.served_in(awq, "awq-int4-g64", None, FIELDS)
    assert str(info.value) == (
        "format awq-int4-g64: the model declares awq-int4-g128 weights (the engine serves a "
        "checkpoint in its own format)"
    )


@pytest.mark.parametrize(
    ("preset", "weight_format", "cache", "message"),
    [
        pytest.param(
            "qwen3-30b-a3b",
            "awq-int4",
            None,
            "format: the model is a mixture of experts, whose quantized experts the plan does "
            "not time",
            id="moe",
        ),
        pytest.param(
            "llama-3.1-8b",
            "nf4",
            None,
            "format: 'nf4' is not a weight format (awq-int4, gptq-int4, gptq-int8, int8-w8a8, "
            "fp8-w8a8)",
            id="unknown-format",
        ),
        pytest.param(
            "llama-3.1-8b",
            None,
            "int8",
            "cache: 'int8' is not one of auto, fp8, fp8_e4m3, fp8_e5m2",
            id="unknown-cache-dtype",
        ),
    ],
)
def test_a_model_that_cannot_be_served_so_is_one_line_naming_the_field(
    preset: str, weight_format: str | None, cache: str | None, message: str
) -> None:
    arch = model_config.load_model(preset)
    with pytest.raises(ModelError) as info:
        models.served_in(arch, weight_format, cache, FIELDS)
    assert str(info.value) == message


def test_heads_per_gpu_replicate_kv_heads_past_their_count(llama8: model_config.ModelArch) -> None:
    assert models.heads_per_gpu(llama8) == (32, 8)
    assert models.heads_per_gpu(llama8, 4) == (8, 2)
    assert models.heads_per_gpu(llama8, 16) == (2, 1)


def test_a_quantized_model_counts_its_layers_gemms_in_the_format_and_the_rest_in_its_dtype(
    llama8: model_config.ModelArch,
) -> None:
    """Llama-3.1-8B in AWQ 4-bit, groups of 128: each layer's four GEMM weights at 4 bits plus
    a 16-bit scale and a 4-bit zero point per group and output channel; embeddings, head and
    norms stay 16-bit."""
    awq = dataclasses.replace(llama8, weight_format="awq-int4-g128")
    shapes = ((4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096))  # qkv, o, gate_up, down
    layer = sum(awq_int4(128).matrix_bytes(k, n) for k, n in shapes)
    rest = 2 * (8_030_261_248 - 32 * 218_103_808)  # all but the layers' GEMM weights, 16-bit
    assert models.weight_bytes(awq, 2) == 32 * layer + rest
    # 5.73 GB, 36% of its bf16 bytes: its 1.05 G embedding and head parameters stay 16-bit.
    assert models.weight_bytes(awq, 2) == pytest.approx(5.73e9, rel=0.01)


def test_an_fp8_kv_cache_halves_a_16_bit_models_bytes_per_token(
    llama8: model_config.ModelArch,
) -> None:
    fp8 = dataclasses.replace(llama8, kv_cache_dtype="fp8_e5m2")
    assert models.kv_cache_bytes_per_token(fp8, 2) == 131_072 // 2
    assert models.kv_cache_bytes_per_token(fp8, 4) == 131_072 // 2
