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

#: ``quantization_config`` as published checkpoints carry it, one per format family: AutoAWQ's
#: 4-bit GEMM layout, AutoGPTQ's, Qwen3-8B-FP8's block-wise FP8, llm-compressor's W8A8 INT8 and
#: bitsandbytes' 4-bit NF4.
QUANTIZATION_CONFIGS: dict[str, dict[str, Any]] = {
    "awq": {
        "quant_method": "awq",
        "bits": 4,
        "group_size": 128,
        "zero_point": True,
        "version": "gemm",
        "modules_to_not_convert": None,
    },
    "gptq": {
        "quant_method": "gptq",
        "bits": 4,
        "group_size": 128,
        "desc_act": False,
        "sym": True,
        "damp_percent": 0.01,
        "checkpoint_format": "gptq",
    },
    "fp8": {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "weight_block_size": [128, 128],
    },
    "compressed-tensors": {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
                "input_activations": {"num_bits": 8, "type": "int", "dynamic": True},
            }
        },
        "ignore": ["lm_head"],
    },
    "bitsandbytes": {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_compute_dtype": "bfloat16",
    },
}


#: Formats the plan reads (each sets ``ModelArch.weight_format``) and those it refuses, with the
#: ``quant_method`` each declares.
PLANNED_QUANTIZATIONS = ("awq", "compressed-tensors", "fp8", "gptq")
UNPLANNED_QUANTIZATION_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "bitsandbytes-nf4": ("bitsandbytes", QUANTIZATION_CONFIGS["bitsandbytes"]),
    "gptq-3-bit": ("gptq", {**QUANTIZATION_CONFIGS["gptq"], "bits": 3}),
    "compressed-tensors-w4a16": (
        "compressed-tensors",
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}},
        },
    ),
}


#: A Llama of two 128-wide layers: the model-plan and load CLI tests profile it in seconds.
TINY_LLAMA_128: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


#: ``spec.models`` of a profile with one model as its preset says and one served with AWQ 4-bit
#: weights (the family name, read with its default group) and an FP8 KV cache.
PLAIN_AND_AWQ_FP8_MODELS: list[dict[str, Any]] = [
    {"name": "plain", "preset": "llama-3.1-8b"},
    {"name": "awq", "preset": "llama-3.1-8b", "weightFormat": "awq-int4", "kvCacheDtype": "fp8"},
]
