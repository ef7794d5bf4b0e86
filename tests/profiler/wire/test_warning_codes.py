"""The warning codes: one name each, and every one fits where the operator reads it."""

import pytest

from roofline_profiler.core import plausibility
from roofline_profiler.core.stats import INTERFERENCE
from roofline_profiler.wire import warning_codes
from roofline_profiler.wire.compact import MAX_WARNING_CHARS

CODES = {
    name: value
    for name, value in vars(warning_codes).items()
    if name.isupper() and isinstance(value, str)
}


def test_every_code_is_a_distinct_name() -> None:
    assert CODES
    assert len(set(CODES.values())) == len(CODES)


@pytest.mark.parametrize("code", sorted(CODES.values()))
def test_every_code_passes_the_operators_reader_whole(code: str) -> None:
    assert plausibility.WARNING_CODE.fullmatch(code)
    assert len(code) <= MAX_WARNING_CHARS


def test_the_operator_holds_back_for_interference_not_for_a_repeatable_defect() -> None:
    assert {
        warning_codes.INTERFERENCE_UNRESOLVED,
        warning_codes.CPU_CONTENTION,
    } == warning_codes.INTERFERENCE_CODES
    assert warning_codes.HOST_STATE_CODE not in warning_codes.INTERFERENCE_CODES


def test_two_host_states_lie_at_least_an_interference_slowdown_apart() -> None:
    assert warning_codes.STATE_GAP == INTERFERENCE
