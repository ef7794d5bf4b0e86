"""``roofline profile`` as a user runs it: the profiler's command line in a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roofline_profiler.cli.commands", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        check=False,
    )


def assert_refused(proc: subprocess.CompletedProcess[str], message: str) -> None:
    """Bad input: exit 2 and one line ``roofline: error: ...`` that says ``message``, no
    traceback."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("roofline: error: ")
    assert message in lines[0]
    assert "Traceback" not in proc.stderr
