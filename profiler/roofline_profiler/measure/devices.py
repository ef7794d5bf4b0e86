"""Which devices to profile, what they are, and which dtype they get by default.

CUDA and ROCm share torch's ``cuda`` device type (ROCm builds set ``torch.version.hip``); Apple
GPUs are ``mps``; otherwise the CPU. A node's GPUs are profiled one by one and reported
separately, so a weak GPU in a node shows up.
"""

from __future__ import annotations

import os
import platform
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from roofline_profiler.core.errors import first_line
from roofline_profiler.core.limits import DTYPE_NAMES

#: The torch dtype of each of the limits' dtype names.
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}
DEVICE_PATTERN = re.compile(r"^(all|cpu|mps|cuda)(:(\d+))?$")


class DeviceError(ValueError):
    """The requested device does not exist or cannot run the requested dtype (bad input)."""


@dataclass(frozen=True)
class DeviceInfo:
    device: torch.device
    index: int
    name: str
    backend: str  # cuda, rocm, mps, cpu
    memory_bytes: int | None
    cache_bytes: int  # L2 on GPUs, the last-level cache on CPUs


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _cpu_cache_bytes() -> int:
    """Largest cache level the kernel reports, with a generous default when it reports none."""
    sizes = []
    for size_file in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = size_file.read_text().strip().upper()
        match = re.match(r"^(\d+)([KMG]?)", text)
        if match:
            scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]
            sizes.append(int(match.group(1)) * scale)
    return max(sizes, default=64 << 20)


def _cpu_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cuda_info(index: int) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(
        device=torch.device("cuda", index),
        index=index,
        name=props.name,
        backend="rocm" if torch.version.hip else "cuda",
        memory_bytes=int(props.total_memory),
        cache_bytes=int(getattr(props, "L2_cache_size", 0) or (64 << 20)),
    )


def _mps_info() -> DeviceInfo:
    return DeviceInfo(
        device=torch.device("mps"),
        index=0,
        name=f"Apple {platform.machine()} GPU (MPS)",
        backend="mps",
        memory_bytes=_cpu_memory_bytes(),
        cache_bytes=64 << 20,
    )


def _cpu_info() -> DeviceInfo:
    return DeviceInfo(
        device=torch.device("cpu"),
        index=0,
        name=_cpu_name(),
        backend="cpu",
        memory_bytes=_cpu_memory_bytes(),
        cache_bytes=_cpu_cache_bytes(),
    )


#: Why a container that was given a GPU may still see none: the causes to check, in one line.
NO_GPU_CAUSES = (
    "in a container, check the runtime class (runtimeClassName), the node's GPU device plugin "
    "and that the driver suits the image's CUDA"
)


def _gpu_count() -> tuple[int, str]:
    """The GPUs torch sees, and, when it sees none, why: torch's own warning (a driver too old
    for this CUDA) where it gave one, then the likely causes."""
    if torch.version.cuda is None and torch.version.hip is None:
        return 0, "this torch build supports neither CUDA nor ROCm"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count:
        return count, ""
    said = next((first_line(w.message) for w in caught if first_line(w.message)), "")
    seen = f"torch sees no CUDA or ROCm GPU ({said})" if said else "torch sees no CUDA or ROCm GPU"
    return 0, f"{seen}; {NO_GPU_CAUSES}"


def resolve_devices(spec: str) -> list[DeviceInfo]:
    """Turn ``--device`` into devices: ``all`` (every GPU, else the CPU), ``cuda`` (every CUDA or
    ROCm GPU), ``cuda:N``, ``mps`` or ``cpu``."""
    match = DEVICE_PATTERN.match(spec.strip().lower())
    if not match:
        raise DeviceError(f"unknown device {spec!r} (expected all, cpu, mps, cuda or cuda:N)")
    kind, number = match.group(1), match.group(3)
    if number is not None and kind != "cuda":
        raise DeviceError(f"device {spec!r}: only cuda devices take an index")
    if kind == "all":
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            kind = "cuda"
        elif torch.backends.mps.is_available():
            kind = "mps"
        else:
            kind = "cpu"
    if kind == "cpu":
        return [_cpu_info()]
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceError("device 'mps' is not available on this machine")
        return [_mps_info()]
    count, why = _gpu_count()
    if count == 0:
        raise DeviceError(f"device {spec!r} is not available: {why}")
    if number is None:
        return [_cuda_info(i) for i in range(count)]
    if int(number) >= count:
        raise DeviceError(f"device {spec!r} does not exist: torch sees {count} GPU(s)")
    return [_cuda_info(int(number))]


def default_dtype(info: DeviceInfo) -> str:
    """bf16 on GPUs that support it, fp16 on other GPUs, fp32 on the CPU."""
    if info.backend in ("cuda", "rocm"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    if info.backend == "mps":
        return "float16"
    return "float32"


def check_dtype_supported(info: DeviceInfo, dtype: str) -> None:
    if info.backend in ("cuda", "rocm") and dtype == "bfloat16":
        with torch.cuda.device(info.device):
            if not torch.cuda.is_bf16_supported():
                raise DeviceError(f"{info.name} does not support bfloat16; use --dtype float16")
