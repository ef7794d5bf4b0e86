"""Kueue objects: flavors per measured class, quotas and weight from measured tokens/s."""

from __future__ import annotations

from typing import Any

import pytest

from roofline_cli.export import kueue
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import PROFILE, status_profile


def _documents(**options: Any) -> dict[str, list[dict[str, Any]]]:
    source = source_of_profile(status_profile(), "p")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for _, document in kueue.build(source, ExportOptions(**options)):
        data = plain(document)
        by_kind.setdefault(data["kind"], []).append(data)
    return by_kind


def test_a_flavor_per_measured_class_selects_by_the_operators_labels() -> None:
    flavors = _documents(tokens_per_second=40000)["ResourceFlavor"]
    assert [f["spec"]["nodeLabels"] for f in flavors] == [
        {"roofline.dev/profile": PROFILE, "roofline.dev/min-batch": "64"},
        {"roofline.dev/profile": PROFILE, "roofline.dev/min-batch": "128"},
    ]


def test_quotas_sustain_the_demand_on_each_flavor_fastest_first() -> None:
    documents = _documents(tokens_per_second=40000, utilization=0.75, resource="nvidia.com/gpu")
    (queue,) = documents["ClusterQueue"]
    (group,) = queue["spec"]["resourceGroups"]
    quotas = [(f["name"], f["resources"][0]["nominalQuota"]) for f in group["flavors"]]
    # H100: 104 / 0.049 = 2122 tokens/s per replica → ⌈40000 / (2122 × 0.75)⌉ = 26;
    # L40S: 24 / 0.047 = 510.6 → ⌈40000 / 383⌉ = 105.
    assert quotas == [("roofline-min-batch-128", 26), ("roofline-min-batch-64", 105)]
    assert queue["spec"]["fairSharing"]["weight"] == "25.13"
    assert queue["spec"]["cohortName"] == "roofline"
    (local,) = documents["LocalQueue"]
    assert local["spec"] == {"clusterQueue": queue["metadata"]["name"]}
    assert documents["Cohort"][0]["metadata"]["name"] == "roofline"


def test_without_a_demand_there_is_no_quota() -> None:
    with pytest.raises(kueue.NoDemand, match="--tokens-per-second"):
        _documents()
