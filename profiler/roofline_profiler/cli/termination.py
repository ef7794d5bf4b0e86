"""Stopping on SIGTERM, as a profiler pod must when it is deleted.

In a container the profiler is the first process (PID 1, ``ENTRYPOINT ["roofline"]``), and the
kernel delivers no signal to a namespace's PID 1 that it has no handler for: SIGTERM, the
kubelet's request to stop, did nothing, and a deleted pod went on measuring (and holding its
GPU) until the SIGKILL at the end of its grace period. A handler makes SIGTERM an exception,
raised in the main thread at the next Python instruction between two measurements (a kernel or
a GPU synchronisation in progress finishes first, milliseconds), so the measurement unwinds,
the command reports one line and exits 143 (128 + SIGTERM, what a shell reports for a process
that SIGTERM ended), and the result files are never written half: the ``--compact`` file gets
that line instead of a result.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

#: The exit status of a command that SIGTERM stopped.
TERMINATED_EXIT_CODE = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived. A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except
    Exception`` on the way (a model that failed, a device error) takes it for a failure to
    report and measures on."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # One SIGTERM is enough: a second, while the command reports the first, is ignored.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated`; the previous handler is restored
    afterwards. Outside the main thread (where Python runs no signal handler) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
