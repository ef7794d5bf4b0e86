import json
from pathlib import Path

import pytest

from roofline_profiler.core import limits
from roofline_profiler.core.model_request import (
    ModelsJsonError,
    parse_models_json,
    read_models_file,
    request_groups,
)
from tests.model_configs import TINY_LLAMA as TINY


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
