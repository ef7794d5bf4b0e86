"""The command line's flags as checked values: each bad value is one ``UsageError`` line."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from roofline_profiler.cli import arguments, commands
from roofline_profiler.core.errors import UsageError
from roofline_profiler.core.model_request import ModelsJsonError
from roofline_profiler.wire.result import ProfileResult, validate_document
from tests.profiler.synthetic import planned_result
from tests.tampering import json_values, tampered_documents


def profile_namespace(*argv: str) -> argparse.Namespace:
    return commands.build_parser().parse_args(["profile", *argv])


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("50ms", 0.05, id="ms"),
        pytest.param("0.05s", 0.05, id="s"),
        pytest.param("1s", 1.0, id="one-second"),
        pytest.param("250us", 250e-6, id="us"),
        pytest.param("250µs", 250e-6, id="micro-sign"),
        pytest.param(" 20 ms ", 0.02, id="spaces"),
        pytest.param("1e2ms", 0.1, id="exponent"),
        pytest.param("1s500ms", 1.5, id="compound-as-in-the-crd"),
    ],
)
def test_itl_slos_parse_with_their_unit(text: str, seconds: float) -> None:
    assert arguments.parse_itl_slo(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["50", "fast", "0ms", "-5ms", "5 min", ""])
def test_itl_slos_without_a_unit_or_not_positive_are_one_line_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match=r"^--itl-slo: (duration|cannot read)") as info:
        arguments.parse_itl_slo(text)
    assert "\n" not in str(info.value)


def test_contexts_are_sorted_without_repeats() -> None:
    assert arguments.parse_contexts("4096, 128,4096") == (128, 4096)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("abc", "--context: 'abc' is not an integer", id="not-a-number"),
        pytest.param("0", "--context: 0 is not a context length in 1..1048576", id="zero"),
        pytest.param("64,", "--context: '' is not an integer", id="trailing-comma"),
    ],
)
def test_a_bad_context_names_the_flag(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        arguments.parse_contexts(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("text", "upper", "message"),
    [
        pytest.param("abc", None, "--x 'abc' is not a number", id="not-a-number"),
        pytest.param("-1", None, "--x '-1' must be a number above 0", id="negative"),
        pytest.param("inf", None, "--x 'inf' must be a number above 0", id="infinite"),
        pytest.param("1.5", 1.0, "--x '1.5' must be a number in (0, 1]", id="above-the-bound"),
    ],
)
def test_a_number_outside_its_bounds_is_a_usage_error(
    text: str, upper: float | None, message: str
) -> None:
    with pytest.raises(UsageError) as info:
        arguments.positive_number(text, "--x", upper)
    assert str(info.value) == message


def test_a_tensor_parallel_degree_lies_within_the_limit() -> None:
    assert arguments.parse_tensor_parallel("8") == 8
    with pytest.raises(UsageError, match=r"^--tensor-parallel 65 must lie in 1\.\.64$"):
        arguments.parse_tensor_parallel("65")


def test_a_plot_must_be_named_png_and_every_output_directory_must_exist(tmp_path: Path) -> None:
    paths = arguments.output_paths(str(tmp_path / "r.json"), None, str(tmp_path / "p.PNG"))
    assert (paths.json, paths.markdown, paths.plot) == (
        tmp_path / "r.json",
        None,
        tmp_path / "p.PNG",
    )
    with pytest.raises(UsageError, match=r"name it \*\.png"):
        arguments.output_paths(None, None, str(tmp_path / "p.jpg"))
    with pytest.raises(UsageError, match="does not exist"):
        arguments.output_paths(None, str(tmp_path / "none" / "r.md"), None)
    with pytest.raises(UsageError, match="is a directory"):
        arguments.output_paths(None, None, None, str(tmp_path))


def test_the_profile_flags_become_one_model_group_per_model_request() -> None:
    args = arguments.profile_arguments(
        profile_namespace("--model", "qwen3-8b", "--context", "512,128", "--tensor-parallel", "2")
    )
    (group,) = args.model_groups
    assert [m.name for m in group.models] == ["qwen3-8b"]
    assert (group.contexts, group.tensor_parallel) == ((128, 512), 2)
    assert args.plan_options.gpu_memory_utilization == 0.9


def test_models_json_gives_a_group_per_tensor_parallel_degree_and_context() -> None:
    models = [
        {"name": "a", "preset": "qwen3-8b", "contextTokens": 1024},
        {"name": "b", "preset": "qwen3-8b", "contextTokens": 1024},
        {"name": "c", "preset": "qwen3-8b", "contextTokens": 2048, "tensorParallel": 2},
    ]
    args = arguments.profile_arguments(profile_namespace("--models-json", json.dumps(models)))
    assert [
        ([m.name for m in g.models], g.contexts, g.tensor_parallel) for g in args.model_groups
    ] == [
        (["a", "b"], (1024,), 1),
        (["c"], (2048,), 2),
    ]


def test_a_models_json_error_is_a_usage_error() -> None:
    with pytest.raises(ModelsJsonError) as info:
        arguments.profile_arguments(profile_namespace("--models-json", "[]"))
    assert isinstance(info.value, UsageError)


def test_a_model_is_checked_before_the_models_json_it_contradicts() -> None:
    namespace = profile_namespace("--models-json", "[", "--model", "gpt-9")
    with pytest.raises(UsageError, match=r"^--model gpt-9: "):
        arguments.profile_arguments(namespace)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ("--model", "qwen3-30b-a3b", "--weight-format", "awq-int4"),
            "--weight-format: --model qwen3-30b-a3b is a mixture of experts, whose quantized "
            "experts the plan does not time",
            id="moe",
        ),
        pytest.param(
            ("--model", "qwen3-8b", "--weight-format", "awq-int4-g100"),
            "--weight-format: group size 100 is not one of 32, 64, 128, 256",
            id="odd-group",
        ),
        pytest.param(
            ("--weight-format", "awq-int3"),
            "--weight-format: 'awq-int3' is not a weight format (awq-int4, gptq-int4, gptq-int8, "
            "int8-w8a8, fp8-w8a8)",
            id="unknown-format-without-a-model",
        ),
        pytest.param(
            ("--weight-format", "int8-w8a8", "--dtype", "float32"),
            "--dtype float32: int8-w8a8 has quantized weights, which the engines serve with "
            "16-bit activations (--dtype bfloat16 or float16)",
            id="float32-without-a-model",
        ),
        pytest.param(
            ("--model", "qwen3-8b", "--kv-cache-dtype", "fp16"),
            "argument --kv-cache-dtype: invalid choice: 'fp16' (choose from 'auto', 'fp8', "
            "'fp8_e4m3', 'fp8_e5m2')",
            id="cache-fp16-named-by-argparse",
        ),
    ],
)
def test_a_model_that_cannot_be_served_as_the_flags_say_is_one_usage_error_naming_them(
    argv: tuple[str, ...], message: str
) -> None:
    with pytest.raises(UsageError) as info:
        arguments.profile_arguments(profile_namespace(*argv))
    assert str(info.value) == message


def test_the_flags_serve_the_model_in_their_format_and_cache_dtype() -> None:
    args = arguments.profile_arguments(
        profile_namespace("--model", "qwen3-8b", "--weight-format", "gptq-int8-g64-asym",
                          "--kv-cache-dtype", "fp8")
    )  # fmt: skip
    ((arch,),) = (group.models for group in args.model_groups)
    assert (arch.weight_format, arch.kv_cache_dtype) == ("gptq-int8-g64-asym", "fp8")


def test_a_weight_format_without_a_model_is_profiled_on_its_own() -> None:
    args = arguments.profile_arguments(profile_namespace("--weight-format", "awq-int4"))
    assert args.model_groups == ()
    assert [f.name for f in args.weight_formats] == ["awq-int4-g128"]


def test_the_flag_and_each_quantized_model_add_their_format_once() -> None:
    models = [
        {"name": "a", "preset": "qwen3-8b", "weightFormat": "int8-w8a8"},
        {"name": "b", "preset": "qwen3-8b", "weightFormat": "awq-int4-g128"},
        {"name": "c", "preset": "qwen3-8b"},
    ]
    args = arguments.profile_arguments(
        profile_namespace("--weight-format", "awq-int4", "--models-json", json.dumps(models))
    )
    assert [f.name for f in args.weight_formats] == ["awq-int4-g128", "int8-w8a8"]


def test_a_profile_without_a_quantized_model_measures_no_format() -> None:
    args = arguments.profile_arguments(profile_namespace("--model", "qwen3-8b"))
    assert args.weight_formats == ()


def test_a_flag_type_turns_a_limit_error_into_argparses_message() -> None:
    with pytest.raises(UsageError, match=r"^argument --shape: '4096' is not of the form KxN"):
        profile_namespace("--shape", "4096")
    assert profile_namespace("--dtype", "bf16").dtype == "bfloat16"


#: A saved result of two model plans, as ``roofline profile --json`` writes it.
SAVED_RESULT = planned_result().to_dict()


def read_as_plan_would(folder: Path, text: str) -> ProfileResult | None:
    """``--from`` a file of ``text``: the result it reads, or ``None`` after one usage error."""
    path = folder / "result.json"
    path.write_text(text, encoding="utf-8")
    try:
        return arguments.read_result(path)
    except UsageError as exc:
        (line,) = str(exc).splitlines()
        assert line.startswith(f"--from {path}: ")
        return None


def test_a_saved_result_reads_back_as_it_was_written(tmp_path: Path) -> None:
    assert read_as_plan_would(tmp_path, json.dumps(SAVED_RESULT)) == planned_result()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(json.dumps({**SAVED_RESULT, "mode": 7}), "mode: ", id="wrong-type"),
        pytest.param(
            json.dumps({**SAVED_RESULT, "durationSeconds": math.nan}),
            "not a JSON result document",
            id="nan",
        ),
        pytest.param(
            json.dumps(SAVED_RESULT).replace(
                '"samplesSeconds": [', '"samplesSeconds": [' + "1" * 400 + ", ", 1
            ),
            "samplesSeconds/0: a number out of range",
            id="a-sample-beyond-a-float",
        ),
    ],
)
def test_a_saved_result_that_breaks_the_schema_is_one_usage_error_naming_where(
    tmp_path: Path, text: str, reason: str
) -> None:
    path = tmp_path / "result.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=reason):
        arguments.read_result(path)


def _saved_with(kind: str, key: str, value: object) -> str:
    """:data:`SAVED_RESULT` with a field of the read bandwidth's measurement replaced."""
    device = {**SAVED_RESULT["devices"][0]}
    bandwidth = {**device["bandwidth"], "read": {**device["bandwidth"][kind], key: value}}
    return json.dumps({**SAVED_RESULT, "devices": [{**device, "bandwidth": bandwidth}]})


# What the fuzz profile found here: an integer of 401 digits where a float is read
# (``OverflowError`` in ``Measurement``), and finite numbers whose rates overflow to infinity
# (``to_dict`` then refused to write them).
@given(text=st.one_of(tampered_documents(SAVED_RESULT), json_values.map(json.dumps)))
@example(text=_saved_with("read", "samplesSeconds", [10**400]))
@example(text=_saved_with("read", "bytes", 1.7e308))
@example(text=_saved_with("read", "samplesSeconds", [5e-324] * 16))
def test_any_saved_result_reads_as_a_valid_result_or_one_usage_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """A file from elsewhere may hold anything: ``roofline plan --from`` reads a result the
    published schema accepts, or refuses the file in one line, never a traceback."""
    result = read_as_plan_would(tmp_path_factory.mktemp("saved"), text)
    if result is not None:
        document = json.loads(json.dumps(result.to_dict(), allow_nan=False))
        validate_document(document)
        assert ProfileResult.from_dict(document) == result
