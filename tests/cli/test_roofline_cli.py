"""The ``roofline`` entry point hands each subcommand to the package that owns it."""

import subprocess
import sys

import pytest

from roofline_cli import main, profiler_commands


def test_help_lists_the_profilers_commands_and_the_operator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in (*profiler_commands(), "operator"):
        assert f"\n  {command} " in out
    assert "profile" in profiler_commands()


@pytest.mark.parametrize(("argv", "reason"), [([], "a command is required"), (["frob"], "'frob'")])
def test_a_missing_or_unknown_command_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("roofline: error: ")
    assert reason in line


def test_profile_goes_to_the_profilers_parser(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--shape", "4096"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "not of the form KxN" in line


def test_operator_goes_to_the_operators_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["operator", "--help"])
    assert done.value.code == 0
    assert "--metrics-port" in capsys.readouterr().out


def test_the_profiler_alone_no_longer_knows_the_operator() -> None:
    from roofline_profiler.cli.commands import main as profiler_main

    assert profiler_main(["operator"]) == 2


def test_python_dash_m_runs_the_same_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "roofline_cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "operator" in proc.stdout


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"roofline {version('roofline-operator')}\n"
    with pytest.raises(SystemExit) as exited:
        main(["operator", "--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("roofline operator ")
