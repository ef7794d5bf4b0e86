import warnings

import pytest
import torch

from roofline_profiler.measure.devices import (
    DeviceError,
    DeviceInfo,
    default_dtype,
    resolve_devices,
)


def test_the_cpu_is_described_with_its_cache_and_memory() -> None:
    (cpu,) = resolve_devices("cpu")
    assert cpu.backend == "cpu"
    assert cpu.device == torch.device("cpu")
    assert cpu.cache_bytes >= 1 << 20
    assert cpu.memory_bytes is None or cpu.memory_bytes > 1 << 30
    assert cpu.name


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_all_falls_back_to_the_cpu_without_a_gpu() -> None:
    assert [d.backend for d in resolve_devices("all")] in (["cpu"], ["mps"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_gpu_that_is_not_there_is_bad_input() -> None:
    with pytest.raises(DeviceError, match="not available"):
        resolve_devices("cuda:3")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_missing_gpu_names_what_keeps_it_from_a_container() -> None:
    """A pod given a GPU that sees none fails with the causes to check, never the CPU's numbers."""
    with pytest.raises(DeviceError, match="runtime class") as refused:
        resolve_devices("cuda")
    assert "device plugin" in str(refused.value)
    assert "driver" in str(refused.value)


def test_torchs_own_reason_for_no_gpu_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_old() -> bool:
        warnings.warn(
            "CUDA initialization: The NVIDIA driver on your system is too old", stacklevel=1
        )
        return False

    monkeypatch.setattr(torch.version, "cuda", "12.6")
    monkeypatch.setattr(torch.cuda, "is_available", too_old)
    with pytest.raises(DeviceError, match="driver on your system is too old"):
        resolve_devices("cuda")


@pytest.mark.parametrize("spec", ["tpu", "cpu:1", "cuda:-1", ""])
def test_malformed_device_names_are_bad_input(spec: str) -> None:
    with pytest.raises(DeviceError):
        resolve_devices(spec)


def test_the_cpu_defaults_to_float32() -> None:
    info = DeviceInfo(torch.device("cpu"), 0, "cpu", "cpu", None, 1 << 25)
    assert default_dtype(info) == "float32"
