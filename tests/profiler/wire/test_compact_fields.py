"""The compact format's fields: numbers in the wire's units, and readers that name what is wrong."""

from collections.abc import Callable

import pytest

from roofline_profiler.core import plausibility
from roofline_profiler.wire.compact_fields import (
    BANDWIDTH_UNIT,
    STEP_UNIT,
    CompactDecodeError,
    bounded_list,
    field,
    in_unit,
    measured,
    steps_to_wire,
    string,
    whole,
)


def test_a_number_travels_in_the_wires_unit_with_four_significant_digits() -> None:
    assert in_unit(4.812345e12, BANDWIDTH_UNIT) == 4812
    assert steps_to_wire([1.2345678e-4, 2e-3]) == [123.5, 2000]


def test_a_measured_number_comes_back_in_base_units() -> None:
    assert measured(123.5, "step", "step times", "device #0", STEP_UNIT) == pytest.approx(1.235e-4)


@pytest.mark.parametrize(
    ("read", "reason"),
    [
        pytest.param(
            lambda: field({}, "g", list, "result"), "result: missing field 'g'", id="missing"
        ),
        pytest.param(
            lambda: field({"b": True}, "b", (int, list), "result"),
            "result: field 'b' has the wrong type",
            id="boolean-for-a-number",
        ),
        pytest.param(
            lambda: whole(0, "min batch", "min batch", "device #1"),
            "device #1: field 'min batch' = 0 is outside",
            id="implausible-integer",
        ),
        pytest.param(
            lambda: measured(float("nan"), "peak", "peak", "device #2"),
            "device #2: field 'peak'",
            id="not-finite",
        ),
        pytest.param(
            lambda: string("no spaces", plausibility.WARNING_CODE, "warning", "device #0 warnings"),
            "device #0 warnings: field 'warning'",
            id="bad-code",
        ),
        pytest.param(
            lambda: bounded_list([1, 2, 3], "b", "result", 2),
            "result: field 'b' has more than 2 entries",
            id="too-many-entries",
        ),
    ],
)
def test_each_reader_names_the_field_and_where_it_sits(
    read: Callable[[], object], reason: str
) -> None:
    with pytest.raises(CompactDecodeError, match=reason) as caught:
        read()
    assert "\n" not in str(caught.value)
