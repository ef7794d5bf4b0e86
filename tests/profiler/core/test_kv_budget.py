import math

import pytest

from roofline_profiler.core import kv_budget, model_config

GIB = 2**30


@pytest.fixture
def llama8() -> model_config.ModelArch:
    return model_config.load_model("llama-3.1-8b")


def test_max_batch_by_memory_splits_the_kv_budget_into_blocks_per_sequence() -> None:
    budget_blocks = 1000
    block = 131_072 * 16
    memory = (10 * GIB + 1 * GIB + budget_blocks * block) / 0.9
    # 4100 tokens need ceil(4100 / 16) = 257 blocks: 3 sequences fit in 1000 blocks.
    assert kv_budget.max_batch_by_memory(10 * GIB, 131_072, 4100, math.ceil(memory), 0.9, GIB) == 3
    assert kv_budget.max_batch_by_memory(10 * GIB, 131_072, 4096, math.ceil(memory), 0.9, GIB) == 3
    assert kv_budget.max_batch_by_memory(10 * GIB, 131_072, 16, math.ceil(memory), 0.9, GIB) == 1000


def test_max_batch_by_memory_is_zero_when_the_weights_do_not_fit() -> None:
    assert kv_budget.max_batch_by_memory(80 * GIB, 131_072, 4096, 80 * GIB, 0.9, GIB) == 0


def test_llama_8b_on_80_gib_fits_about_110_sequences_of_4k(llama8: model_config.ModelArch) -> None:
    reserve = kv_budget.activation_reserve_bytes(llama8, 2, 1)
    budget = 0.9 * 80 * GIB - 16_060_522_496 - reserve
    expected = int(budget // (131_072 * 16)) // 256
    assert kv_budget.max_batch_by_memory(16_060_522_496, 131_072, 4096, 80 * GIB, 0.9, reserve) == (
        expected
    )
    assert 100 < expected < 120


def test_activation_reserve_is_one_layers_live_tensors_logits_and_runtime(
    llama8: model_config.ModelArch,
) -> None:
    layer = 8192 * (2 * 4096 + 6144 + 3 * 14336) * 2
    logits = 256 * 128_256 * 4
    assert kv_budget.activation_reserve_bytes(llama8, 2, 1) == layer + logits + GIB


def test_moe_activation_reserve_counts_every_token_expert_pair() -> None:
    arch = model_config.load_model("qwen3-30b-a3b")
    layer = 8192 * (2 * 2048 + 5120 + 8 * (3 * 768 + 2048)) * 2
    assert kv_budget.activation_reserve_bytes(arch, 2, 1) == layer + 256 * 151_936 * 4 + GIB


def test_a_models_memory_is_its_weights_kv_and_reserve_and_the_sequences_beside_them(
    llama8: model_config.ModelArch,
) -> None:
    memory = kv_budget.model_memory(llama8, 2, 4096, 1, 80 * GIB, 0.9)
    assert (memory.weights, memory.kv_per_token) == (16_060_522_496, 131_072)
    assert memory.reserve == kv_budget.activation_reserve_bytes(llama8, 2, 1)
    assert memory.max_batch == kv_budget.max_batch_by_memory(
        16_060_522_496, 131_072, 4096, 80 * GIB, 0.9, memory.reserve
    )
    halves = kv_budget.model_memory(llama8, 2, 4096, 2, 80 * GIB, 0.9)
    assert halves.kv_per_token == memory.kv_per_token // 2
    assert halves.max_batch > memory.max_batch
