import json
from pathlib import Path

import pytest

from roofline_profiler.cli.arguments import served_as
from roofline_profiler.core import limits
from roofline_profiler.core.model_request import (
    ModelsJsonError,
    parse_models_json,
    read_models_file,
    request_groups,
)
from roofline_profiler.core.models import checked_model
from tests.model_configs import QUANTIZATION_CONFIGS, TINY_MOE
from tests.model_configs import TINY_LLAMA as TINY

#: A checkpoint whose config declares AutoAWQ's 4-bit weights in groups of 128.
AWQ = {**TINY, "quantization_config": QUANTIZATION_CONFIGS["awq"]}


def test_each_model_keeps_its_name_context_and_tensor_parallel_degree() -> None:
    text = json.dumps(
        [
            {"name": "Llama-3.1-8B-Instruct", "preset": "llama-3.1-8b", "contextTokens": 8192},
            {"name": "tiny", "config": TINY, "tensorParallel": 2},
        ]
    )
    first, second = parse_models_json(text)
    assert (first.arch.name, first.context_tokens, first.tensor_parallel) == (
        "Llama-3.1-8B-Instruct",
        8192,
        1,
    )
    assert first.arch.hidden_size == 4096
    assert (second.arch.name, second.context_tokens, second.tensor_parallel) == ("tiny", 4096, 2)


def test_models_sharing_context_and_degree_are_measured_together() -> None:
    text = json.dumps(
        [
            {"name": "a", "config": TINY},
            {"name": "b", "config": TINY, "contextTokens": 2048},
            {"name": "c", "config": TINY},
        ]
    )
    groups = request_groups(parse_models_json(text))
    assert [(tp, ctx, [a.name for a in archs]) for tp, ctx, archs in groups] == [
        (1, 4096, ["a", "c"]),
        (1, 2048, ["b"]),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "not JSON", id="not-json"),
        pytest.param("[]", "non-empty list", id="empty"),
        pytest.param(json.dumps([{"name": "a"}]), "exactly one of preset", id="no-source"),
        pytest.param(json.dumps([{"name": "a", "preset": "gpt-9"}]), "unknown", id="preset"),
        pytest.param(
            json.dumps([{"name": "a", "config": {**TINY, "hidden_size": None}}]),
            "hidden_size",
            id="bad-config",
        ),
        pytest.param(
            json.dumps([{"name": "a", "config": TINY, "tensorParallel": 3}]),
            "tensor parallel 3",
            id="bad-degree",
        ),
        pytest.param(
            json.dumps([{"name": "a", "config": TINY}, {"name": "a", "config": TINY}]),
            "more than once",
            id="repeated-name",
        ),
        pytest.param(
            json.dumps([{"name": "a", "config": TINY, "contextTokens": 0}]),
            "contextTokens",
            id="zero-context",
        ),
    ],
)
def test_bad_models_json_is_one_line_naming_the_entry(text: str, message: str) -> None:
    with pytest.raises(ModelsJsonError, match=message) as caught:
        parse_models_json(text)
    assert "\n" not in str(caught.value)


def models(**fields: object) -> str:
    return json.dumps([{"name": "a", "config": TINY, **fields}])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            models(weightFormat="awq"),
            r"^--models-json\[0\].weightFormat: 'awq' is not a weight format \(awq-int4, ",
            id="family-prefix",
        ),
        pytest.param(
            models(weightFormat="awq-int4-g100"),
            r"^--models-json\[0\].weightFormat: group size 100 is not one of 32, 64, 128, 256$",
            id="odd-group",
        ),
        pytest.param(
            models(weightFormat=4),
            r"^--models-json\[0\].weightFormat must be a string of at most 32 characters$",
            id="format-number",
        ),
        pytest.param(
            models(weightFormat="awq-int4" * 10),
            r"^--models-json\[0\].weightFormat must be a string of at most 32 characters$",
            id="format-long",
        ),
        pytest.param(
            models(kvCacheDtype="fp16"),
            r"^--models-json\[0\].kvCacheDtype: 'fp16' is not one of auto, fp8, fp8_e4m3, "
            r"fp8_e5m2$",
            id="cache-fp16",
        ),
        pytest.param(
            models(kvCacheDtype=["fp8"]),
            r"^--models-json\[0\].kvCacheDtype must be a string of at most 32 characters$",
            id="cache-list",
        ),
        pytest.param(
            json.dumps([{"name": "a", "config": AWQ, "weightFormat": "gptq-int4"}]),
            r"^--models-json\[0\].weightFormat gptq-int4-g128: --models-json\[0\].config "
            r"declares awq-int4-g128 weights \(the engine serves a checkpoint in its own "
            r"format\)$",
            id="other-than-declared",
        ),
        pytest.param(
            json.dumps([{"name": "a", "config": TINY_MOE, "weightFormat": "int8-w8a8"}]),
            r"^--models-json\[0\].weightFormat: --models-json\[0\].config is a mixture of "
            r"experts, whose quantized experts the plan does not time$",
            id="moe",
        ),
    ],
)
def test_a_bad_format_or_cache_dtype_is_one_line_naming_the_entrys_field(
    text: str, message: str
) -> None:
    with pytest.raises(ModelsJsonError, match=message):
        parse_models_json(text)


def test_an_entrys_format_and_cache_dtype_are_applied_as_the_command_lines_flags() -> None:
    """``served_as`` of ``--weight-format`` and ``--kv-cache-dtype`` on the same model gives the
    same architecture: one function serves both doors."""
    text = json.dumps(
        [
            {"name": "named", "preset": "qwen3-8b", "weightFormat": "gptq-int8-g64-asym"},
            {"name": "cached", "config": TINY, "kvCacheDtype": "fp8_e4m3"},
            {"name": "declared", "config": AWQ, "weightFormat": "awq-int4"},
            {"name": "plain", "config": TINY, "kvCacheDtype": "auto"},
        ]
    )
    named, cached, declared, plain = (entry.arch for entry in parse_models_json(text))
    flags = served_as(checked_model("named", "qwen3-8b", None, 1, source="x"), "qwen3-8b",
                      "gptq-int8-g64-asym", None)  # fmt: skip
    assert named == flags
    assert (named.weight_format, named.kv_cache_dtype) == ("gptq-int8-g64-asym", "auto")
    assert (cached.weight_format, cached.kv_cache_dtype) == ("", "fp8_e4m3")
    assert (declared.weight_format, declared.kv_cache_dtype) == ("awq-int4-g128", "auto")
    assert (plain.weight_format, plain.kv_cache_dtype) == ("", "auto")


def test_a_models_file_reads_like_models_json(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text('[{"name": "m", "preset": "qwen3-8b", "contextTokens": 8192}]')
    (entry,) = read_models_file(str(path))
    assert (entry.arch.name, entry.context_tokens) == ("m", 8192)


def test_a_models_file_too_large_or_missing_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(" " * (limits.MAX_MODELS_FILE_BYTES + 1))
    with pytest.raises(ModelsJsonError, match=f"more than {limits.MAX_MODELS_FILE_BYTES} bytes"):
        read_models_file(str(path))
    with pytest.raises(ModelsJsonError, match="No such file"):
        read_models_file(str(tmp_path / "absent.json"))
    path.write_text("[" * 100_000)
    with pytest.raises(ModelsJsonError, match="nested too deeply"):
        read_models_file(str(path))
