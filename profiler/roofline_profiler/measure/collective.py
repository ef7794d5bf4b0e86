"""Time the all-reduce a tensor-parallel decoder runs twice per layer, among real processes.

Megatron-style tensor parallelism (what vLLM, SGLang, TGI and TensorRT-LLM run) sums the partial
outputs of the row-parallel o and down projections across the group: one all-reduce of a
``[batch, hidden]`` activation each, per layer. The time is measured with ``torch.distributed``
among ``world_size`` processes on this node: NCCL across that many visible GPUs, or gloo between
CPU processes (which is also how the timing path is tested without GPUs).

When fewer devices are visible than the group needs, :func:`modelled_all_reduce_seconds` gives a
lower bound instead — a ring all-reduce moves ``2·(N−1)/N`` of the buffer through each device's
links, taken at the device's measured memory bandwidth (no link is faster than the memory it
feeds) — and the plan flags it as modelled.
"""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from roofline_profiler.measure.devices import DTYPES

#: Runs per batch after the warm-up; all-reduces of decode activations take micro- to
#: milliseconds, so this stays well under a second per batch.
RUNS = 20
WARMUP_RUNS = 5
JOIN_TIMEOUT_SECONDS = 120.0


def modelled_all_reduce_seconds(
    batch: int, hidden: int, element_bytes: int, world_size: int, bandwidth: float
) -> float:
    """Ring all-reduce lower bound: ``2·(N−1)/N · B·H·bytes`` at the device's bandwidth."""
    if world_size < 2:
        return 0.0
    return 2.0 * (world_size - 1) / world_size * batch * hidden * element_bytes / bandwidth


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(
    rank: int,
    world_size: int,
    backend: str,
    port: int,
    hidden: int,
    batches: Sequence[int],
    dtype: str,
    results: mp.Queue,
) -> None:
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        else:
            device = torch.device("cpu")
        medians = []
        for batch in batches:
            x = torch.randn(batch, hidden, device=device).to(DTYPES[dtype])
            for _ in range(WARMUP_RUNS):
                dist.all_reduce(x)
            times = []
            for _ in range(RUNS):
                dist.barrier()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                start = time.perf_counter()
                dist.all_reduce(x)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                times.append(time.perf_counter() - start)
            medians.append((batch, tuple(times)))
        if rank == 0:
            results.put(medians)
    finally:
        dist.destroy_process_group()


def measure_all_reduce(
    backend: str, world_size: int, hidden: int, batches: Sequence[int], dtype: str
) -> list[tuple[int, tuple[float, ...]]]:
    """All-reduce times of a ``[batch, hidden]`` tensor among ``world_size`` processes, per batch
    (rank 0's samples; every rank waits at a barrier before each run)."""
    if backend == "gloo" and dtype != "float32":
        dtype = "float32"  # gloo sums half precision slowly on CPUs; fp32 bytes bound it from above
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = _free_port()
    processes = [
        context.Process(
            target=_worker,
            args=(rank, world_size, backend, port, hidden, tuple(batches), dtype, queue),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    for p in processes:
        p.start()
    try:
        medians: list[tuple[int, tuple[float, ...]]] = queue.get(timeout=JOIN_TIMEOUT_SECONDS)
    finally:
        for p in processes:
            p.join(timeout=JOIN_TIMEOUT_SECONDS)
            if p.is_alive():
                p.terminate()
    failed = [p.exitcode for p in processes if p.exitcode not in (0, None)]
    if failed:
        raise RuntimeError(f"an all-reduce worker exited with status {failed[0]}")
    return medians


def median(times: Sequence[float]) -> float:
    return float(statistics.median(times))
