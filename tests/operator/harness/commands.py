"""How the harness starts the product's own console script, installed or straight from source.

``roofline`` is the one entry point of the product. When the project is installed it sits next to
the interpreter; in a source checkout the same ``main`` runs through ``python -m`` with the two
source folders on ``PYTHONPATH``. Either way the processes under test are the real CLI.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE_FOLDERS = (REPO_ROOT / "profiler", REPO_ROOT / "operator", REPO_ROOT / "cli")


def roofline_argv() -> list[str]:
    script = Path(sys.executable).parent / "roofline"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "roofline_cli"]


def product_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment with the source folders importable."""
    env = dict(os.environ)
    paths = [str(p) for p in SOURCE_FOLDERS]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` for child processes: SIGKILL them if the test process dies first.

    Children run in their own process group (``setsid``) so that a test can kill one whole group,
    which also shields them from a Ctrl-C or a timeout kill of pytest; this Linux-only
    parent-death signal makes sure no operator or profiler outlives an interrupted test run.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
