"""``roofline export`` as a user runs it: every target from both sources against its golden file,
and every bad input refused with one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from roofline_cli import main
from roofline_cli.export.command import TARGETS
from tests.cli.export_sources import MODEL, status_profile, write_result, write_status
from tests.golden import check_golden

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
#: What each target needs beside a source.
EXTRA = {"kueue": ["--tokens-per-second", "40000"], "engine-args": []}


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sources")
    return {"result": write_result(folder), "status": write_status(folder)}


def export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["export", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = export(capsys, *argv)
    assert code == 2, err
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("roofline: error: ")
    return line


@pytest.mark.parametrize("source", ["result", "status"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_every_target_matches_its_golden_file(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], target: str, source: str
) -> None:
    code, out, err = export(
        capsys, "--target", target, "--from", str(sources[source]), *EXTRA.get(target, [])
    )
    assert (code, err) == (0, "")
    check_golden(GOLDEN / f"export-{target}-{source}.yaml", out, "tests/cli/export/test_command.py")
    documents = [d for d in yaml.safe_load_all(out) if d is not None]
    assert documents
    if target == "gateway":  # Helm values of the picker's chart, not an object
        assert [set(d) for d in documents] == [{"inferencePool", "inferenceExtension"}]
    else:
        assert all("kind" in d for d in documents)


def test_the_engine_args_patch_is_a_json_patch_of_the_containers_args(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path]
) -> None:
    code, out, _ = export(
        capsys, "--target", "engine-args", "--form", "patch", "--engine", "sglang",
        "--container-index", "1", "--from", str(sources["status"]),
    )  # fmt: skip
    assert code == 0
    ops = yaml.safe_load(out)
    assert {op["path"] for op in ops} == {"/spec/template/spec/containers/1/args/-"}
    # The L40S class has the smaller batch (24): the patch holds on both classes.
    assert [op["value"] for op in ops] == ["--max-running-requests=24", "--context-length=8192"]


def test_a_class_can_be_chosen(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path]
) -> None:
    code, out, _ = export(
        capsys, "--target", "keda", "--from", str(sources["status"]),
        "--class", "NVIDIA H100 80GB HBM3",
    )  # fmt: skip
    assert code == 0
    (scaled,) = yaml.safe_load_all(out)
    # The H100 class's SLO batch, 104, below the HPA's 10% tolerance: ⌊104 ÷ 1.1⌋.
    assert scaled["spec"]["triggers"][0]["metadata"]["threshold"] == "94"


def test_the_output_goes_to_a_file(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], tmp_path: Path
) -> None:
    target = tmp_path / "wva.yaml"
    code, out, _ = export(
        capsys, "--target", "wva", "--from", str(sources["status"]), "--output", str(target)
    )
    assert (code, out) == (0, "")
    kinds = [d["kind"] for d in yaml.safe_load_all(target.read_text())]
    assert kinds == ["ConfigMap", "VariantAutoscaling", "HorizontalPodAutoscaler"]


def test_a_status_reads_from_stdin_and_as_yaml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(yaml.safe_dump(status_profile())))
    code, out, _ = export(capsys, "--target", "itl-configmap", "--from", "-")
    assert code == 0
    assert "perSequenceContextTokenSeconds" in out


def _broken_status(change: Any) -> dict[str, Any]:
    document = status_profile()
    change(document)
    return document


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        pytest.param(["--target", "frob"], "invalid choice: 'frob'", id="unknown-target"),
        pytest.param(["--target", "keda"], "one of the arguments --from --profile", id="no-source"),
        pytest.param(["--target", "keda", "--engine", "tgi"], "vLLM's or SGLang's", id="keda-tgi"),
        pytest.param(["--target", "keda", "--model", "mistral"], "--model 'mistral'", id="model"),
        pytest.param(
            ["--target", "keda", "--class", "NVIDIA B200"], "--class 'NVIDIA B200'", id="class"
        ),
        pytest.param(["--target", "kueue"], "needs --tokens-per-second", id="kueue-no-demand"),
        pytest.param(["--target", "kueue", "--tokens-per-second", "-5"], "positive", id="negative"),
        pytest.param(
            ["--target", "kueue", "--tokens-per-second", "1", "--utilization", "2"],
            "(0, 1]",
            id="utilization",
        ),
        pytest.param(
            ["--target", "kueue", "--tokens-per-second", "1", "--resource", "cpu"],
            "not an accelerator's extended resource",
            id="kueue-cpu-resource",
        ),
        pytest.param(
            ["--target", "kueue", "--tokens-per-second", "1", "--memory-per-replica", "lots"],
            "not a quantity",
            id="kueue-memory",
        ),
        pytest.param(
            ["--target", "kueue", "--tokens-per-second", "1", "--cpu-per-replica", "0"],
            "must be positive",
            id="kueue-cpu",
        ),
        pytest.param(
            ["--target", "keda", "--min-replicas", "5", "--max-replicas", "2"],
            "exceeds",
            id="replicas",
        ),
        pytest.param(
            ["--target", "keda", "--authentication-ref", "Secret/prom"],
            "'Secret' is not one of",
            id="keda-auth-kind",
        ),
        pytest.param(
            ["--target", "keda", "--auth-modes", "bearer"],
            "needs --authentication-ref",
            id="keda-modes-alone",
        ),
        pytest.param(
            ["--target", "keda", "--authentication-ref", "p", "--auth-modes", "token"],
            "'token' is not one of",
            id="keda-auth-mode",
        ),
        pytest.param(["--target", "gateway", "--target-port", "70000"], "not a port", id="port"),
        pytest.param(["--target", "gateway", "--engine", "tgi"], "not tgi's", id="gateway-tgi"),
        pytest.param(
            ["--target", "gateway", "--failure-mode", "Open"], "invalid choice", id="failure-mode"
        ),
        pytest.param(["--target", "gateway", "--pool-selector", "app"], "KEY=VALUE", id="selector"),
        pytest.param(
            ["--target", "keda", "--output", "/nonexistent/dir/x.yaml"],
            "does not exist",
            id="output",
        ),
        pytest.param(
            ["--target", "engine-args", "--container-index", "x"], "not an integer", id="index"
        ),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], argv: list[str], reason: str
) -> None:
    source = [] if reason.startswith("one of the arguments") else ["--from", str(sources["status"])]
    assert reason in refused(capsys, *argv, *source)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param("{not json", "neither JSON nor YAML", id="garbage"),
        pytest.param("[1, 2]", "not a RooflineProfile", id="a-list"),
        pytest.param(json.dumps({"kind": "Pod"}), "not a RooflineProfile", id="another-kind"),
        pytest.param(
            json.dumps({"kind": "RooflineProfile", "metadata": {"name": "p"}, "status": {}}),
            "no planned model",
            id="no-profiled-node",
        ),
        pytest.param(
            json.dumps({"kind": "RooflineResult", "schemaVersion": 3}),
            "not a roofline result",
            id="broken-result",
        ),
        pytest.param(
            json.dumps(
                _broken_status(lambda d: d["status"]["models"][0]["classes"][0].update(maxBatch=-1))
            ),
            "maxBatch",
            id="negative-batch",
        ),
        pytest.param(
            json.dumps(
                _broken_status(
                    lambda d: d["status"]["models"][0]["classes"][1].update(
                        itlPerSequenceSeconds="fast"
                    )
                )
            ),
            "itlPerSequenceSeconds",
            id="itl-not-a-number",
        ),
        pytest.param(
            json.dumps(_broken_status(lambda d: d["status"]["models"].__setitem__(0, 7))),
            "status.models[0] is not an object",
            id="model-not-an-object",
        ),
    ],
)
def test_a_bad_source_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, reason: str
) -> None:
    path = tmp_path / "source.json"
    path.write_text(content)
    line = refused(capsys, "--target", "wva", "--from", str(path))
    assert reason in line


def test_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    line = refused(capsys, "--target", "wva", "--from", str(tmp_path / "absent.json"))
    assert "cannot read it" in line


def test_a_plan_that_gives_no_threshold_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def no_room(document: dict[str, Any]) -> None:
        for item in document["status"]["models"][0]["classes"]:
            item.update(maxBatch=0, maxBatchByMemory=0)

    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_broken_status(no_room)))
    line = refused(capsys, "--target", "gateway", "--from", str(path))
    assert "no sequence of 8192 tokens fits" in line


def test_a_result_without_itl_models_has_no_itl_configmap(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], tmp_path: Path
) -> None:
    document = json.loads(sources["result"].read_text())
    for plan in document["devices"][0]["models"]:
        plan["itlModel"] = None
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    line = refused(capsys, "--target", "itl-configmap", "--from", str(path))
    assert "no ITL model" in line


def test_the_patch_form_patches_one_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = status_profile()
    second = json.loads(json.dumps(document["status"]["models"][0]))
    second["name"] = "qwen3-8b"
    document["status"]["models"].append(second)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(document))
    line = refused(capsys, "--target", "engine-args", "--form", "patch", "--from", str(path))
    assert "pick one with --model" in line
    assert export(capsys, "--target", "engine-args", "--form", "patch", "--from", str(path),
                  "--model", "qwen3-8b")[0] == 0  # fmt: skip


def test_help_names_every_target_and_the_defaults() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "roofline_cli", "export", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for target in TARGETS:
        assert target in text
    for default in ("default vllm", "default 0.75", "default nvidia.com/gpu", "default 9002"):
        assert default in text


def test_a_bad_input_never_prints_a_traceback_in_a_process_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("[]")
    done = subprocess.run(
        [sys.executable, "-m", "roofline_cli", "export", "--target", "keda", "--from", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("roofline: error: --from")


def test_the_model_of_the_status_is_the_one_exported(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path]
) -> None:
    code, out, _ = export(capsys, "--target", "keda", "--from", str(sources["status"]))
    assert code == 0
    assert f'model_name=\\"{MODEL}\\"' in out
