"""docs/operator.md's metrics table against the metrics the operator registers."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily

from roofline_operator.run.metrics import OperatorMetrics

DOC = Path(__file__).resolve().parents[4] / "docs" / "operator.md"


def documented() -> dict[str, set[str]]:
    """Metric name to its documented labels; ``same`` repeats the labels of the nearest row
    above that spells them out (``same + `batch` `` adds one)."""
    section = DOC.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table: dict[str, set[str]] = {}
    previous: set[str] = set()
    for row in rows:
        names_cell, labels_cell = (cell.strip() for cell in row.strip("|").split("|")[:2])
        labels = set()
        relative = labels_cell.startswith("same")
        if relative:
            labels |= previous
            labels_cell = labels_cell.removeprefix("same").removeprefix(" +")
        # A label's values follow it in parentheses; only the label names count.
        labels |= set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", labels_cell)))
        for name in re.findall(r"`(roofline_[a-z_]+)`", names_cell):
            table[name] = labels
        if not relative:
            previous = labels
    return table


def registered() -> dict[str, set[str]]:
    metrics = OperatorMetrics(CollectorRegistry())
    found: dict[str, set[str]] = {}
    for family in metrics.collector.describe():
        assert isinstance(family, GaugeMetricFamily)
        found[family.name] = set(family._labelnames)
    for counter in vars(metrics).values():
        if isinstance(counter, Counter):
            found[f"{counter._name}_total"] = set(counter._labelnames)
    return found


def test_the_metrics_table_lists_every_registered_metric_and_nothing_else() -> None:
    assert sorted(documented()) == sorted(registered())


def test_the_metrics_table_names_each_metrics_labels() -> None:
    docs, code = documented(), registered()
    wrong = {name: (docs[name], code[name]) for name in code if docs.get(name) != code[name]}
    assert not wrong, f"documented vs registered labels: {wrong}"


def test_a_missing_row_would_be_noticed() -> None:
    assert "roofline_profiles_held_back_total" in documented()
    assert "roofline_model_step_seconds" in documented()
