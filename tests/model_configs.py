"""Model configs the tests share: small enough for a profiler to measure in seconds on a CPU."""

from __future__ import annotations

from typing import Any

#: A Llama-style config: hidden 64, 2 layers, GQA with 2 KV heads, vocab 256.
TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 4096,
}
#: A Mixtral-style mixture of experts: 8 experts, 2 per token, hidden 64, 2 layers.
TINY_MOE: dict[str, Any] = {
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
#: A Qwen3-style dense model (q/k RMSNorm, a head dim wider than hidden / heads), hidden 64.
TINY_DENSE: dict[str, Any] = {
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
