"""The plan under load, drawn: median TTFT and ITL against the request rate."""

from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt

from roofline_profiler.cli.load_plot import has_rates
from roofline_profiler.cli.model_plot import model_figure
from roofline_profiler.cli.plot import roofline_figure
from tests.profiler.cli.load_builders import LOAD, loaded_result
from tests.profiler.synthetic import planned_result


def test_rates_add_a_row_of_ttft_and_itl_against_the_rate_to_both_figures() -> None:
    for figure, panels in (
        (model_figure(loaded_result()), 4),
        (roofline_figure(loaded_result()), 6),
    ):
        try:
            axes = figure.get_axes()
            assert len(axes) == panels
            ttft, itl = axes[-2:]
            assert "TTFT" in ttft.get_title()
            assert "ITL" in itl.get_title()
            (curve,) = [line for line in ttft.get_lines() if line.get_linestyle() == "-"]
            assert list(curve.get_xdata()) == [1.0, 4.0]
            assert 2.5 in [float(line.get_xdata()[0]) for line in ttft.get_lines()
                           if line.get_linestyle() == "--"]  # fmt: skip
            assert 0.1 in [float(line.get_ydata()[0]) for line in itl.get_lines()
                           if line.get_linestyle() == ":"]  # fmt: skip
        finally:
            plt.close(figure)


def test_without_rates_the_figures_keep_their_rows() -> None:
    assert not has_rates(planned_result())
    ladder_only = loaded_result(replace(LOAD, rates=(), max_rate=None))
    assert not has_rates(ladder_only)
    figure = model_figure(ladder_only)
    try:
        assert len(figure.get_axes()) == 2
    finally:
        plt.close(figure)
