"""Environment and device telemetry, collected apart from the measuring code (as pyperf's
``_collect_metadata`` is): versions of what produced a number, and the clocks, power and
temperature a GPU ran at when nvidia-ml-py can read them."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
from typing import Any

import torch

from roofline_profiler.measure.devices import DeviceInfo


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {
        "hostname": os.environ.get("NODE_NAME") or socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpuCount": os.cpu_count(),
        "torchThreads": torch.get_num_threads(),
    }
    if torch.version.cuda:
        env["cudaRuntime"] = torch.version.cuda
    if torch.version.hip:
        env["hipRuntime"] = torch.version.hip
    driver = _nvml(lambda nvml: nvml.nvmlSystemGetDriverVersion())
    if driver:
        env["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
    return env


def _nvml(read: Any) -> Any:
    """Call ``read(pynvml)`` with NVML initialised; None when NVML or the call is unavailable."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVML raises its own error classes; any failure means "not available"
        return None
    try:
        return read(pynvml)
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _nvml_index(info: DeviceInfo) -> int:
    """NVML numbers GPUs by PCI order; honour CUDA_VISIBLE_DEVICES when it lists plain indices."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    parts = [p.strip() for p in visible.split(",") if p.strip()]
    if parts and all(p.isdigit() for p in parts) and info.index < len(parts):
        return int(parts[info.index])
    return info.index


def telemetry(info: DeviceInfo) -> dict[str, Any]:
    """Clocks (MHz), power (W), temperature (°C) and the power limit of one NVIDIA GPU."""
    if info.backend != "cuda":
        return {}

    def read(nvml: Any) -> dict[str, Any]:
        handle = nvml.nvmlDeviceGetHandleByIndex(_nvml_index(info))
        out: dict[str, Any] = {}
        readers = {
            "smClockMHz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "memoryClockMHz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "maxSmClockMHz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
            "powerWatts": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "powerLimitWatts": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
            "temperatureCelsius": lambda: nvml.nvmlDeviceGetTemperature(
                handle, nvml.NVML_TEMPERATURE_GPU
            ),
        }
        for key, reader in readers.items():
            try:
                out[key] = reader()
            except Exception:
                continue
        try:
            uuid = nvml.nvmlDeviceGetUUID(handle)
            out["uuid"] = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        except Exception:
            pass
        return out

    return _nvml(read) or {}
