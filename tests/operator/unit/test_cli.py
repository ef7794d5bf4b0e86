from __future__ import annotations

import pytest

from roofline_operator.cli import main


def test_a_bad_flag_value_exits_2_with_one_line_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--metrics-port", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline operator: --metrics-port")
    assert err.count("\n") == 1


def test_help_lists_the_documented_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--namespace", "--metrics-port", "--standalone", "--peering", "--profiler-image"):
        assert flag in out
