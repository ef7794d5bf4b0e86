"""The vector-ISA flags of the CPU the tests run on, for tests (and benches) whose engine path
depends on them (oneDNN's packed bf16 linear, vLLM's CPU extension)."""

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


def serving_dtype(flags: frozenset[str] | None) -> str:
    """The dtype the real-engine tests and benches serve and profile in on a CPU of ``flags``
    (:func:`cpu_flags`): bf16 where it reports AVX-512 (or is not an x86 CPU: vLLM's CPU build
    picks its own path there), else float32.

    vLLM's CPU wheel loads the extension built for the CPU's vector ISA; with AVX2 but no AVX-512
    (an AMD EPYC VM) its bf16 GEMMs run a 512-token prompt of the load bench's Llama in 4.7 s,
    float32 in 0.8 s (an AVX-512 host: 0.27 s in bf16), and a test's or a bench's runs would not
    fit their time.
    """
    if flags is None:
        return "bfloat16"
    return "bfloat16" if "avx512f" in flags or "avx2" not in flags else "float32"
