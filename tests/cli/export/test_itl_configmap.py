"""The ITL models ConfigMap."""

from __future__ import annotations

import pytest
import yaml

from roofline_cli.export import itl_configmap
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import H100, L40S, status_profile


def test_each_class_carries_its_slowest_nodes_terms_and_the_step_they_give() -> None:
    source = source_of_profile(status_profile(), "p")
    ((_, document),) = itl_configmap.build(source, ExportOptions())
    config = yaml.safe_load(plain(document)["data"][itl_configmap.KEY])
    (model,) = config["models"]
    h100, l40s = model["classes"]
    assert (h100["gpuClass"], h100["measuredOn"]) == (H100, "node gpu-b")
    assert h100["interceptSeconds"] == 0.0131
    assert h100["stepSecondsAtMaxBatch"] == pytest.approx(
        0.0131 + 104 * 2.4e-5 + 104 * 8192 * 3.5e-8, rel=1e-3
    )
    assert l40s["gpuClass"] == L40S
    assert l40s["maxRelativeError"] == 0.12


def test_a_source_without_itl_models_is_refused() -> None:
    source = source_of_profile(status_profile(), "p")
    bare = type(source)(**{**source.__dict__, "plans": tuple(
        type(p)(**{**p.__dict__, "itl": None}) for p in source.plans
    )})  # fmt: skip
    with pytest.raises(itl_configmap.NoItlModel):
        itl_configmap.build(bare, ExportOptions())
