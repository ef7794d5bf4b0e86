"""SIGTERM stops ``roofline profile`` at once, also as a container's first process (PID 1).

A namespace's PID 1 gets no default action for a signal it has no handler for: the kernel drops
it. So the profiler in a pod (``ENTRYPOINT ["roofline"]``) ignored the kubelet's SIGTERM and
measured on, holding its GPU, until the SIGKILL at the end of the grace period. The test here
runs the real command as PID 1 of a new PID namespace (``unshare --pid --fork``), as a container
runtime does, and sends SIGTERM from outside it, as the kubelet does;
``tests/deploy/test_images.py`` does the same in the built image.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roofline_profiler.cli import commands
from roofline_profiler.cli.termination import TERMINATED_EXIT_CODE
from roofline_profiler.measure import runner

#: Longest wait for the profiler to stop after SIGTERM. Measuring goes on for a minute or more;
#: stopping takes the current kernel plus the interpreter's exit (about a second here).
STOP_WITHIN_SECONDS = 10.0


def test_sigterm_while_measuring_exits_143_and_leaves_no_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def measuring(*_: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # a measurement the signal interrupts
        raise AssertionError("SIGTERM did not stop the measurement")

    monkeypatch.setattr(runner, "run_profile", measuring)
    log, document = tmp_path / "termination-log", tmp_path / "result.json"
    log.write_text("a stale result")
    argv = ["profile", "--device", "cpu", "--compact", str(log), "--json", str(document)]
    assert commands.main(argv) == TERMINATED_EXIT_CODE == 143
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == commands.TERMINATED_MESSAGE
    assert log.read_text() == line, "the termination message says why, and holds no result"
    assert not document.exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the handler is restored"


def _unshare() -> str | None:
    return shutil.which("unshare")


def _child_of(pid: int) -> int | None:
    """The one child of ``pid`` (the namespace's PID 1 that ``unshare --fork`` started)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    children = path.read_text().split() if path.exists() else []
    return int(children[0]) if children else None


def _torch_loaded(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs root here")
@pytest.mark.skipif(_unshare() is None, reason="unshare (util-linux) is not installed")
def test_the_profiler_as_pid_1_stops_on_sigterm_with_a_clear_message(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    log.touch()
    # The default sweep of the default shape: a minute or more on this CPU, far past the wait.
    argv = [sys.executable, "-m", "roofline_cli", "profile", "--device", "cpu"]
    unshare = subprocess.Popen(
        [str(_unshare()), "--pid", "--fork", "--mount-proc", *argv, "--compact", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        init = None
        while time.monotonic() < deadline and unshare.poll() is None:
            init = init or _child_of(unshare.pid)
            if init is not None and _torch_loaded(init):
                break
            time.sleep(0.2)
        assert init is not None, "the profiler did not start"
        assert Path(f"/proc/{init}/status").read_text().count("NSpid:") == 1
        nspid = next(
            line
            for line in Path(f"/proc/{init}/status").read_text().splitlines()
            if line.startswith("NSpid:")
        )
        assert nspid.split()[-1] == "1", f"not PID 1 in its namespace: {nspid}"
        time.sleep(2.0)  # well into measuring
        sent = time.monotonic()
        os.kill(init, signal.SIGTERM)
        out, err = unshare.communicate(timeout=STOP_WITHIN_SECONDS + 30)
        stopped_in = time.monotonic() - sent
    finally:
        if unshare.poll() is None:
            unshare.kill()
            unshare.wait()
    assert stopped_in < STOP_WITHIN_SECONDS, f"took {stopped_in:.1f} s to stop"
    assert unshare.returncode == TERMINATED_EXIT_CODE, err
    assert err.strip().splitlines()[-1] == commands.TERMINATED_MESSAGE
    assert "Traceback" not in err
    assert log.read_text() == commands.TERMINATED_MESSAGE
    assert "wrote" not in out
