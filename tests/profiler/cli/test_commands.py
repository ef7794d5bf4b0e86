"""The ``roofline profile`` command as a user runs it: a real process on this machine's CPU."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from roofline_profiler.wire.compact import MAX_COMPACT_BYTES
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.result import ProfileResult, validate_document
from tests.profiler.cli_process import assert_refused, run_cli


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("profile")
    proc = run_cli(
        "profile",
        "--quick",
        "--device",
        "cpu",
        "--json",
        str(out / "result.json"),
        "--markdown",
        str(out / "report.md"),
        "--plot",
        str(out / "roofline.png"),
        "--compact",
        str(out / "termination-log"),
    )
    return proc, out


def test_quick_profile_of_this_cpu_succeeds_and_prints_a_summary(quick_run) -> None:  # type: ignore[no-untyped-def]
    proc, _ = quick_run
    assert proc.returncode == 0, proc.stderr
    assert "ridge point" in proc.stdout
    assert "recommended min batch" in proc.stdout
    swept = [int(m) for m in re.findall(r"^\s+(\d+)\s+[\d.]+ [mµ]?s\s", proc.stdout, re.MULTILINE)]
    assert swept == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def test_the_json_result_is_valid_against_the_schema_and_self_consistent(quick_run) -> None:  # type: ignore[no-untyped-def]
    _, out = quick_run
    document = json.loads((out / "result.json").read_text())
    validate_document(document)
    result = ProfileResult.from_dict(document)
    (device,) = result.devices
    assert device.backend == "cpu"
    assert device.dtype == "float32"
    assert device.ridge_point == pytest.approx(
        device.peak_flops_per_second / device.bandwidth_bytes_per_second
    )
    assert [e.point.batch for e in device.sweep] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert all(e.measurement.repeats >= 3 for e in device.sweep)
    assert device.recommended_min_batch >= 1
    assert document["environment"]["torch"]


def test_the_compact_result_fits_a_termination_message_and_matches_the_json(quick_run) -> None:  # type: ignore[no-untyped-def]
    _, out = quick_run
    text = (out / "termination-log").read_text()
    assert len(text.encode()) <= MAX_COMPACT_BYTES
    compact = decode_compact(text)
    full = json.loads((out / "result.json").read_text())["devices"][0]
    assert compact.devices[0].recommended_min_batch == full["recommendedMinBatch"]
    assert compact.devices[0].ridge_point == pytest.approx(full["ridgePoint"], rel=1e-3)


def test_the_plot_and_markdown_report_are_written(quick_run) -> None:  # type: ignore[no-untyped-def]
    _, out = quick_run
    assert (out / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert report.startswith("# Decode roofline profile")
    assert "| 512 |" in report


def test_a_small_custom_shape_and_batch_list_are_honoured(tmp_path: Path) -> None:
    proc = run_cli(
        "profile",
        "--quick",
        "--device",
        "cpu",
        "--shape",
        "512x1024",
        "--batches",
        "4,1,2",
        "--dtype",
        "bfloat16",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert proc.returncode == 0, proc.stderr
    device = json.loads((tmp_path / "r.json").read_text())["devices"][0]
    assert device["dtype"] == "bfloat16"
    assert [p["batch"] for p in device["sweep"]] == [1, 2, 4]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--dtype", "int4"], "unknown dtype 'int4'", id="unknown-dtype"),
        pytest.param(["--batches", "1,0,4"], "0 is not a batch size", id="zero-batch"),
        pytest.param(["--batches", "1,-2"], "-2 is not a batch size", id="negative-batch"),
        pytest.param(["--batches", "1,two"], "'two' is not an integer", id="batch-not-a-number"),
        pytest.param(["--batches", ""], "comma-separated list", id="empty-batches"),
        pytest.param(["--shape", "4096"], "not of the form KxN", id="shape-without-n"),
        pytest.param(["--shape", "0x14336"], "K and N must lie", id="zero-dimension"),
        pytest.param(["--device", "cuda:0"], "not available", id="missing-gpu"),
        pytest.param(["--device", "tpu"], "unknown device 'tpu'", id="unknown-device"),
        pytest.param(["--frobnicate"], "unrecognized arguments: --frobnicate", id="unknown-flag"),
        pytest.param(["--plot", "roofline.jpg"], "PNG", id="plot-not-png"),
        pytest.param(
            ["--json", "missing-dir/result.json"], "does not exist", id="missing-output-dir"
        ),
        pytest.param(["--min-batch-efficiency", "0"], "must lie in 1..100", id="zero-efficiency"),
        pytest.param(["--bandwidth", "write"], "invalid choice", id="unknown-bandwidth-kind"),
        pytest.param(["--models-json", "[{"], "not JSON", id="models-json-not-json"),
        pytest.param(
            ["--models-json", '[{"name": "m", "preset": "gpt-9"}]'],
            "--models-json[0].preset 'gpt-9' is unknown",
            id="models-json-unknown-preset",
        ),
        pytest.param(
            ["--models-json", '[{"name": "m", "preset": "qwen3-8b"}]', "--model", "qwen3-8b"],
            "drop --model",
            id="models-json-with-model",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = run_cli("profile", "--quick", "--compact", "termination-log", *args, cwd=tmp_path)
    assert_refused(proc, message)
    assert list(tmp_path.iterdir()) == []


def test_no_subcommand_is_bad_input() -> None:
    proc = run_cli()
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_weight_over_2_to_the_30_elements_is_bad_input() -> None:
    proc = run_cli("profile", "--quick", "--device", "cpu", "--shape", "524288x524288")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "K*N must be at most 2^30 elements" in line


def test_a_device_that_runs_out_of_memory_exits_1_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from roofline_profiler.cli import commands
    from roofline_profiler.measure import runner

    def out_of_memory(*_: object) -> None:
        raise torch.OutOfMemoryError("CPU out of memory: tried to allocate 1024.00 GiB")

    monkeypatch.setattr(runner, "profile_device", out_of_memory)
    log = tmp_path / "termination-log"
    argv = ["profile", "--quick", "--device", "cpu", "--batches", "1", "--compact", str(log)]
    code = commands.main([*argv, "--json", str(tmp_path / "r.json")])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("roofline: device failure: cpu")
    assert "allocate" in line
    assert log.read_text() == line
    assert not (tmp_path / "r.json").exists()
