"""docs/export.md runs: every ``roofline`` command it shows is a valid command (the profile run's
flags are parsed as the profiler parses them; every export runs for real), and every output it
quotes is what the command writes from the saved result of the guide's real run
(``docs/examples/cpu-result.json``) — so the guide's numbers cannot drift from that run.

The cluster commands (``--profile NAME``) read a RooflineProfile whose status the operator's own
status builder wrote (``tests/cli/export_sources.py``) from a file instead of a cluster: reading it
through kubectl from a real API server is ``tests/operator/realserver/test_real_export.py``.
"""

from __future__ import annotations

import itertools
import re
import shlex
import shutil
from pathlib import Path

import pytest

from roofline_cli import main
from roofline_profiler.cli.arguments import plan_arguments, profile_arguments, read_result
from roofline_profiler.cli.commands import build_parser
from roofline_profiler.cli.report import text_summary
from tests.cli.export_sources import write_status

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "export.md"
RESULT = ROOT / "docs" / "examples" / "cpu-result.json"
#: The result file the guide's local commands name.
GUIDE_RESULT = "cpu-result.json"


def blocks(markdown: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block, in order."""
    return [(m[1], m[2]) for m in re.finditer(r"```(\w*)\n(.*?)```", markdown, re.S)]


def commands(body: str) -> list[list[str]]:
    """The ``roofline`` commands of a shell block, continuation lines joined, comments dropped."""
    joined = body.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]  # an environment assignment before the command
        if words[:1] == ["roofline"]:
            found.append(words[1:])
    return found


def command_outputs() -> list[tuple[list[str], str, str]]:
    """Each ``roofline`` command of a one-command shell block and the block quoted after it."""
    found = []
    pairs = blocks(GUIDE.read_text())
    for (language, body), (next_language, quoted) in itertools.pairwise(pairs):
        shown = commands(body) if language == "sh" else []
        if len(shown) == 1 and next_language in ("yaml", "text"):
            found.append((shown[0], next_language, quoted))
    return found


def all_commands() -> list[list[str]]:
    return [
        c
        for language, body in blocks(GUIDE.read_text())
        if language == "sh"
        for c in commands(body)
    ]


def test_the_guide_shows_the_profile_run_and_every_target() -> None:
    shown = all_commands()
    assert any(c[0] == "profile" for c in shown)
    targets = {c[c.index("--target") + 1] for c in shown if c[0] == "export"}
    assert targets == {"engine-args", "keda", "gateway", "wva", "kueue", "itl-configmap"}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the guide's commands run in, as the repository root: its example config, and
    the real run's result under the name the guide gives it."""
    shutil.copy(RESULT, tmp_path / GUIDE_RESULT)
    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def localized(argv: list[str], workdir: Path) -> list[str]:
    """A cluster command reading the profile from a file the operator's status builder wrote."""
    if "--profile" not in argv:
        return argv
    status = write_status(workdir)
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in ("--profile", "--kubeconfig", "--context"):
            skip = True
            if word == "--profile":
                kept += ["--from", str(status)]
            continue
        kept.append(word)
    return kept


def run_export(argv: list[str], workdir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(localized(argv, workdir)) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    output = next((argv[i + 1] for i, w in enumerate(argv) if w in ("-o", "--output")), None)
    return (workdir / output).read_text() if output else out


def test_every_roofline_command_of_the_guide_runs_or_parses(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in all_commands():
        if argv[0] == "export":
            run_export(argv, workdir, capsys)
        elif argv[0] in ("profile", "plan"):
            parsed = build_parser().parse_args(argv)
            (profile_arguments if argv[0] == "profile" else plan_arguments)(parsed)
        else:
            pytest.fail(f"the guide shows roofline {argv[0]}, which this test cannot check")


def quoted_lines(quoted: str) -> list[str]:
    return [line for line in quoted.splitlines() if line.strip() and line.strip() != "..."]


@pytest.mark.parametrize(
    ("argv", "language", "quoted"),
    command_outputs(),
    ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else None,
)
def test_every_quoted_output_is_what_the_command_writes(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    language: str,
    quoted: str,
) -> None:
    if argv[0] == "export":
        actual = run_export(argv, workdir, capsys).splitlines()
    else:
        actual = text_summary(read_result(RESULT)).splitlines()
    position = 0
    for line in quoted_lines(quoted):
        assert line in actual[position:], f"{line!r} is not in the output of roofline {argv[0]}"
        position = actual.index(line, position) + 1
