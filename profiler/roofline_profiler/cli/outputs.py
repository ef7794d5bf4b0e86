"""The files a command writes: the JSON document, the Markdown report, the plot and the compact
message, and the ``wrote PATH`` lines that list them.

Each file but the compact message is written to a temporary file in its directory and renamed
over the target, so a failure never leaves half a file, and gets the mode any other file of the
user gets (``0666`` less the umask). The compact message is written in place: its target is
typically ``/dev/termination-log``, a file the kubelet mounts, which cannot be renamed over.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofline_profiler.cli.arguments import OutputPaths
from roofline_profiler.wire.result import ProfileResult

#: Resolution of the PNG plots.
PLOT_DPI = 110
#: Most characters of a device failure in the compact file: a termination message is read up
#: to 4096 bytes.
MAX_FAILURE_CHARS = 4000


def wrote(paths: OutputPaths) -> str:
    """One ``wrote PATH`` line per file written, in the order of the flags."""
    return "".join(f"wrote {path}\n" for path in paths.written())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a failure never leaves half a file.

    ``mkstemp`` creates the file ``0600``; it gets the mode any other file of the user gets
    (``0666`` less the umask).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_in_place(path: Path, text: str) -> None:
    """Special files such as /dev/termination-log cannot be renamed over: write in place."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_figure(path: Path, figure: Any) -> None:
    """A matplotlib figure as a PNG, written atomically; the figure is closed either way."""
    import matplotlib.pyplot as plt

    try:
        png = io.BytesIO()
        figure.savefig(png, format="png", dpi=PLOT_DPI)
    finally:
        plt.close(figure)
    write_atomic(path, png.getvalue())


def result_document(result: ProfileResult) -> str:
    """The JSON document ``--json`` writes."""
    return json.dumps(result.to_dict(), indent=2) + "\n"


def write_result(
    result: ProfileResult, paths: OutputPaths, figure: Callable[[ProfileResult], Any]
) -> None:
    """Every file ``paths`` asks for, in the order of the flags; ``figure`` draws the plot."""
    from roofline_profiler.cli.report import markdown_report
    from roofline_profiler.wire.compact import encode_compact

    if paths.json is not None:
        write_atomic(paths.json, result_document(result).encode())
    if paths.markdown is not None:
        write_atomic(paths.markdown, markdown_report(result).encode())
    if paths.plot is not None:
        write_figure(paths.plot, figure(result))
    if paths.compact is not None:
        write_in_place(paths.compact, encode_compact(result.to_compact()))


def write_failure(paths: OutputPaths, message: str) -> None:
    """A device failure in the compact file, so a pod's termination message says why."""
    if paths.compact is not None:
        write_in_place(paths.compact, message[:MAX_FAILURE_CHARS])
