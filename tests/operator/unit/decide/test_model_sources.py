from __future__ import annotations

import json
from typing import Any

import pytest
from tests.model_configs import (
    PLANNED_QUANTIZATIONS,
    QUANTIZATION_CONFIGS,
    TINY_LLAMA,
    UNPLANNED_QUANTIZATION_CONFIGS,
)

from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.decide.model_sources import (
    ServedFormat,
    config_maps_needed,
    resolve_models,
)
from roofline_profiler.core import model_config
from roofline_profiler.core.model_request import ModelsJsonError, parse_models_json

CM = ("roofline", "cfg")
#: A checkpoint whose config declares AutoAWQ's 4-bit weights in groups of 128.
AWQ_LLAMA = {**TINY_LLAMA, "quantization_config": QUANTIZATION_CONFIGS["awq"]}


def test_valid_models_reach_the_pod_with_their_configs_inline() -> None:
    models = (
        ModelSpec("a", preset="qwen3-8b", context_tokens=8192),
        ModelSpec("b", config=TINY_LLAMA),
        ModelSpec("c", config_map=("cfg", "config.json"), tensor_parallel=2),
    )
    resolution = resolve_models(models, "roofline", {CM: {"config.json": json.dumps(TINY_LLAMA)}})
    assert not resolution.failures
    argument = json.loads(resolution.models_json() or "")
    assert argument == [
        {"name": "a", "preset": "qwen3-8b", "contextTokens": 8192, "tensorParallel": 1},
        {"name": "b", "config": TINY_LLAMA, "contextTokens": 4096, "tensorParallel": 1},
        {"name": "c", "config": TINY_LLAMA, "contextTokens": 4096, "tensorParallel": 2},
    ]


def test_a_bad_model_fails_alone_with_a_message_naming_the_field() -> None:
    broken = {k: v for k, v in TINY_LLAMA.items() if k != "num_attention_heads"}
    models = (ModelSpec("good", config=TINY_LLAMA), ModelSpec("bad", config=broken))
    resolution = resolve_models(models, "roofline", {})
    assert [m.spec.name for m in resolution.valid] == ["good"]
    failure = (resolution.failures or {})["bad"]
    assert failure.reason == "InvalidModel"
    assert failure.message.startswith("spec.models[1].config")
    assert "num_attention_heads" in failure.message


def test_an_unknown_preset_and_a_bad_tensor_parallel_degree_are_reported() -> None:
    models = (ModelSpec("x", preset="gpt-9"), ModelSpec("y", config=TINY_LLAMA, tensor_parallel=3))
    failures = resolve_models(models, "ns", {}).failures or {}
    assert failures["x"].reason == "UnknownPreset"
    assert "llama-3.1-8b" in failures["x"].message
    assert failures["y"].reason == "InvalidModel"
    assert "tensor parallel 3" in failures["y"].message


def test_config_map_failures_say_what_is_missing() -> None:
    models = (
        ModelSpec("gone", config_map=("absent", "config.json")),
        ModelSpec("nokey", config_map=("cfg", "config.json")),
        ModelSpec("notjson", config_map=("cfg", "other")),
    )
    maps = {("ns", "absent"): None, ("ns", "cfg"): {"other": "{nope"}}
    failures = resolve_models(models, "ns", maps).failures or {}
    assert failures["gone"].reason == "ConfigMapNotFound"
    assert (
        failures["gone"].message
        == "spec.models[0].configMapRef.name: ConfigMap ns/absent not found"
    )
    assert failures["nokey"].reason == "ConfigMapKeyNotFound"
    assert failures["nokey"].message == (
        "spec.models[1].configMapRef.key: ConfigMap ns/cfg has no key 'config.json'"
    ), "the ConfigMap's other keys are not the profile's to list"
    assert failures["notjson"].reason == "InvalidModel"
    assert "not valid JSON" in failures["notjson"].message


SECRET = "s3cr3t-token-value"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        pytest.param({**TINY_LLAMA, "hidden_size": SECRET}, "hidden_size", id="string-field"),
        pytest.param({**TINY_LLAMA, "model_type": SECRET}, "model_type", id="model-type"),
        pytest.param(
            {**TINY_LLAMA, "model_type": None, "architectures": [SECRET]},
            "architectures",
            id="architectures",
        ),
        pytest.param(
            {**TINY_LLAMA, "tie_word_embeddings": SECRET}, "tie_word_embeddings", id="bool"
        ),
        pytest.param({**TINY_LLAMA, "num_key_value_heads": 3}, "num_key_value_heads", id="gqa"),
        pytest.param({**TINY_LLAMA, "vocab_size": 10**90}, "vocab_size", id="too-large"),
    ],
)
def test_a_config_map_config_is_refused_naming_the_field_without_its_value(
    config: dict[str, Any], field: str
) -> None:
    """A ``configMapRef`` may name any ConfigMap of the namespace, and tenants read the status:
    a refused value is never echoed (it was: ``got 's3cr3t-token-value'``)."""
    models = (ModelSpec("m", config_map=("cfg", "config.json")),)
    text = json.dumps(config)
    (failure,) = (
        resolve_models(models, "ns", {("ns", "cfg"): {"config.json": text}}).failures or {}
    ).values()
    assert failure.reason == "InvalidModel"
    assert f"{field} is not valid" in failure.message
    for value in (SECRET, "3", str(10**90)):
        assert value not in failure.message.replace("spec.models[0]", "")


def test_a_config_map_holding_an_integer_of_5000_digits_fails_its_model_alone() -> None:
    """``json.loads`` refused it with a bare ``ValueError``, which left the round."""
    text = json.dumps(TINY_LLAMA).replace('"vocab_size": 256', '"vocab_size": ' + "9" * 5000)
    models = (
        ModelSpec("long", config_map=("cfg", "config.json")),
        ModelSpec("fine", config=TINY_LLAMA),
    )
    resolution = resolve_models(models, "ns", {("ns", "cfg"): {"config.json": text}})
    assert [m.spec.name for m in resolution.valid] == ["fine"]
    failure = (resolution.failures or {})["long"]
    assert failure.reason == "InvalidModel"
    assert "not valid JSON (an integer of 5000 digits)" in failure.message


def test_each_config_map_is_read_once() -> None:
    models = (
        ModelSpec("a", config_map=("cfg", "a.json")),
        ModelSpec("b", config_map=("cfg", "b.json")),
        ModelSpec("c", preset="qwen3-8b"),
    )
    assert config_maps_needed(models, "ns") == [("ns", "cfg")]


def test_the_digest_follows_the_config_maps_content() -> None:
    models = (ModelSpec("a", config_map=("cfg", "config.json")),)
    small = json.dumps(TINY_LLAMA)
    larger = json.dumps({**TINY_LLAMA, "num_hidden_layers": 4})
    first = resolve_models(models, "ns", {("ns", "cfg"): {"config.json": small}}).digest()
    second = resolve_models(models, "ns", {("ns", "cfg"): {"config.json": larger}}).digest()
    assert first
    assert second
    assert first != second
    assert resolve_models((), "ns", {}).models_json() is None


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(ModelSpec("a", preset="llama-3.1-8b", tensor_parallel=8), id="preset"),
        pytest.param(ModelSpec("a", preset="gpt-9"), id="unknown-preset"),
        pytest.param(ModelSpec("a", config=TINY_LLAMA, tensor_parallel=2), id="config"),
        pytest.param(ModelSpec("a", config=TINY_LLAMA, tensor_parallel=3), id="tp-not-dividing"),
        pytest.param(ModelSpec("a", preset="qwen3-30b-a3b", tensor_parallel=64), id="moe-tp-64"),
        pytest.param(
            ModelSpec("a", config={**TINY_LLAMA, "hidden_size": 0}), id="config-out-of-range"
        ),
        pytest.param(
            ModelSpec("a", preset="qwen3-8b", weight_format="gptq-int8-g64-asym"), id="format"
        ),
        pytest.param(ModelSpec("a", preset="qwen3-8b", kv_cache_dtype="fp8_e5m2"), id="fp8-cache"),
        pytest.param(ModelSpec("a", config=AWQ_LLAMA, weight_format="awq-int4-g128"), id="same"),
        pytest.param(
            ModelSpec("a", config=AWQ_LLAMA, weight_format="gptq-int4-g128"), id="other-format"
        ),
        pytest.param(
            ModelSpec("a", preset="qwen3-30b-a3b", weight_format="int8-w8a8"), id="format-on-moe"
        ),
    ],
)
def test_the_operator_and_the_pod_refuse_the_same_models(model: ModelSpec) -> None:
    resolution = resolve_models((model,), "ns", {})
    entry: dict[str, Any] = {
        "name": model.name,
        "contextTokens": model.context_tokens,
        "tensorParallel": model.tensor_parallel,
        "weightFormat": model.weight_format,
        "kvCacheDtype": model.kv_cache_dtype,
    }
    if model.preset is not None:
        entry["preset"] = model.preset
    else:
        entry["config"] = model.config
    try:
        parse_models_json(json.dumps([entry]))
        pod_accepts = True
    except ModelsJsonError:
        pod_accepts = False
    assert pod_accepts is not bool(resolution.failures)


@pytest.mark.parametrize("case", sorted(UNPLANNED_QUANTIZATION_CONFIGS))
def test_a_model_quantized_in_a_format_no_plan_reads_fails_alone_and_never_reaches_the_pods(
    case: str,
) -> None:
    """Its weights would be planned at 16 or 32 bits, 2 to 8 times their bytes: the model fails
    with the format named, inline or from a ConfigMap, and the other models go on."""
    method, quantization = UNPLANNED_QUANTIZATION_CONFIGS[case]
    quantized = {**TINY_LLAMA, "quantization_config": quantization}
    models = (
        ModelSpec("inline", config=quantized),
        ModelSpec("mapped", config_map=("cfg", "config.json")),
        ModelSpec("fine", config=TINY_LLAMA),
    )
    resolution = resolve_models(
        models, "ns", {("ns", "cfg"): {"config.json": json.dumps(quantized)}}
    )
    assert [m.spec.name for m in resolution.valid] == ["fine"]
    assert method not in (resolution.models_json() or "")
    failures = resolution.failures or {}
    for name, where in (("inline", "spec.models[0].config"), ("mapped", "spec.models[1].config")):
        assert failures[name].reason == "InvalidModel"
        assert failures[name].message.startswith(where)
        assert f"quantization_config declares quant_method {method!r}: the plan does not " in (
            failures[name].message
        )
        assert failures[name].message.endswith("would be wrong)")


@pytest.mark.parametrize("method", PLANNED_QUANTIZATIONS)
def test_a_model_quantized_in_a_format_the_plan_reads_reaches_the_pods(method: str) -> None:
    quantized = {**TINY_LLAMA, "quantization_config": QUANTIZATION_CONFIGS[method]}
    resolution = resolve_models((ModelSpec("inline", config=quantized),), "ns", {})
    assert [m.spec.name for m in resolution.valid] == ["inline"]
    assert not resolution.failures


def test_a_config_map_names_only_a_quantization_the_engines_know() -> None:
    """Tenants read the status: a ConfigMap's own quant_method or dtype is not echoed, only
    the field and a name from the engines' vocabulary."""
    configs = {
        "method.json": {**TINY_LLAMA, "quantization_config": {"quant_method": SECRET}},
        "nested.json": {**TINY_LLAMA, "text_config": {"compression_config": [SECRET]}},
        "dtype.json": {**TINY_LLAMA, "torch_dtype": f"float8_{SECRET}"},
    }
    models = tuple(ModelSpec(key, config_map=("cfg", key)) for key in configs)
    data = {key: json.dumps(config) for key, config in configs.items()}
    failures = resolve_models(models, "ns", {("ns", "cfg"): data}).failures or {}
    shown = {name: failure.message.split(": ", 1)[1] for name, failure in failures.items()}
    why = f"({model_config.QUANTIZED_NOT_PLANNED})"
    assert shown == {
        "method.json": "quantization_config declares a quant_method the engines do not name: "
        f"the plan does not read this format {why}",
        "nested.json": "text_config.compression_config is a list: the plan does not read a "
        f"quantization that is not an object {why}",
        "dtype.json": "torch_dtype is an 8-bit type: the plan does not read a narrow dtype "
        f"without its quantization_config {why}",
    }


def test_a_format_and_a_cache_dtype_the_spec_names_reach_the_pods_and_the_status() -> None:
    """The pod applies the spec's fields itself (written only where set, so a model without
    them has the file it had before); the status and metrics read the resolved model, whose
    format may come from its config."""
    models = (
        ModelSpec(
            "named", preset="llama-3.1-8b", weight_format="awq-int4-g64", kv_cache_dtype="fp8"
        ),
        ModelSpec("declared", config=AWQ_LLAMA),
        ModelSpec("plain", preset="qwen3-8b"),
    )
    resolution = resolve_models(models, "ns", {})
    assert not resolution.failures
    named, declared, plain = json.loads(resolution.models_json() or "")
    assert (named["weightFormat"], named["kvCacheDtype"]) == ("awq-int4-g64", "fp8")
    assert "weightFormat" not in declared
    assert "kvCacheDtype" not in declared
    assert "weightFormat" not in plain
    assert "kvCacheDtype" not in plain
    assert resolution.formats() == {
        "named": ServedFormat("awq-int4-g64", "fp8"),
        "declared": ServedFormat("awq-int4-g128", "auto"),
        "plain": ServedFormat("", "auto"),
    }


def test_the_format_a_config_declares_may_be_named_again_in_the_spec() -> None:
    model = ModelSpec("a", config=AWQ_LLAMA, weight_format="awq-int4-g128")
    resolution = resolve_models((model,), "ns", {})
    assert not resolution.failures
    assert resolution.formats()["a"].weight_format == "awq-int4-g128"


def test_a_format_other_than_the_config_declares_fails_the_model_alone_in_one_line() -> None:
    """The engine serves a checkpoint in its own format; the ConfigMap's config is shown only by
    the name of the format it declares, one of a fixed vocabulary."""
    models = (
        ModelSpec("fine", preset="qwen3-8b"),
        ModelSpec("inline", config=AWQ_LLAMA, weight_format="gptq-int4-g128"),
        ModelSpec("mapped", config_map=("cfg", "config.json"), weight_format="int8-w8a8"),
    )
    data = {"config.json": json.dumps({**AWQ_LLAMA, "secret_field": SECRET})}
    resolution = resolve_models(models, "ns", {("ns", "cfg"): data})
    assert [m.spec.name for m in resolution.valid] == ["fine"]
    failures = resolution.failures or {}
    assert failures["inline"].reason == failures["mapped"].reason == "InvalidModel"
    assert failures["inline"].message == (
        "spec.models[1].weightFormat gptq-int4-g128: spec.models[1].config declares "
        "awq-int4-g128 weights (the engine serves a checkpoint in its own format)"
    )
    assert failures["mapped"].message == (
        "spec.models[2].weightFormat int8-w8a8: spec.models[2].configMapRef declares "
        "awq-int4-g128 weights (the engine serves a checkpoint in its own format)"
    )
    assert SECRET not in failures["mapped"].message


def test_a_format_on_a_mixture_of_experts_fails_the_model() -> None:
    model = ModelSpec("moe", preset="qwen3-30b-a3b", weight_format="fp8-w8a8")
    failures = resolve_models((model,), "ns", {}).failures or {}
    assert failures["moe"].reason == "InvalidModel"
    assert failures["moe"].message == (
        "spec.models[0].weightFormat: spec.models[0].preset is a mixture of experts, whose "
        "quantized experts the plan does not time"
    )


@pytest.mark.parametrize(
    ("model", "dtype", "valid"),
    [
        pytest.param(ModelSpec("a", config=AWQ_LLAMA), "float32", False, id="declared-float32"),
        pytest.param(
            ModelSpec("a", preset="qwen3-8b", weight_format="int8-w8a8"),
            "float32",
            False,
            id="named-float32",
        ),
        pytest.param(ModelSpec("a", config=AWQ_LLAMA), "bfloat16", True, id="declared-bfloat16"),
        pytest.param(ModelSpec("a", config=AWQ_LLAMA), None, True, id="dtype-unchecked"),
        pytest.param(
            ModelSpec("a", preset="qwen3-8b", kv_cache_dtype="fp8"), "float32", True, id="fp8-cache"
        ),
    ],
)
def test_quantized_weights_under_a_float32_spec_fail_the_model(
    model: ModelSpec, dtype: str | None, valid: bool
) -> None:
    """The engines serve quantized weights with 16-bit activations, as the profiler's
    ``--dtype float32`` refusal says; a cache dtype alone is no quantized weight."""
    resolution = resolve_models((model,), "ns", {}, dtype)
    assert bool(resolution.valid) is valid
    if not valid:
        message = (resolution.failures or {})["a"].message
        assert (
            "under spec.dtype float32: the engines serve quantized weights with 16-bit" in message
        )
