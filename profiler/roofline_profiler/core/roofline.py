"""The roofline model applied to a decode-step GEMM.

Roofline model: S. Williams, A. Waterman, D. Patterson, "Roofline: An Insightful Visual Performance
Model for Multicore Architectures", CACM 52(4), 2009. Attainable FLOP/s at arithmetic intensity I
(FLOPs per byte of memory traffic) is ``min(peak, I * bandwidth)``; the two ceilings meet at the
ridge point ``peak / bandwidth``.

A decode step multiplies a K×N weight by B token vectors: ``2·B·K·N`` FLOPs while it reads the
weight (K·N elements) and the activations (B·K) and writes the output (B·N). Because the weight
dominates the traffic for small B, the intensity is about B FLOPs per 2-byte element: decode is
bandwidth-bound until B approaches the ridge point.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math

from roofline_profiler.core.limits import DTYPE_BYTES


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of ``dtype`` (a canonical name of :data:`limits.DTYPE_BYTES`)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})") from None


def decode_gemm_flops(batch: int, k: int, n: int) -> float:
    """FLOPs of a (B×K)·(K×N) product: one multiply and one add per output element and k."""
    return 2.0 * batch * k * n


def decode_gemm_bytes(
    batch: int, k: int, n: int, element_bytes: float, activation_bytes: float | None = None
) -> float:
    """Minimum memory traffic of the product: the weight and the input read, the output written.

    ``element_bytes`` are the bytes of one weight; the input and output elements take
    ``activation_bytes`` each, the same unless given (a quantized weight format stores a weight in
    a fraction of a byte, scales included, while the activations stay 16-bit)."""
    activation = element_bytes if activation_bytes is None else activation_bytes
    return float(element_bytes) * k * n + float(activation) * (batch * k + batch * n)


def arithmetic_intensity(
    batch: int, k: int, n: int, element_bytes: float, activation_bytes: float | None = None
) -> float:
    """FLOPs per byte of the decode GEMM, from the actual traffic (weight + input + output)."""
    return decode_gemm_flops(batch, k, n) / decode_gemm_bytes(
        batch, k, n, element_bytes, activation_bytes
    )


def ridge_point(peak_flops_per_second: float, bandwidth_bytes_per_second: float) -> float:
    """Arithmetic intensity (FLOP/byte) where the bandwidth slope meets the compute ceiling."""
    if peak_flops_per_second <= 0 or bandwidth_bytes_per_second <= 0:
        raise ValueError("peak and bandwidth must be positive")
    return peak_flops_per_second / bandwidth_bytes_per_second


def roofline_bound(
    intensity: float, peak_flops_per_second: float, bandwidth_bytes_per_second: float
) -> float:
    """Attainable FLOP/s at ``intensity`` under the two ceilings."""
    return min(peak_flops_per_second, intensity * bandwidth_bytes_per_second)


def batch_for_intensity(
    target: float, k: int, n: int, element_bytes: float, activation_bytes: float | None = None
) -> int | None:
    """Smallest batch B whose decode-GEMM intensity reaches ``target`` FLOP/byte.

    With ``s`` the bytes of a weight and ``a`` those of an activation (``s`` unless given),
    solving ``2BKN >= t·(s·KN + a·B(K+N))`` for B gives ``B >= t·s·KN / (2KN - t·a·(K+N))``.
    Returns None when the shape can never reach the target (intensity tends to
    ``2KN / (a(K+N))`` as B grows).
    """
    if target <= 0:
        return 1
    activation = element_bytes if activation_bytes is None else activation_bytes
    denominator = 2.0 * k * n - target * activation * (k + n)
    if denominator <= 0:
        return None
    exact = target * element_bytes * k * n / denominator
    batch = max(1, math.ceil(exact - 1e-9))

    def intensity(b: int) -> float:
        return arithmetic_intensity(b, k, n, element_bytes, activation_bytes)

    # Guard against floating-point rounding in either direction.
    while batch > 1 and intensity(batch - 1) >= target:
        batch -= 1
    while intensity(batch) < target:
        batch += 1
    return batch
