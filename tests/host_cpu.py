"""The vector-ISA flags of the CPU the tests run on, for tests whose engine path depends on them
(oneDNN's packed bf16 linear, vLLM's CPU extension)."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str] | None:
    """The ``flags`` of ``cpuinfo`` (default: this machine's /proc/cpuinfo); None where there is
    no such line to read (not Linux on x86)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None
