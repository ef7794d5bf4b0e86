"""Builders of the fleet view's members for the operator's unit tests."""

from __future__ import annotations

from tests.profiler.headline_builders import headline_numbers

from roofline_operator.decide.peers import Member


def member(
    name: str,
    bandwidth: float,
    peak: float = 1e15,
    *,
    uncertainty: float = 0.01,
    gpu_class: str = "NVIDIA H200",
) -> Member:
    """A node of ``gpu_class`` whose numbers carry intervals of ``uncertainty`` either side."""
    ridge = peak / bandwidth

    def around(value: float) -> tuple[float, float]:
        return (value * (1 - uncertainty), value * (1 + uncertainty))

    intervals = [around(bandwidth), around(peak), around(ridge), (8, 8)]
    return Member(name, gpu_class, headline_numbers(bandwidth, peak, ridge, 8, intervals))
