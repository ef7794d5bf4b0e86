from roofline_profiler.core.errors import first_line


def test_the_first_non_empty_line_is_kept_and_stripped() -> None:
    assert first_line("\n\n  x  \ny", "fallback") == "x"


def test_an_exception_reads_as_its_message() -> None:
    assert first_line(RuntimeError("CUDA out of memory.\nTried to allocate 2 GiB")) == (
        "CUDA out of memory."
    )


def test_nothing_to_say_gives_the_fallback() -> None:
    assert first_line(None, "fallback") == "fallback"
    assert first_line(ValueError(), "ValueError") == "ValueError"


def test_a_long_line_is_cut_to_the_limit() -> None:
    line = first_line("a" * 5000, "", max_chars=300)
    assert len(line) == 300
    assert line.endswith("...")


def test_a_line_keeps_no_control_or_bidi_character() -> None:
    text = "\x1b[1mbold\x1b[0m\t\u202eevil\u200b\x07\r\nsecond line"
    assert first_line(text) == "[1mbold[0m evil"
