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
from hypothesis import event, given
from hypothesis import strategies as st

from roofline_cli import main
from roofline_cli.export.command import TARGETS
from tests.cli.export_sources import (
    MODEL,
    hostile_text,
    replaced,
    status_profile,
    string_paths,
    write_result,
    write_status,
)
from tests.golden import check_golden
from tests.tampering import tampered_documents

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
        pytest.param(
            ["--target", "keda", "--max-replicas", "9" * 4000], "4000 digits", id="replicas-huge"
        ),
        pytest.param(
            ["--target", "engine-args", "--container-index", str(2**31)], "1..", id="index-huge"
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


# Trust boundaries: what export reads is parsed once into bounded values, and what it writes
# reads back exactly as built.

#: Each separator, control or bidi character, named for the test ids.
UNSAFE = {
    "line-feed": "\n", "carriage-return": "\r", "next-line": "\x85", "line-separator": "\u2028",
    "paragraph-separator": "\u2029", "nul": "\x00", "escape": "\x1b", "bidi-override": "\u202e",
    "zero-width-space": "\u200b", "byte-order-mark": "\ufeff", "delete": "\x7f", "tab": "\t",
}  # fmt: skip


def _written(path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of an export to ``path`` that must write nothing."""
    output = path.parent / "out.yaml"
    line = refused(capsys, *argv, "--output", str(output))
    assert not output.exists()
    return line


@pytest.mark.parametrize("char", list(UNSAFE.values()), ids=list(UNSAFE))
@pytest.mark.parametrize(
    "field",
    [
        pytest.param(("status", "nodes", 2, "product"), id="node-product"),
        pytest.param(("status", "nodes", 2, "name"), id="node-name"),
        pytest.param(("status", "models", 0, "classes", 0, "product"), id="class-product"),
        pytest.param(("status", "models", 0, "classes", 0, "slowestNode"), id="slowest-node"),
        pytest.param(("status", "models", 0, "name"), id="model-name"),
        pytest.param(("metadata", "name"), id="profile-name"),
    ],
)
def test_a_separator_in_a_status_string_is_refused_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, field: tuple[Any, ...], char: str
) -> None:
    document = status_profile()
    value: Any = document
    for key in field:
        value = value[key]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(replaced(document, field, f"{value}{char}  evil: injected")))
    for target in ("kueue", "itl-configmap"):
        line = _written(path, capsys, "--target", target, "--tokens-per-second", "1000",
                        "--from", str(path))  # fmt: skip
        assert "--from" in line


NAMEABLE = {name: char for name, char in UNSAFE.items() if name != "nul"}


@pytest.mark.parametrize("char", list(NAMEABLE.values()), ids=list(NAMEABLE))
@pytest.mark.parametrize("source", ["result", "status"])
def test_a_separator_in_the_files_name_is_refused_and_nothing_written(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], tmp_path: Path, char: str,
    source: str,
) -> None:  # fmt: skip
    path = tmp_path / f"fleet{char}# evil: injected.json"
    document = json.loads(sources[source].read_text())
    path.write_text(json.dumps(document.get("status", document)))
    line = _written(path, capsys, "--target", "wva", "--from", str(path))
    assert "--from" in line


def test_a_node_name_with_a_trailing_newline_is_no_node_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(replaced(status_profile(), ("status", "nodes", 0, "name"), "a\n")))
    line = _written(path, capsys, "--target", "kueue", "--tokens-per-second", "9", "--from",
                    str(path))  # fmt: skip
    assert "status.nodes[0]" in line


def _built(argv: list[str]) -> list[Any]:
    """What the export builds for ``argv``, without its comments."""
    from roofline_cli.export.command import build_documents, build_parser
    from roofline_cli.export.commented import plain

    return [plain(document) for _, document in build_documents(build_parser().parse_args(argv))]


@pytest.mark.parametrize("source", ["result", "status"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_every_document_written_reads_back_as_built(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], target: str, source: str
) -> None:
    argv = ["--target", target, "--from", str(sources[source]), *EXTRA.get(target, [])]
    code, out, _ = export(capsys, *argv)
    assert code == 0
    assert list(yaml.safe_load_all(out)) == _built(argv)


def _two_models(first: str, second: str) -> dict[str, Any]:
    document = status_profile()
    other = json.loads(json.dumps(document["status"]["models"][0]))
    document["status"]["models"][0]["name"] = first
    other["name"] = second
    document["status"]["models"].append(other)
    for node in document["status"]["nodes"]:
        node["models"][0]["name"] = first
        node["models"].append({**node["models"][0], "name": second})
    return document


@pytest.mark.parametrize(
    ("target", "kind"),
    [("keda", "ScaledObject"), ("kueue", "ClusterQueue")],
)
def test_two_models_of_one_object_name_are_refused_naming_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str, kind: str
) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_two_models("llama-3.1-8b", "Llama-3.1-8B")))
    line = _written(path, capsys, "--target", target, "--from", str(path),
                    *EXTRA.get(target, []))  # fmt: skip
    assert "llama-3-1-8b" in line
    assert "llama-3.1-8b" in line
    assert "Llama-3.1-8B" in line


def test_a_long_model_on_two_classes_gets_two_engine_args_configmaps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = "a-very-long-model-name-for-the-engine-args-x46"
    document = _two_models(model, "other")
    classes = document["status"]["models"][0]["classes"]
    classes[0]["product"], classes[1]["product"] = "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    code, out, err = export(capsys, "--target", "engine-args", "--model", model, "--from",
                            str(path))  # fmt: skip
    assert code == 0, err
    maps = list(yaml.safe_load_all(out))
    names = [m["metadata"]["name"] for m in maps]
    assert len(names) == len(set(names)) == 2
    assert all(len(name) <= 63 for name in names)
    assert maps[0]["data"]["vllm"] != maps[1]["data"]["vllm"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param("maxBatch: " + "9" * 5000 + "\n", "digits", id="yaml-5000-digit-integer"),
        pytest.param('{"status": ' + "9" * 5000 + "}", "digits", id="json-5000-digit-integer"),
        pytest.param("[" * 100_000 + "]" * 100_000, "nested", id="deep-json"),
        pytest.param(
            "a:\n" + "".join(f"{'  ' * i}- x:\n" for i in range(1, 400)), "nested", id="deep-yaml"
        ),
        pytest.param("a: " + "[" * 5000 + "]" * 5000 + "\nb: '{'\n", "nested", id="deep-yaml-flow"),
    ],
)
def test_an_unbounded_document_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, reason: str
) -> None:
    path = tmp_path / "source.yaml"
    path.write_text(content)
    assert reason in _written(path, capsys, "--target", "wva", "--from", str(path))


@pytest.mark.parametrize("rate", [5e-324, 1e-300, 1e300])
def test_a_rate_no_replica_can_have_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rate: float
) -> None:
    document = status_profile()
    document["status"]["models"][0]["classes"][0]["tokensPerSecondAtMaxBatch"] = rate
    for node in document["status"]["nodes"]:
        node["models"][0]["tokensPerSecondAtMaxBatch"] = rate
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    line = _written(path, capsys, "--target", "kueue", "--tokens-per-second", "40000", "--from",
                    str(path))  # fmt: skip
    assert "tokensPerSecondAtMaxBatch" in line


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--tokens-per-second", "1e308"], id="demand-huge"),
        pytest.param(["--tokens-per-second", "5e-324"], id="demand-tiny"),
        pytest.param(["--tokens-per-second", "9", "--utilization", "5e-324"], id="utilization"),
    ],
)
def test_a_demand_out_of_range_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], argv: list[str]
) -> None:
    refused(capsys, "--target", "kueue", "--from", str(sources["status"]), *argv)


def test_a_long_profile_name_becomes_the_operators_label_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from roofline_operator.decide.labels import label_safe

    name = "p" * 100
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(replaced(status_profile(), ("metadata", "name"), name)))
    code, out, _ = export(capsys, "--target", "kueue", "--tokens-per-second", "9", "--from",
                          str(path))  # fmt: skip
    assert code == 0
    flavor = next(yaml.safe_load_all(out))
    assert flavor["spec"]["nodeLabels"]["roofline.dev/profile"] == label_safe(name)
    assert len(label_safe(name)) <= 63


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        pytest.param(["--model-id", 'x"} or vector(1) #'], "--model-id", id="model-id-promql"),
        pytest.param(["--model-id", "a\u2028b"], "--model-id", id="model-id-separator"),
        pytest.param(["--namespace", 'default"}'], "--namespace", id="namespace-promql"),
        pytest.param(["--namespace", "Default"], "--namespace", id="namespace-upper"),
        pytest.param(["--namespace", "a" * 64], "--namespace", id="namespace-long"),
        pytest.param(["--deployment", "-x"], "--deployment", id="deployment"),
        pytest.param(["--prometheus", "http://p\n:9090"], "--prometheus", id="prometheus"),
        pytest.param(["--prometheus", "file:///etc/passwd"], "--prometheus", id="prom-scheme"),
        pytest.param(["--pool-selector", "app=a\u2028b"], "--pool-selector", id="selector-value"),
        pytest.param(["--pool-selector", "a b=x"], "--pool-selector", id="selector-key"),
        pytest.param(["--wva-namespace", "x\n"], "--wva-namespace", id="wva-namespace"),
    ],
)
def test_a_flag_that_reaches_yaml_or_promql_is_checked_against_its_contract(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], argv: list[str], reason: str
) -> None:
    assert reason in refused(capsys, "--target", "keda", "--from", str(sources["status"]), *argv)


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        pytest.param(["--resource", "nvidia.com/gpu\n# x"], "--resource", id="resource"),
        pytest.param(["--cohort", "Roofline"], "--cohort", id="cohort"),
    ],
)
def test_a_kueue_flag_is_checked_against_its_contract(
    capsys: pytest.CaptureFixture[str], sources: dict[str, Path], argv: list[str], reason: str
) -> None:
    line = refused(capsys, "--target", "kueue", "--tokens-per-second", "9", "--from",
                   str(sources["status"]), *argv)  # fmt: skip
    assert reason in line


def test_a_profile_name_that_kubectl_would_take_as_an_option_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record = tmp_path / "argv"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" > {record}\nexit 1\n')
    kubectl.chmod(0o755)
    for name in ("-x", "--all-namespaces", "a\nb", "Fleet"):
        line = refused(capsys, "--target", "wva", "--profile", name, "--kubectl", str(kubectl))
        assert "--profile" in line
    assert not record.exists()


STATUS = status_profile()


@st.composite
def _hostile_string(draw: st.DrawFn) -> str:
    """The status with one of its strings replaced by separators, controls and look-alikes."""
    path = draw(st.sampled_from(string_paths(STATUS)))
    return json.dumps(replaced(STATUS, path, draw(hostile_text)))


@given(
    text=st.one_of(_hostile_string(), tampered_documents(STATUS)),
    target=st.sampled_from(list(TARGETS)),
    as_yaml=st.booleans(),
)
def test_a_tampered_status_is_refused_or_written_exactly_as_built(
    text: str, target: str, as_yaml: bool
) -> None:
    """Any string of a status (separators and controls included) or any other value, in JSON
    or YAML: exit 2 with one line, or a file that YAML reads back as exactly what was built."""
    import contextlib
    import io
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "profile.json"
        source.write_text(yaml.safe_dump(json.loads(text)) if as_yaml else text)
        output = Path(folder) / "out.yaml"
        argv = ["--target", target, "--from", str(source), "--tokens-per-second", "9"]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["export", *argv, "--output", str(output)])
        event(f"exit {code}")
        if code == 0:
            written = output.read_text(encoding="utf-8")
            assert list(yaml.safe_load_all(written)) == _built(argv)
        else:
            assert code == 2
            assert not output.exists()
            (line,) = err.getvalue().splitlines()
            assert line.startswith("roofline: error: ")
            assert line.isprintable()
