"""The files a command writes: whole or not at all, with the user's umask, listed in order."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from roofline_profiler.cli import arguments, outputs
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.result import ProfileResult
from tests.profiler.synthetic import synthetic_result


def test_wrote_lists_the_files_in_the_order_of_the_flags() -> None:
    paths = arguments.OutputPaths(json=Path("r.json"), plot=Path("p.png"), compact=Path("log"))
    assert outputs.wrote(paths) == "wrote r.json\nwrote p.png\nwrote log\n"
    assert outputs.wrote(arguments.OutputPaths()) == ""


def test_a_failed_write_leaves_neither_the_target_nor_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*_: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(outputs.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space"):
        outputs.write_atomic(tmp_path / "result.json", b"{}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_an_atomic_write_replaces_the_file_with_the_users_umask(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "report.md"
    target.write_text("old")
    previous = os.umask(umask)
    try:
        outputs.write_atomic(target, b"new")
    finally:
        os.umask(previous)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_every_file_asked_for_is_written_and_the_figure_drawn_once(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn: list[ProfileResult] = []

    def figure(result: ProfileResult) -> object:
        drawn.append(result)
        return plt.figure()

    result = synthetic_result()
    paths = arguments.OutputPaths(
        tmp_path / "r.json", tmp_path / "r.md", tmp_path / "p.png", tmp_path / "log"
    )
    outputs.write_result(result, paths, figure)
    assert drawn == [result]
    assert (tmp_path / "r.json").read_text() == outputs.result_document(result)
    assert (tmp_path / "r.md").read_text().startswith("# Decode roofline profile")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert decode_compact((tmp_path / "log").read_text()).devices[0].name == result.devices[0].name
    assert plt.get_fignums() == []


def test_a_device_failure_goes_to_the_compact_file_cut_to_its_limit(tmp_path: Path) -> None:
    log = tmp_path / "log"
    outputs.write_failure(arguments.OutputPaths(compact=log), "x" * 5000)
    assert log.read_text() == "x" * outputs.MAX_FAILURE_CHARS
    outputs.write_failure(arguments.OutputPaths(), "nothing to write")
    assert list(tmp_path.iterdir()) == [log]
