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
