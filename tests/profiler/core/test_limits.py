import pytest

from roofline_profiler.core import limits


@pytest.mark.parametrize(
    ("name", "canonical"),
    [("bf16", "bfloat16"), ("FP16", "float16"), ("half", "float16"), ("float32", "float32")],
)
def test_dtype_aliases_are_understood(name: str, canonical: str) -> None:
    assert limits.canonical_dtype(name) == canonical


def test_every_dtype_name_has_an_element_size_and_every_alias_a_name() -> None:
    assert set(limits.DTYPE_NAMES) == set(limits.DTYPE_BYTES)
    assert set(limits.DTYPE_ALIASES.values()) <= set(limits.DTYPE_NAMES)


def test_an_unknown_dtype_lists_the_known_ones() -> None:
    with pytest.raises(limits.LimitError, match="float32, float16, bfloat16"):
        limits.canonical_dtype("int4")


@pytest.mark.parametrize("text", ["4096x14336", " 4096 X 14336 ", "4096×14336"])
def test_a_shape_is_read_in_its_usual_spellings(text: str) -> None:
    assert limits.parse_shape(text) == (4096, 14336)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("4096", "not of the form KxN"),
        ("0x14336", "K and N must lie in 1..1048576"),
        (f"{limits.MAX_DIMENSION + 1}x1", "K and N must lie"),
    ],
)
def test_a_bad_shape_says_why_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(limits.LimitError, match=reason):
        limits.parse_shape(text)


def test_batches_come_back_sorted_without_repeats() -> None:
    assert limits.parse_batches("64, 1,8,8") == (1, 8, 64)
    assert limits.check_batches([limits.MAX_BATCH, limits.MIN_BATCH]) == (1, 65536)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "comma-separated list"),
        ("1,,2", "comma-separated list"),
        ("1,two", "'two' is not an integer"),
        ("1,0", "0 is not a batch size in 1..65536"),
        ("65537", "65537 is not a batch size"),
    ],
)
def test_bad_batches_say_why_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(limits.LimitError, match=reason):
        limits.parse_batches(text)


def test_the_defaults_lie_within_the_limits() -> None:
    assert limits.check_batches(limits.DEFAULT_BATCHES) == limits.DEFAULT_BATCHES
    assert limits.check_shape(*limits.DEFAULT_SHAPE) == limits.DEFAULT_SHAPE
    percent = limits.DEFAULT_MIN_BATCH_EFFICIENCY_PERCENT
    assert limits.check_efficiency_percent(percent) == percent


@pytest.mark.parametrize(("text", "reason"), [("0", "must lie in 1..100"), ("half", "percent")])
def test_an_efficiency_outside_one_to_a_hundred_percent_is_refused(text: str, reason: str) -> None:
    with pytest.raises(limits.LimitError, match=reason):
        limits.parse_efficiency_percent(text)
