"""What `roofline profile` and its files look like to a person, on synthetic measurements.

The measurements are the synthetic ones of ``synthetic.py`` (the profiler's own assembly code on
made-up timings), so the golden files pin the formatting, never a machine's speed. Regenerate
them after a deliberate change with ``ROOFLINE_UPDATE_GOLDEN=1 pytest tests/profiler``.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from roofline_profiler.cli import commands
from roofline_profiler.cli.report import markdown_report, text_summary
from roofline_profiler.measure import runner
from roofline_profiler.wire.result import ProfileResult
from tests import golden
from tests.profiler.synthetic import planned_result

GOLDEN = Path(__file__).parents[1] / "golden"


def check_golden(name: str, text: str) -> None:
    golden.check_golden(GOLDEN / name, text, "tests/profiler/cli/test_cli_output.py")


def test_the_terminal_summary_matches_its_golden_file() -> None:
    check_golden("profile-summary.txt", text_summary(planned_result()))


def test_the_markdown_report_matches_its_golden_file() -> None:
    check_golden("profile-report.md", markdown_report(planned_result()))


def test_no_number_is_printed_in_scientific_notation() -> None:
    text = text_summary(planned_result()) + markdown_report(planned_result())
    assert "e+" not in text
    assert "e-0" not in text


def test_a_plan_without_a_range_says_its_engine_flags_are_a_fallback() -> None:
    text = text_summary(planned_result())
    assert "recommended batch      none (see warnings)" in text
    assert "engine flags below are a fallback for batch 1" in text


@pytest.fixture
def fake_profile(monkeypatch: pytest.MonkeyPatch) -> ProfileResult:
    """``roofline profile`` measuring nothing: the runner hands back the synthetic result."""
    result = planned_result()
    monkeypatch.setattr(runner, "run_profile", lambda request, dtypes, progress: result)
    return result


def run_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    out = tmp_path / "out"
    out.mkdir()
    argv = ["profile", "--device", "cpu", "--json", str(out / "result.json")]
    argv += ["--markdown", str(out / "report.md"), "--plot", str(out / "roofline.png")]
    assert commands.main(argv) == 0
    return capsys.readouterr().out.replace(str(tmp_path), "TMP")


def test_the_profile_command_prints_the_summary_then_one_wrote_line_per_file(
    fake_profile: ProfileResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stdout = run_profile(tmp_path, capsys)
    check_golden("profile-stdout.txt", stdout)
    assert stdout.endswith(
        "wrote TMP/out/result.json\nwrote TMP/out/report.md\nwrote TMP/out/roofline.png\n"
    )


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_every_output_file_gets_the_users_umask(
    fake_profile: ProfileResult, tmp_path: Path, capsys: pytest.CaptureFixture[str], umask: int
) -> None:
    previous = os.umask(umask)
    try:
        run_profile(tmp_path, capsys)
    finally:
        os.umask(previous)
    for name in ("result.json", "report.md", "roofline.png"):
        mode = stat.S_IMODE((tmp_path / "out" / name).stat().st_mode)
        assert mode == 0o666 & ~umask, f"{name}: {oct(mode)}"


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = commands.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("command", ["profile", "plan"])
def test_every_flag_has_help_and_shows_its_default(command: str) -> None:
    for action in subparsers()[command]._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{command} {action.option_strings} has no help"
        if action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in action.help, f"{command} {action.option_strings} hides its default"


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        commands.build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("roofline ")


def test_the_plot_reads_in_engineering_units_with_a_legend_for_every_line_style() -> None:
    import matplotlib.pyplot as plt

    from roofline_profiler.cli.plot import roofline_figure

    fig = roofline_figure(planned_result(), itl_slo_seconds=0.02)
    try:
        fig.canvas.draw()
        roof, per_token, itl, throughput = fig.axes
        assert roof.yaxis.get_major_formatter()(4e14, 0) == "400 TFLOP/s"
        assert per_token.yaxis.get_major_formatter()(0.01, 0) == "10 ms"
        assert itl.yaxis.get_major_formatter()(0.006, 0) == "6 ms"
        assert throughput.yaxis.get_major_formatter()(5400.0, 0) == "5,400"
        ticks = [
            label.get_text()
            for axis in fig.axes
            for label in (*axis.get_xticklabels(), *axis.get_yticklabels())
        ]
        assert any(ticks)
        assert not [t for t in ticks if "$" in t or "10^" in t or "×10" in t], ticks
        titles = [axis.get_title() for axis in fig.axes]
        assert not [t for t in titles if "--" in t or ", :" in t], titles
        legend = {t.get_text() for t in itl.get_legend().get_texts()}
        assert {"max batch by memory", "max batch by latency", "recommended batch range"} <= legend
        assert "ITL SLO 20 ms" in legend
    finally:
        plt.close(fig)
