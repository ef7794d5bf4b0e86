import dataclasses
import json
import time
from pathlib import Path

import pytest

from roofline_profiler.core import limits, model_config
from roofline_profiler.core.model_config import ModelError
from tests.model_configs import QUANTIZATION_CONFIGS


def _config(**overrides: object) -> dict[str, object]:
    """Llama-3.1-8B's config with fields replaced; ``...`` removes a field."""
    config = dict(model_config.PRESETS["llama-3.1-8b"])
    config.update(overrides)
    return {k: v for k, v in config.items() if v is not ...}


def test_every_preset_reads_as_its_published_architecture() -> None:
    shapes = {
        name: (a.model_type, a.hidden_size, a.num_layers, a.num_heads, a.num_kv_heads, a.head_dim)
        for name in model_config.PRESETS
        for a in [model_config.load_model(name)]
    }
    assert shapes == {
        "llama-3.1-8b": ("llama", 4096, 32, 32, 8, 128),
        "llama-3.1-70b": ("llama", 8192, 80, 64, 8, 128),
        "qwen3-8b": ("qwen3", 4096, 36, 32, 8, 128),
        "mixtral-8x7b": ("mixtral", 4096, 32, 32, 8, 128),
        "qwen3-30b-a3b": ("qwen3_moe", 2048, 48, 32, 4, 128),
    }
    moe = model_config.load_model("qwen3-30b-a3b")
    assert (moe.num_experts, moe.experts_per_token, moe.moe_intermediate_size) == (128, 8, 768)
    assert (moe.moe_layers, moe.qk_norm, moe.is_moe) == (48, True, True)


def test_head_dim_defaults_to_hidden_over_heads_when_null() -> None:
    assert model_config.model_from_config(_config(head_dim=None), "x").head_dim == 128
    assert model_config.model_from_config(_config(head_dim=64), "x").head_dim == 64


def test_model_type_is_taken_from_architectures_when_missing() -> None:
    arch = model_config.model_from_config(_config(model_type=...), "x")
    assert arch.model_type == "llama"


def test_a_config_path_loads_with_its_folder_as_name(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(model_config.PRESETS["qwen3-8b"])))
    arch = model_config.load_model(str(folder / "config.json"))
    assert (arch.name, arch.model_type, arch.qk_norm) == ("my-model", "qwen3", True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"model_type": "gpt2"}, "model_type 'gpt2' is not supported", id="unknown"),
        pytest.param({"hidden_size": ...}, "hidden_size is missing", id="missing"),
        pytest.param(
            {"num_key_value_heads": 0}, "num_key_value_heads must be a positive", id="zero"
        ),
        pytest.param({"num_key_value_heads": 5}, "num_key_value_heads (5) must divide", id="gqa"),
        pytest.param({"num_hidden_layers": "32"}, "num_hidden_layers must be a positive", id="str"),
        pytest.param({"tie_word_embeddings": "no"}, "tie_word_embeddings must be true", id="bool"),
        pytest.param(
            {"hidden_size": 4000, "num_attention_heads": 3, "num_key_value_heads": 3},
            "head_dim is missing",
            id="hd",
        ),
    ],
)
def test_a_malformed_config_is_one_line_naming_the_field(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ModelError, match=r"^config\.json: ") as info:
        model_config.model_from_config(_config(**overrides), "x")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_moe_config_without_expert_count_names_the_field() -> None:
    config = {
        k: v for k, v in model_config.PRESETS["mixtral-8x7b"].items() if k != "num_local_experts"
    }
    with pytest.raises(ModelError, match="num_local_experts is missing"):
        model_config.model_from_config(config, "x")


def test_qwen_per_layer_sliding_windows_are_rejected() -> None:
    config = dict(model_config.PRESETS["qwen3-8b"], use_sliding_window=True)
    with pytest.raises(ModelError, match="use_sliding_window"):
        model_config.model_from_config(config, "x")


def test_an_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(ModelError, match=r"unknown model preset .llama-9.*llama-3\.1-8b"):
        model_config.load_model("llama-9")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "cannot read the config", id="absent"),
        pytest.param("{not json", "not valid JSON", id="not-json"),
        pytest.param("[1, 2]", "must be a JSON object", id="not-object"),
    ],
)
def test_an_unreadable_or_malformed_file_is_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelError, match=message):
        model_config.load_model(str(path))


def test_an_unknown_architecture_without_model_type_is_named() -> None:
    with pytest.raises(ModelError, match="architectures 'GPT2LMHeadModel' is not supported"):
        model_config.model_from_config(
            _config(model_type=..., architectures=["GPT2LMHeadModel"]), "x"
        )


@pytest.mark.parametrize("model_type", ["qwen2_moe", "qwen3_moe"])
def test_a_moe_config_with_a_billion_layers_is_refused_before_any_work(model_type: str) -> None:
    """The MoE layer count walks every layer: an unbounded count would block its caller."""
    config = {**model_config.PRESETS["qwen3-30b-a3b"], "model_type": model_type}
    config["num_hidden_layers"] = 10**9
    started = time.perf_counter()
    with pytest.raises(ModelError, match="num_hidden_layers must be at most 1024, got 1000000000"):
        model_config.model_from_config(config, "huge")
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize(
    ("field", "value"),
    [(field, limit + 1) for field, limit in limits.MODEL_FIELD_LIMITS.items()],
)
def test_every_bounded_field_names_its_limit(field: str, value: int) -> None:
    reads = {"num_local_experts": "mixtral-8x7b", "sliding_window": "mixtral-8x7b"}
    config = {**model_config.PRESETS[reads.get(field, "qwen3-30b-a3b")], field: value}
    if field == "shared_expert_intermediate_size":
        config["model_type"] = "qwen2_moe"
    with pytest.raises(ModelError, match=f"{field} must be at most {value - 1}"):
        model_config.model_from_config(config, "m")


def test_a_config_text_over_the_size_limit_or_nested_too_deeply_is_one_line() -> None:
    with pytest.raises(ModelError, match=f"at most {limits.MAX_CONFIG_BYTES}"):
        model_config.parse_config_text(" " * (limits.MAX_CONFIG_BYTES + 1), "cm")
    with pytest.raises(ModelError, match="nested too deeply"):
        model_config.parse_config_text("[" * 4096 * 8, "cm")
    big = {**model_config.PRESETS["llama-3.1-8b"], "pad": "x" * limits.MAX_CONFIG_BYTES}
    with pytest.raises(ModelError, match="bytes, at most"):
        model_config.model_from_config(big, "m")


def test_a_quantized_config_file_in_a_format_no_plan_reads_is_refused_naming_file_and_method(
    tmp_path: Path,
) -> None:
    """A 4-bit bitsandbytes Llama would be planned as float32 weights, 4 to 8 times its bytes;
    it is a :class:`ModelError` (so every caller reports it as bad input), never a plan."""
    folder = tmp_path / "llama-nf4"
    folder.mkdir()
    nf4 = {**_config(), "quantization_config": QUANTIZATION_CONFIGS["bitsandbytes"]}
    (folder / "config.json").write_text(json.dumps(nf4))
    with pytest.raises(model_config.QuantizedConfig) as refused:
        model_config.load_model(str(folder / "config.json"))
    assert isinstance(refused.value, ModelError)
    assert str(refused.value) == (
        "config.json: quantization_config declares quant_method 'bitsandbytes': the plan does "
        "not read this format (it plans AWQ 4-bit, GPTQ 4- and 8-bit, compressed-tensors W8A8 "
        "INT8 and FP8 weights; counting these weights at 16 or 32 bits would be wrong)"
    )
    assert refused.value.declared.method == "bitsandbytes"


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("awq", "awq-int4-g128"),
        ("gptq", "gptq-int4-g128"),
        ("fp8", "fp8-w8a8"),
        ("compressed-tensors", "int8-w8a8"),
    ],
)
def test_a_quantization_config_the_plan_reads_sets_the_weight_format(
    method: str, expected: str
) -> None:
    arch = model_config.model_from_config(
        {**_config(), "quantization_config": QUANTIZATION_CONFIGS[method]}, "m"
    )
    assert arch.weight_format == expected
    assert arch.quantized is not None
    assert arch.quantized.name == expected


def test_a_weight_format_in_text_config_is_read_there() -> None:
    config = {**_config(), "text_config": {"quantization_config": QUANTIZATION_CONFIGS["gptq"]}}
    assert model_config.model_from_config(config, "m").weight_format == "gptq-int4-g128"


def test_a_quantized_mixture_of_experts_is_refused() -> None:
    moe = {
        **model_config.PRESETS["mixtral-8x7b"],
        "quantization_config": QUANTIZATION_CONFIGS["awq"],
    }
    with pytest.raises(ModelError, match="quantized mixture of experts is not planned"):
        model_config.model_from_config(moe, "m")


def test_an_architecture_refuses_a_weight_format_or_cache_dtype_no_engine_names() -> None:
    arch = model_config.model_from_config(_config(), "m")
    with pytest.raises(ValueError, match="not a weight format"):
        dataclasses.replace(arch, weight_format="int3-magic")
    with pytest.raises(ValueError, match="not a KV-cache dtype"):
        dataclasses.replace(arch, kv_cache_dtype="int4")


def test_a_quantized_config_is_refused_before_its_other_fields_are_read() -> None:
    """The refusal that says why comes first, whatever else the config lacks (a multimodal
    ``model_type`` the plan does not read either)."""
    config = {
        "model_type": "mistral3",
        "text_config": {"quantization_config": {"quant_method": "bitsandbytes"}},
    }
    with pytest.raises(model_config.QuantizedConfig, match=r"text_config\.quantization_config"):
        model_config.model_from_config(config, "m")
