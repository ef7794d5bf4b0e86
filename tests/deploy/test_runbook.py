"""Every alert links to a section of docs/runbook.md that exists."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from .rendering import ROOT, RULES_FILE, render_objects, the_one

RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_BASE = "https://github.com/roofline-dev/roofline-operator/blob/main/docs/runbook.md"


def alerts(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for line in markdown.splitlines():
        match = re.match(r"^#{1,6} (.+)$", line)
        if match:
            text = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_every_alert_has_a_runbook_url_that_resolves_to_a_runbook_heading() -> None:
    rules = alerts(yaml.safe_load(RULES_FILE.read_text())["groups"])
    anchors = heading_anchors(RUNBOOK.read_text())
    assert rules
    for rule in rules:
        url = rule["annotations"].get("runbook_url")
        assert url, f"{rule['alert']} has no runbook_url"
        base, _, anchor = url.partition("#")
        assert base == RUNBOOK_BASE
        assert anchor in anchors, f"{rule['alert']}: no heading #{anchor} in docs/runbook.md"
        assert anchor == rule["alert"].lower(), "each alert links to its own section"


def test_a_missing_heading_would_be_noticed() -> None:
    assert "rooflineprofilefailed" in heading_anchors(RUNBOOK.read_text())
    assert "rooflinenosuchalert" not in heading_anchors(RUNBOOK.read_text())


@pytest.mark.parametrize("base", [None, "https://wiki.example.com/gpu/roofline-runbook"])
def test_the_chart_points_the_runbook_urls_at_its_value(base: str | None) -> None:
    values: dict[str, Any] = {"prometheusRule": {"enabled": True}}
    if base is not None:
        values["prometheusRule"]["runbookBaseUrl"] = base
    rule = the_one(render_objects(values), "PrometheusRule")
    for alert in alerts(rule["spec"]["groups"]):
        expected = f"{base or RUNBOOK_BASE}#{alert['alert'].lower()}"
        assert alert["annotations"]["runbook_url"] == expected


def test_the_failure_alert_points_at_the_nodes_status_message() -> None:
    (failed,) = [
        r
        for r in alerts(yaml.safe_load(RULES_FILE.read_text())["groups"])
        if r["alert"] == "RooflineProfileFailed"
    ]
    assert "status.nodes[?(@.name==" in failed["annotations"]["description"]
    assert "].message" in failed["annotations"]["description"]
