"""The model plan picture: each plan's predicted inter-token latency and throughput against batch,
with its bounds drawn and named once in the legend (matplotlib's Agg backend)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from roofline_profiler.cli.model_plot import model_figure
from roofline_profiler.cli.outputs import write_figure
from tests.profiler.synthetic import planned_result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KEYS = {"max batch by memory", "max batch by latency", "recommended batch range"}


@pytest.fixture
def figure() -> Iterator[Any]:
    """The picture of the synthetic result's two plans with a 20 ms SLO, closed after the test."""
    fig = model_figure(planned_result(), slo_seconds=0.02)
    yield fig
    plt.close(fig)


def curves(axis: Any) -> list[Any]:
    return [line for line in axis.get_lines() if line.get_marker() == "o"]


def vertical_lines(axis: Any, style: str) -> list[float]:
    return [
        float(line.get_xdata()[0])
        for line in axis.get_lines()
        if line.get_linestyle() == style and line.get_xdata()[0] == line.get_xdata()[1]
    ]


def test_the_model_plot_is_written_as_a_png_and_its_figure_closed(tmp_path: Path) -> None:
    path = tmp_path / "models.png"
    before = plt.get_fignums()
    write_figure(path, model_figure(planned_result(), slo_seconds=0.02))
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert plt.get_fignums() == before


def test_each_plan_is_one_curve_of_latency_and_one_of_throughput(figure: Any) -> None:
    itl, throughput = figure.axes
    plans = planned_result().devices[0].models
    assert len(curves(itl)) == len(curves(throughput)) == len(plans)
    for plan, latency, tokens in zip(plans, curves(itl), curves(throughput), strict=True):
        assert list(latency.get_xdata()) == [p.batch for p in plan.predictions]
        assert list(latency.get_ydata()) == [p.step_seconds for p in plan.predictions]
        assert list(tokens.get_ydata()) == [p.tokens_per_second for p in plan.predictions]
        assert latency.get_label() == f"cuda:0 {plan.name} C={plan.context_tokens}"
    assert all(axis.get_xscale() == axis.get_yscale() == "log" for axis in figure.axes)


def test_the_memory_and_latency_bounds_are_drawn_on_both_panels(figure: Any) -> None:
    memory_bound, latency_bound = 218, 164
    for axis in figure.axes:
        assert vertical_lines(axis, "--") == [memory_bound, memory_bound]
        # The second plan meets its SLO at no batch: it has no latency bound to draw.
        assert vertical_lines(axis, ":") == [latency_bound]


def test_the_slo_is_a_horizontal_line_on_the_latency_panel_only(figure: Any) -> None:
    itl, throughput = figure.axes
    (slo,) = [line for line in itl.get_lines() if line.get_label() == "ITL SLO 20 ms"]
    assert list(slo.get_ydata()) == [0.02, 0.02]
    assert not [line for line in throughput.get_lines() if "SLO" in str(line.get_label())]


def test_without_an_slo_no_slo_line_is_drawn() -> None:
    fig = model_figure(planned_result())
    try:
        assert not [line for line in fig.axes[0].get_lines() if "SLO" in str(line.get_label())]
    finally:
        plt.close(fig)


def test_both_legends_say_what_the_line_styles_and_shading_mean(figure: Any) -> None:
    for axis in figure.axes:
        assert {t.get_text() for t in axis.get_legend().get_texts()} >= KEYS


def test_a_tensor_parallel_plan_says_its_degree() -> None:
    result = planned_result()
    (device,) = result.devices
    plans = (replace(device.models[0], tensor_parallel=2),)
    fig = model_figure(replace(result, devices=(replace(device, models=plans),)))
    try:
        (curve,) = curves(fig.axes[0])
        assert str(curve.get_label()).endswith(" TP2")
    finally:
        plt.close(fig)
