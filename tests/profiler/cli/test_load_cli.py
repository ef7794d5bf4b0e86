"""``roofline profile --model`` and ``roofline plan`` under load: the workload flags, the plan under
load in the result, the reports, and bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from roofline_profiler.wire.result import validate_document
from tests.model_configs import TINY_LLAMA_128
from tests.profiler.cli_process import assert_refused, run_cli

TINY = TINY_LLAMA_128
RATES = ",".join(str(r) for r in range(1, 18))


@pytest.fixture(scope="module")
def profiled(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("load")
    (out / "tiny.json").write_text(json.dumps(TINY))
    proc = run_cli(
        "profile", "--quick", "--device", "cpu", "--batches", "1,2,4",
        "--model", str(out / "tiny.json"), "--context", "512",
        "--prompt-tokens", "128", "--output-tokens", "16", "--request-rate", "1,5000",
        "--ttft-slo", "1s", "--itl-slo", "500ms", "--max-num-batched-tokens", "256",
        "--json", str(out / "result.json"), "--markdown", str(out / "report.md"),
    )  # fmt: skip
    return proc, out


def test_a_profile_with_a_workload_plans_the_model_under_load(profiled) -> None:  # type: ignore[no-untyped-def]
    proc, out = profiled
    assert proc.returncode == 0, proc.stderr
    document = json.loads((out / "result.json").read_text())
    validate_document(document)
    (device,) = document["devices"]
    (measured,) = device["modelMeasurements"]
    prefill = measured["prefill"]
    assert [t["tokens"] for t in prefill["layerBodies"]["dense"]] == [64, 256]
    assert prefill["attentionSource"] == "roofline"
    (load,) = device["loads"]
    assert (load["promptTokens"], load["outputTokens"]) == (128, 16)
    assert load["maxNumBatchedTokens"] == 256
    assert [p["promptTokens"] for p in load["ttftLadder"]] == [128, 256, 512]
    ladder = [p["ttftSeconds"] for p in load["ttftLadder"]]
    assert ladder == sorted(ladder)
    slow, fast = load["rates"]
    assert slow["requestsPerSecond"] == 1.0
    assert not slow["saturated"]
    assert fast["saturated"]
    assert fast["ttftMedianSeconds"] > slow["ttftMedianSeconds"]
    assert load["maxRequestRate"]["limitedBy"] in ("ttft", "itl", "saturation")
    assert 1.0 < load["maxRequestRate"]["requestsPerSecond"] < 5000


def test_the_summary_and_report_show_the_plan_under_load(profiled) -> None:  # type: ignore[no-untyped-def]
    proc, out = profiled
    assert "model tiny under load (prompt 128, output 16 tokens" in proc.stdout
    assert "max request rate" in proc.stdout
    report = (out / "report.md").read_text()
    assert "| prompt tokens | TTFT alone |" in report
    assert "Maximum request rate:" in report


def test_plan_replans_under_another_workload_without_the_device(profiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, out = profiled
    proc = run_cli(
        "plan", "--from", str(out / "result.json"), "--model", str(out / "tiny.json"),
        "--prompt-tokens", "400", "--output-tokens", "8", "--request-rate", "2",
        "--json", str(tmp_path / "plan.json"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (load,) = json.loads((tmp_path / "plan.json").read_text())["devices"][0]["loads"]
    assert load["promptTokens"] == 400
    assert 400 in [p["promptTokens"] for p in load["ttftLadder"]]
    # The engine's default budget on a CPU unless asked for another.
    assert load["maxNumBatchedTokens"] == 2048
    assert load["maxRequestRate"]["limitedBy"] == "saturation"


def test_without_a_workload_the_plan_under_load_is_the_ttft_ladder(
    profiled, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _, out = profiled
    proc = run_cli(
        "plan", "--from", str(out / "result.json"), "--model", str(out / "tiny.json"),
        "--json", str(tmp_path / "plan.json"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (load,) = json.loads((tmp_path / "plan.json").read_text())["devices"][0]["loads"]
    assert load["promptTokens"] is None
    assert load["rates"] == []
    assert load["maxRequestRate"] is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(["--prompt-tokens", "128"], "give both", id="half-a-workload"),
        pytest.param(["--request-rate", "2"], "need a workload", id="rate-without-workload"),
        pytest.param(["--ttft-slo", "1s"], "need a workload", id="ttft-without-workload"),
        pytest.param(
            ["--prompt-tokens", "0", "--output-tokens", "4"], "--prompt-tokens", id="no-prompt"
        ),
        pytest.param(
            ["--prompt-tokens", "8", "--output-tokens", "x"], "--output-tokens", id="not-int"
        ),
        pytest.param(
            ["--prompt-tokens", "8", "--output-tokens", "4", "--request-rate", "0"],
            "--request-rate",
            id="zero-rate",
        ),
        pytest.param(
            ["--prompt-tokens", "8", "--output-tokens", "4", "--request-rate", "nan"],
            "--request-rate",
            id="nan-rate",
        ),
        pytest.param(
            [
                "--prompt-tokens",
                "8",
                "--output-tokens",
                "4",
                "--request-rate",
                RATES,
            ],
            "at most 16",
            id="too-many-rates",
        ),
        pytest.param(
            ["--prompt-tokens", "8", "--output-tokens", "4", "--ttft-slo", "soon"],
            "--ttft-slo",
            id="bad-ttft",
        ),
        pytest.param(["--max-num-batched-tokens", "0"], "--max-num-batched-tokens", id="budget"),
        pytest.param(["--max-num-seqs", "99999999"], "--max-num-seqs", id="seqs"),
    ],
)
def test_bad_load_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "result.json"
    proc = run_cli(
        "profile", "--device", "cpu", "--quick", "--model", "qwen3-8b", *extra, "--json", str(out)
    )
    assert_refused(proc, message)
    assert not out.exists()
