"""Environment and GPU telemetry: what produced a number, read through NVML where there is one.

NVML is replaced by a stand-in module, so the tests run the same on machines with and without an
NVIDIA driver.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import torch

from roofline_profiler.measure.devices import DeviceInfo
from roofline_profiler.measure.metadata import _nvml, _nvml_index, environment, telemetry

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 2, 0


class FakeNvml(types.ModuleType):
    """The few ``pynvml`` calls the profiler makes, answering for GPUs by NVML index."""

    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU

    def __init__(self, *, init_fails: bool = False, failing: tuple[str, ...] = ()) -> None:
        super().__init__("pynvml")
        self.init_fails = init_fails
        self.failing = failing
        self.shutdowns = 0
        self.handles: list[int] = []

    def _call(self, name: str, value: Any) -> Any:
        if name in self.failing:
            raise RuntimeError(f"NVML_ERROR_NOT_SUPPORTED: {name}")
        return value

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return self._call("driver", b"580.65")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self.handles.append(index)
        return index

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return self._call("clock", 1980 if clock == NVML_CLOCK_SM else 3201)

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:
        return self._call("max clock", 1980)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._call("power", 512_500)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return self._call("power limit", 700_000)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return self._call("temperature", 61)

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self._call("uuid", f"GPU-{handle:08d}".encode())


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def gpu(index: int = 0, backend: str = "cuda") -> DeviceInfo:
    return DeviceInfo(torch.device("cpu"), index, "NVIDIA H200", backend, 150 << 30, 60 << 20)


def test_the_environment_names_the_host_python_torch_and_threads(
    monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml
) -> None:
    monkeypatch.setenv("NODE_NAME", "gpu-node-17")
    env = environment()
    assert env["hostname"] == "gpu-node-17"
    assert env["torch"] == torch.__version__
    assert env["torchThreads"] == torch.get_num_threads()
    assert env["python"].count(".") == 2
    assert env["platform"]
    assert env["driver"] == "580.65"
    assert ("cudaRuntime" in env) == bool(torch.version.cuda)


def test_without_a_node_name_the_environment_names_the_machine(
    monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.setattr("socket.gethostname", lambda: "workstation")
    assert environment()["hostname"] == "workstation"


def test_without_a_driver_the_environment_has_no_driver_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(init_fails=True))
    assert "driver" not in environment()


def test_nvml_is_shut_down_even_when_a_read_fails(nvml: FakeNvml) -> None:
    def broken(_: Any) -> None:
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    assert _nvml(broken) is None
    assert nvml.shutdowns == 1


def test_a_missing_nvml_module_reads_as_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert _nvml(lambda nvml: nvml.nvmlSystemGetDriverVersion()) is None


@pytest.mark.parametrize(
    ("visible", "index", "nvml_index"),
    [
        pytest.param(None, 1, 1, id="all-visible"),
        pytest.param("2,3", 1, 3, id="renumbered"),
        pytest.param(" 2 , 3 ", 0, 2, id="spaces"),
        pytest.param("GPU-1a2b,GPU-3c4d", 1, 1, id="uuids-kept-as-given"),
        pytest.param("2", 1, 1, id="beyond-the-list"),
    ],
)
def test_the_nvml_index_honours_cuda_visible_devices_when_it_lists_indices(
    monkeypatch: pytest.MonkeyPatch, visible: str | None, index: int, nvml_index: int
) -> None:
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _nvml_index(gpu(index)) == nvml_index


def test_telemetry_reads_clocks_power_temperature_and_uuid_of_the_visible_gpu(
    monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert telemetry(gpu(1)) == {
        "smClockMHz": 1980,
        "memoryClockMHz": 3201,
        "maxSmClockMHz": 1980,
        "powerWatts": 512.5,
        "powerLimitWatts": 700.0,
        "temperatureCelsius": 61,
        "uuid": "GPU-00000005",
    }
    assert nvml.handles == [5]


def test_a_reading_the_gpu_does_not_support_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(failing=("power", "uuid")))
    readings = telemetry(gpu())
    assert "powerWatts" not in readings
    assert "uuid" not in readings
    assert readings["temperatureCelsius"] == 61


@pytest.mark.parametrize("backend", ["cpu", "mps", "rocm"])
def test_devices_other_than_nvidia_gpus_have_no_telemetry(backend: str, nvml: FakeNvml) -> None:
    assert telemetry(gpu(backend=backend)) == {}
    assert nvml.handles == []


def test_telemetry_without_a_driver_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(init_fails=True))
    assert telemetry(gpu()) == {}
