from __future__ import annotations

import pytest

from roofline_cli.export.plans import ExportSource, Itl
from tests.cli.export_sources import class_plan


def test_the_itl_step_is_the_line() -> None:
    itl = Itl(0.01, 1e-4, 1e-8, 0.1, "n")
    assert itl.step_seconds(10, 1000) == pytest.approx(0.01 + 1e-3 + 1e-4)


@pytest.mark.parametrize(
    ("latency", "bound"), [(96, "latency"), (None, "memory"), (200, "memory"), (300, "memory")]
)
def test_a_plan_says_which_bound_its_max_batch_is(latency: int | None, bound: str) -> None:
    assert class_plan(max_batch_by_latency=latency).bound_by == bound


def test_a_source_lists_models_and_classes_once_in_order() -> None:
    plans = (class_plan(), class_plan(gpu_class="H"), class_plan(model="n"))
    source = ExportSource("x", plans, ())
    assert source.models() == ("m", "n")
    assert source.classes() == ("G", "H")
