"""The host's compute level over time: one `torch.mm` timed back to back, summarized per window.

The profiler's peak is a confirmed best (the second-fastest trial of a workload), so it follows
the fast tail of the matmul's run times. A host that now and then lets the VM run faster (a
sibling hyperthread left idle, a turbo bin, a neighbour's quiet spell) moves that tail while the
median stays put, and a profile that falls in such a spell publishes a higher peak with nothing
in its own rounds to tell. This probe shows whether a machine does that: per window of
``--window`` seconds, the median, 90th percentile and fastest rate of an ``n``³ matmul, for
``--seconds`` seconds, with the CPU model and date.

    python bench/compute_probe.py [--seconds 60] [--window 2] [--size 1024] [--threads N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time

import torch

from flag_types import positive_int
from profiler_vs_references import cpu_model


def window_rates(a: torch.Tensor, b: torch.Tensor, seconds: float) -> list[float]:
    """GFLOP/s of every matmul run back to back for ``seconds``, fastest last."""
    flops = 2 * a.shape[0] * a.shape[1] * b.shape[1]
    rates = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        began = time.perf_counter()
        torch.mm(a, b)
        rates.append(flops / (time.perf_counter() - began) / 1e9)
    return sorted(rates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=positive_int, default=60)
    parser.add_argument("--window", type=positive_int, default=2, help="seconds per line")
    parser.add_argument("--size", type=positive_int, default=1024, help="n of the n³ matmul")
    parser.add_argument("--threads", type=positive_int, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    a, b = torch.randn(args.size, args.size), torch.randn(args.size, args.size)
    window_rates(a, b, 1.0)  # warm-up
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{cpu_model()}; {torch.get_num_threads()} torch threads; mm {args.size}³; {now}")
    print("   t (s)  runs  median  p90  fastest  (GFLOP/s)")
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        rates = window_rates(a, b, args.window)
        p90 = rates[int(0.9 * (len(rates) - 1))]
        elapsed = time.perf_counter() - started
        print(
            f"{elapsed:8.1f}  {len(rates):4d}  {statistics.median(rates):6.1f}  {p90:5.1f}  "
            f"{rates[-1]:6.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
