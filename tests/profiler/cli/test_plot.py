"""The roofline picture: the file is written, and each device's roofline, measured sweep and
recommended batch are drawn where the result puts them (matplotlib's Agg backend, no display)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from roofline_profiler.cli.outputs import write_figure
from roofline_profiler.cli.plot import (
    _leading_digit,
    flops_label,
    plain_label,
    roofline_figure,
    seconds_label,
)
from tests.profiler.synthetic import planned_result, synthetic_result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def figure() -> Iterator[Any]:
    """The picture of the one-device synthetic result, closed after the test."""
    fig = roofline_figure(synthetic_result())
    yield fig
    plt.close(fig)


def lines_labelled(axis: Any, suffix: str) -> list[Any]:
    return [line for line in axis.get_lines() if str(line.get_label()).endswith(suffix)]


def test_the_plot_is_written_as_a_png_and_its_figure_closed(tmp_path: Path) -> None:
    path = tmp_path / "roofline.png"
    before = plt.get_fignums()
    write_figure(path, roofline_figure(synthetic_result()))
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert plt.get_fignums() == before


def test_a_result_without_models_has_the_roofline_and_the_time_per_token_side_by_side(
    figure: Any,
) -> None:
    roof, per_token = figure.axes
    assert (roof.get_xscale(), roof.get_yscale()) == ("log", "log")
    assert (per_token.get_xscale(), per_token.get_yscale()) == ("log", "log")
    assert roof.get_xlabel() == "arithmetic intensity (FLOP per byte)"
    assert per_token.get_ylabel() == "time per token"
    assert "W 4096×14336" in roof.get_title()


def test_the_roofline_rises_with_the_bandwidth_and_bends_at_the_ridge_point(figure: Any) -> None:
    (d,) = synthetic_result().devices
    roof = figure.axes[0]
    (line,) = lines_labelled(roof, ": roofline")
    xs, ys = line.get_data()
    assert xs[1] == pytest.approx(d.ridge_point)
    assert ys[0] == pytest.approx(xs[0] * d.bandwidth_bytes_per_second)
    assert list(ys[1:]) == pytest.approx([d.peak_flops_per_second] * 2)
    assert xs[0] < min(e.point.arithmetic_intensity for e in d.sweep)


def test_every_measured_batch_is_a_point_of_both_panels(figure: Any) -> None:
    (d,) = synthetic_result().devices
    roof, per_token = figure.axes
    (measured,) = lines_labelled(roof, ": measured")
    assert list(measured.get_ydata()) == [e.point.flops_per_second for e in d.sweep]
    (steps,) = [line for line in per_token.get_lines() if line.get_marker() == "o"]
    assert list(steps.get_xdata()) == [e.point.batch for e in d.sweep]
    assert list(steps.get_ydata()) == [e.point.seconds_per_token for e in d.sweep]


def test_the_recommended_min_batch_is_marked_and_named_in_the_legend(figure: Any) -> None:
    (d,) = synthetic_result().devices
    per_token = figure.axes[1]
    (marker,) = lines_labelled(per_token, f"recommended min batch {d.recommended_min_batch}")
    assert list(marker.get_xdata()) == [d.recommended_min_batch] * 2
    legend = {t.get_text() for t in per_token.get_legend().get_texts()}
    assert f"recommended min batch {d.recommended_min_batch}" in legend


def test_each_device_is_drawn_in_its_own_colour() -> None:
    fig = roofline_figure(synthetic_result(devices=2))
    try:
        roofs = lines_labelled(fig.axes[0], ": roofline")
        assert [str(line.get_label()).split()[0] for line in roofs] == ["cuda:0", "cuda:1"]
        assert roofs[0].get_color() != roofs[1].get_color()
    finally:
        plt.close(fig)


def test_a_result_with_model_plans_gets_a_second_row_for_them() -> None:
    fig = roofline_figure(planned_result())
    try:
        assert len(fig.axes) == 4
        assert fig.axes[2].get_title() == "Predicted inter-token latency"
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    ("label", "value", "text"),
    [
        pytest.param(flops_label, 4e14, "400 TFLOP/s", id="flops"),
        pytest.param(seconds_label, 0.01, "10 ms", id="seconds"),
        pytest.param(plain_label, 5400.0, "5,400", id="plain"),
    ],
)
def test_ticks_read_in_engineering_units(label: Any, value: float, text: str) -> None:
    assert label(value) == text


def test_minor_ticks_are_labelled_at_two_and_five_times_a_decade_only(figure: Any) -> None:
    minor = figure.axes[0].yaxis.get_minor_formatter()
    assert minor(2e14, 0) == "200 TFLOP/s"
    assert minor(5e13, 0) == "50 TFLOP/s"
    assert minor(3e14, 0) == ""
    assert [_leading_digit(v) for v in (0.0, 2e-3, 5.0, 9e14)] == [0, 2, 5, 9]
