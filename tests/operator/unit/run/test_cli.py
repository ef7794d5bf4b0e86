from __future__ import annotations

from typing import Any

import pytest

from roofline_operator.run.cli import main


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


def test_kopf_watches_pods_in_the_profiler_namespaces_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Namespaced Kopf: pods are watched in these namespaces (profiles and nodes, cluster-scoped,
    cluster-wide all the same), so a look-alike pod elsewhere is never even seen."""
    import kopf

    from roofline_operator.run import cli
    from roofline_operator.run.config import load_config

    seen: dict[str, Any] = {}
    monkeypatch.setattr(kopf, "run", lambda **kwargs: seen.update(kwargs))
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    flags = ["--namespace", "prof", "--extra-namespace", "team-a", "--verbose"]
    cli.run_operator(load_config(flags, {}))
    assert seen["namespaces"] == ["prof", "team-a"]
    assert not seen.get("clusterwide")
