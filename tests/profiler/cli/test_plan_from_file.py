"""``roofline plan --from FILE`` on any file: a valid re-planned result, or exit 2 with one line.

The saved result here carries a model's measured decode-step parts, so the whole re-plan runs:
the file is read into bounded values (``saved_result.py``), planned, and every derived number is
checked before anything is written.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from roofline_profiler.cli.commands import main
from roofline_profiler.wire.result import ProfileResult, validate_document
from tests.profiler.synthetic import measured_result
from tests.tampering import json_values, tampered_documents

#: A result as ``roofline profile --model llama-3.1-8b --json`` saves it.
MEASURED = measured_result().to_dict()
#: The same as a CPU profile saves it, each layer's glue timed alone: re-planned for vLLM's CPU
#: build, which replaces the glue with its own per-layer work.
MEASURED_CPU = copy.deepcopy(MEASURED)
MEASURED_CPU["devices"][0]["backend"] = "cpu"
MEASURED_CPU["devices"][0]["modelMeasurements"][0]["layerGlue"] = {
    "dense": [
        {"batch": t["batch"], "seconds": 3e-5, "measurement": None}
        for t in MEASURED["devices"][0]["modelMeasurements"][0]["layerBodies"]["dense"]
    ]
}
GLUE = ("devices", 0, "modelMeasurements", 0, "layerGlue", "dense")
MODEL = "llama-3.1-8b"


def replaced(path: tuple[Any, ...], value: Any, base: dict[str, Any] | None = None) -> str:
    """``base`` (:data:`MEASURED`) as JSON text with the value at ``path`` replaced."""
    document = copy.deepcopy(MEASURED if base is None else base)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(document)


def run_plan(*argv: str) -> tuple[int, str]:
    """``roofline plan ...`` in this process: its exit status and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["plan", *argv])
    return status, err.getvalue()


def plan_from(folder: Path, text: str) -> dict[str, Any] | None:
    """Run ``roofline plan`` on a file of ``text``: the document it wrote (valid against the
    schema, every number finite), or ``None`` after one usage error that wrote nothing."""
    source, out = folder / "saved.json", folder / "planned.json"
    source.write_text(text, encoding="utf-8")
    status, err = run_plan("--from", str(source), "--model", MODEL, "--json", str(out))
    if status == 2:
        (line,) = err.splitlines()
        assert line.startswith("roofline: error: "), line
        assert f"--from {source}: " in line or f"{source.name} has no measurements" in line, line
        assert not out.exists()
        return None
    assert status == 0, err
    document: dict[str, Any] = json.loads(
        out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the plan")
    )
    validate_document(document)
    assert ProfileResult.from_dict(document).devices[0].models
    return document


def test_the_saved_result_re_plans(tmp_path: Path) -> None:
    document = plan_from(tmp_path, json.dumps(MEASURED))
    assert document is not None
    contexts = [p["contextTokens"] for p in document["devices"][0]["models"]]
    assert contexts == [1024, 4096]


#: Part of the model's measurements, for the cases below.
HEAD = ("devices", 0, "modelMeasurements", 0, "head")
ATTENTION = ("devices", 0, "modelMeasurements", 0, "attention")
READ = ("devices", 0, "bandwidth", "read")


def _nested(depth: int) -> str:
    """:data:`MEASURED` with ``depth`` levels of arrays in its free ``telemetry``."""
    text = replaced(("devices", 0, "telemetry"), {"deep": "HERE"})
    return text.replace('"HERE"', "[" * depth + "]" * depth)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(
            replaced((*HEAD, 0, "seconds"), 0), "field 'seconds' = 0 is outside", id="step-0s"
        ),
        pytest.param(
            replaced((*ATTENTION, 2, "batch"), 10**9),
            "field 'batch' = 1000000000 is outside",
            id="batch-10^9",
        ),
        pytest.param(_nested(100_000), "nested over 64 deep", id="nested-100000"),
        pytest.param(
            replaced((*READ, "samplesSeconds", 0), 10**400),
            "samplesSeconds/0: a number out of range",
            id="huge-integer-as-a-float",
        ),
        pytest.param(
            replaced((*READ, "bytes"), 1e308), "bytes: a number out of range", id="huge-float"
        ),
        pytest.param(
            replaced((*READ, "samplesSeconds"), [1e-300] * 16),
            "a number derived from it is out of range",
            id="rate-overflows",
        ),
        pytest.param(
            replaced(("devices", 0, "memoryBytes"), 2**52),
            "field 'memoryBytes' = an integer of 16 digits is outside",
            id="memory-of-4-PiB",
        ),
        pytest.param(
            replaced((*HEAD, 0, "batch"), 3),
            "its measurements cannot be planned (the dense layer was not measured at batch 3)",
            id="parts-at-other-batches",
        ),
        pytest.param("[" * 5000 + "]" * 5000, "nested over 64 deep", id="nested-list"),
        pytest.param("1" * 5000, "an integer of 5000 digits", id="long-integer"),
    ],
)
def test_a_schema_valid_file_the_maths_cannot_use_is_one_usage_error(
    tmp_path: Path, text: str, reason: str
) -> None:
    """These ended in exit 1 with a traceback's last line (``ZeroDivisionError``,
    ``MissingMeasurement``, ``RecursionError``, ``OverflowError``) or wrote a plan holding
    ``Infinity`` or batches of 10²¹."""
    source = tmp_path / "saved.json"
    source.write_text(text, encoding="utf-8")
    status, err = run_plan("--from", str(source), "--model", MODEL)
    (line,) = err.splitlines()
    assert status == 2, line
    assert reason in line


@given(text=st.one_of(tampered_documents(MEASURED), json_values.map(json.dumps)))
@example(text=replaced((*READ, "samplesSeconds", 0), 10**400))
@example(text=replaced((*READ, "bytes"), 1.7e308))
@example(text=replaced((*READ, "samplesSeconds"), [5e-324] * 16))
@example(text=replaced((*HEAD, 1, "seconds"), 0.0))
@example(text=replaced((*HEAD, 1, "batch"), 10**9))
@example(text=replaced(("devices", 0, "peakFlopsPerSecond"), 1e300))
# Found by make fuzz: a measured model whose architecture the schema lets be anything is not
# the requested one: the usage error that says what to re-profile, naming the file by its name.
@example(text=replaced(("devices", 0, "modelMeasurements", 0, "architecture", "modelType"), 0.0))
def test_roofline_plan_from_any_file_writes_a_valid_plan_or_exits_2(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    plan_from(tmp_path_factory.mktemp("plan"), text)


def test_a_model_config_with_an_integer_of_5000_digits_is_one_usage_error(tmp_path: Path) -> None:
    """Python's ``json`` refuses such an integer with a bare ``ValueError``: it exited 1."""
    config = tmp_path / "long.json"
    config.write_text('{"model_type": "llama", "vocab_size": ' + "9" * 5000 + "}")
    source = tmp_path / "saved.json"
    source.write_text(json.dumps(MEASURED))
    status, err = run_plan("--from", str(source), "--model", str(config))
    assert status == 2
    (line,) = err.splitlines()
    assert line == (
        f"roofline: error: --model {config}: long.json: not valid JSON (an integer of 5000 digits)"
    )


def test_a_saved_cpu_profile_with_its_glue_is_re_planned_for_the_engine_that_fuses_it(
    tmp_path: Path,
) -> None:
    document = plan_from(tmp_path, json.dumps(MEASURED_CPU))
    assert document is not None
    engines = {plan["engine"]["glue"] for plan in document["devices"][0]["models"]}
    assert engines == {"fused"}


@given(text=tampered_documents(MEASURED_CPU))
@example(text=replaced((*GLUE, 0, "seconds"), 1e308, MEASURED_CPU))
@example(text=replaced((*GLUE, 0, "seconds"), -1.0, MEASURED_CPU))
@example(text=replaced((*GLUE, 1, "batch"), 10**9, MEASURED_CPU))
@example(text=replaced(GLUE, [], MEASURED_CPU))
@example(text=replaced(GLUE[:-1], {"moe": []}, MEASURED_CPU))
@example(text=replaced(("environment", "driver"), {"\r": 1000000000000000065537}, MEASURED_CPU))
def test_roofline_plan_from_a_cpu_file_with_tampered_glue_writes_a_valid_plan_or_exits_2(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    plan_from(tmp_path_factory.mktemp("plan"), text)
