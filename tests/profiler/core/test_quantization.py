from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline_profiler.core import model_config
from roofline_profiler.core.errors import printable
from roofline_profiler.core.quantization import KNOWN_QUANT_METHODS, declared_quantization
from roofline_profiler.core.weight_formats import UnplannedFormat, weight_format_of
from tests.model_configs import QUANTIZATION_CONFIGS, TINY_LLAMA


@pytest.mark.parametrize("method", sorted(QUANTIZATION_CONFIGS))
def test_a_published_quantization_config_is_found_with_its_method(method: str) -> None:
    config = {**TINY_LLAMA, "quantization_config": QUANTIZATION_CONFIGS[method]}
    declared = declared_quantization(config)
    assert declared is not None
    assert (declared.field, declared.method) == ("quantization_config", method)
    assert declared.detail == f"declares quant_method {method!r}"
    assert declared.redacted == declared.detail, "a method the engines name may be shown"


@pytest.mark.parametrize(
    ("overrides", "field", "detail"),
    [
        pytest.param(
            {"compression_config": {"quant_method": "compressed-tensors"}},
            "compression_config",
            "declares quant_method 'compressed-tensors'",
            id="compression-config",
        ),
        pytest.param(
            {"text_config": {"quantization_config": {"quant_method": "awq"}}},
            "text_config.quantization_config",
            "declares quant_method 'awq'",
            id="multimodal-text-config",
        ),
        pytest.param(
            {"quantization_config": {"load_in_8bit": True}},
            "quantization_config",
            "declares 'bitsandbytes' without a quant_method",
            id="bitsandbytes-without-method",
        ),
        pytest.param(
            {"quantization_config": {"producer": {"name": "modelopt"}}},
            "quantization_config",
            "declares 'modelopt' without a quant_method",
            id="modelopt-producer",
        ),
        pytest.param(
            {"quantization_config": {}}, "quantization_config", "has no quant_method", id="empty"
        ),
        pytest.param(
            {"quantization_config": "awq"},
            "quantization_config",
            "is a string, not an object",
            id="a-string",
        ),
        pytest.param(
            {"quantization_config": [4, 128]},
            "quantization_config",
            "is a list, not an object",
            id="a-list",
        ),
        pytest.param(
            {"quantization_config": False},
            "quantization_config",
            "is a boolean, not an object",
            id="false",
        ),
        pytest.param(
            {"torch_dtype": "float8_e4m3fn"},
            "torch_dtype",
            "is 'float8_e4m3fn', an 8-bit type",
            id="fp8-torch-dtype",
        ),
        pytest.param({"dtype": "int8"}, "dtype", "is 'int8', an 8-bit type", id="int8-dtype"),
        pytest.param(
            {"torch_dtype": "torch.float4_e2m1fn_x2"},
            "torch_dtype",
            "is 'torch.float4_e2m1fn_x2', a 4-bit type",
            id="fp4-with-torch-prefix",
        ),
        pytest.param(
            {"text_config": {"torch_dtype": "uint4"}},
            "text_config.torch_dtype",
            "is 'uint4', a 4-bit type",
            id="text-config-dtype",
        ),
    ],
)
def test_every_place_a_checkpoint_declares_quantization_is_found(
    overrides: dict[str, Any], field: str, detail: str
) -> None:
    declared = declared_quantization({**TINY_LLAMA, **overrides})
    assert declared is not None
    assert (declared.field, declared.detail) == (field, detail)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="nothing"),
        pytest.param({"quantization_config": None, "compression_config": None}, id="null-keys"),
        pytest.param({"torch_dtype": "bfloat16", "dtype": "float16"}, id="16-bit-dtypes"),
        pytest.param({"torch_dtype": "float32"}, id="float32"),
        pytest.param({"torch_dtype": "int16"}, id="a-16-bit-integer-is-not-narrow"),
        pytest.param({"torch_dtype": 8}, id="a-dtype-that-is-not-a-name"),
        pytest.param({"text_config": "not an object"}, id="text-config-not-an-object"),
    ],
)
def test_a_config_without_a_quantized_format_declares_none(overrides: dict[str, Any]) -> None:
    assert declared_quantization({**TINY_LLAMA, **overrides}) is None


def test_the_top_level_quantization_comes_before_the_text_configs_and_the_dtype() -> None:
    declared = declared_quantization(
        {
            "torch_dtype": "float8_e4m3fn",
            "text_config": {"quantization_config": {"quant_method": "gptq"}},
            "compression_config": {"quant_method": "compressed-tensors"},
        }
    )
    assert declared is not None
    assert declared.field == "compression_config"


@pytest.mark.parametrize(
    ("method", "shown"),
    [
        pytest.param("x" * 100_000, "declares a quant_method that is not a plain name", id="huge"),
        pytest.param(
            "awq\n\x1b[31mok", "declares a quant_method that is not a plain name", id="esc"
        ),
        pytest.param("aw\u202eq", "declares a quant_method that is not a plain name", id="bidi"),
        pytest.param(
            {"nested": "awq"}, "declares a quant_method that is not a plain name", id="map"
        ),
        pytest.param(4, "declares a quant_method that is not a plain name", id="a-number"),
        pytest.param("my_format", "declares quant_method 'my_format'", id="unknown-plain-name"),
    ],
)
def test_an_untrusted_quant_method_is_shown_only_as_a_short_plain_name(
    method: Any, shown: str
) -> None:
    declared = declared_quantization({"quantization_config": {"quant_method": method}})
    assert declared is not None
    assert declared.detail == shown


def test_the_redacted_form_names_only_the_methods_the_engines_know() -> None:
    unknown = declared_quantization({"quantization_config": {"quant_method": "s3cr3t"}})
    assert unknown is not None
    assert unknown.detail == "declares quant_method 's3cr3t'"
    assert "s3cr3t" not in unknown.redacted
    dtype = declared_quantization({"torch_dtype": "float8_s3cr3t"})
    assert dtype is not None
    assert (dtype.detail, dtype.redacted) == (
        "is 'float8_s3cr3t', an 8-bit type",
        "is an 8-bit type",
    )
    assert {"awq", "gptq", "fp8", "compressed-tensors", "bitsandbytes"} <= KNOWN_QUANT_METHODS


@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True),
        st.text(max_size=300),
        st.lists(st.text(max_size=20), max_size=5),
        st.dictionaries(
            st.sampled_from(["quant_method", "load_in_4bit", "producer", "bits"]),
            st.one_of(st.text(max_size=300), st.booleans(), st.integers(), st.none()),
            max_size=4,
        ),
    )
)
def test_whatever_a_quantization_config_holds_the_refusal_is_one_printable_bounded_line(
    value: Any,
) -> None:
    """The refusal reaches a terminal and a status: one line, nothing a terminal acts on, and
    no longer than the longest plain name allows, whatever the config holds."""
    config = {**TINY_LLAMA, "quantization_config": value}
    if value is None:
        assert model_config.model_from_config(config, "m").num_layers == 2
        return
    try:
        planned = weight_format_of(value)
    except UnplannedFormat:
        planned = None
    if planned is not None:  # a format the plan reads, however it was written
        assert model_config.model_from_config(config, "m").weight_format == planned.name
        return
    with pytest.raises(model_config.QuantizedConfig) as refused:
        model_config.model_from_config(config, "m", source="config.json")
    for line in (str(refused.value), refused.value.without_values()):
        assert line == printable(line)
        assert len(line) < 450
        assert line.startswith("config.json: quantization_config ")
        assert line.endswith(f"({model_config.QUANTIZED_NOT_PLANNED})")
