import re

from roofline_profiler.cli.report import markdown_report, text_summary
from tests.profiler.synthetic import synthetic_result


def test_the_summary_gives_every_headline_number_with_its_interval_and_kernel() -> None:
    text = text_summary(synthetic_result())
    for key in ("read bandwidth", "copy bandwidth", "peak matrix", "ridge point"):
        (line,) = [row for row in text.splitlines() if row.strip().startswith(key)]
        assert re.search(r"\(95% .+ to .+", line), line
    assert "recommended min batch" in text
    assert "mm 8192x8192x8192" in text
    assert "8 interleaved" in text


def test_the_markdown_report_carries_the_same_intervals() -> None:
    report = markdown_report(synthetic_result())
    assert "| ridge point | " in report
    assert report.count("95% ") >= 5


def test_warnings_are_listed_with_their_advice() -> None:
    result = synthetic_result(batches=(1, 2, 4))
    assert "warning MinBatchFromModel" in text_summary(result)
    assert "sweep larger batches" in markdown_report(result)
