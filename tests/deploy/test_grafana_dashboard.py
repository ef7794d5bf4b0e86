"""The Grafana dashboard: portable (datasource variable), complete, and laid out without overlap."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .promql import metric_names
from .rendering import DASHBOARD_FILE, render_objects

DASHBOARD: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text())
PANELS = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
VARIABLES = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
_VARIABLE_USE = re.compile(r"\$\{?(\w+)")
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__name"}


def panel_metrics(panel: dict[str, Any]) -> set[str]:
    return {name for t in panel["targets"] for name in metric_names(t["expr"])}


def panels_reading(metric: str) -> list[dict[str, Any]]:
    return [p for p in PANELS if metric in panel_metrics(p)]


def test_the_datasource_is_a_prometheus_template_variable() -> None:
    datasource = VARIABLES["datasource"]
    assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus")


def test_every_panel_and_query_uses_the_datasource_variable() -> None:
    expected = {"type": "prometheus", "uid": "${datasource}"}
    for panel in PANELS:
        assert panel["datasource"] == expected, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == expected, panel["title"]
    for variable in VARIABLES.values():
        if variable["type"] == "query":
            assert variable["datasource"] == expected, variable["name"]


def test_every_variable_a_query_uses_is_defined() -> None:
    texts = [t["expr"] for p in PANELS for t in p["targets"]]
    texts += [v["definition"] for v in VARIABLES.values() if v["type"] == "query"]
    for text in texts:
        used = set(_VARIABLE_USE.findall(text)) - GRAFANA_BUILTINS
        assert used <= set(VARIABLES), (text, used - set(VARIABLES))


def test_panel_ids_are_unique_and_the_uid_is_stable() -> None:
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    assert DASHBOARD["uid"] == "roofline-operator"


def test_panels_do_not_overlap_on_the_grid() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


@pytest.mark.parametrize(
    "metric",
    [
        "roofline_memory_bandwidth_bytes_per_second",
        "roofline_peak_flops_per_second",
        "roofline_ridge_point",
        "roofline_recommended_min_batch",
    ],
)
def test_per_node_roofline_numbers_are_tabulated(metric: str) -> None:
    tables = [p for p in panels_reading(metric) if p["type"] == "table"]
    assert tables, metric
    assert any("node" in p["transformations"][1]["options"]["indexByName"] for p in tables)


def test_the_batch_fill_ratio_is_shown_per_serving_pod_and_per_node() -> None:
    fill = "node_namespace_pod:roofline_serving_batch_fill_ratio:avg_over_time"
    panels = panels_reading(fill)
    legends = {t["legendFormat"] for p in panels for t in p["targets"]}
    assert any("{{pod}}" in legend for legend in legends)
    assert any("avg by (node)" in t["expr"] for p in panels for t in p["targets"]), (
        "no per-node fill ratio"
    )
    for panel in panels:
        assert panel["fieldConfig"]["defaults"]["unit"] == "percentunit"


def test_the_sweep_shows_step_time_and_per_token_time_against_batch() -> None:
    panels = panels_reading("roofline_decode_step_seconds")
    assert len(panels) == 2
    for panel in panels:
        assert panel["options"]["xField"] == "batch"
        assert panel["targets"][0]["format"] == "table"
    per_token = [
        t["options"]["binary"]
        for p in panels
        for t in p.get("transformations", [])
        if t["id"] == "calculateField"
    ]
    assert per_token == [{"left": "Value", "operator": "/", "right": "batch"}]


def test_the_fleet_distribution_of_ridge_points_is_a_histogram() -> None:
    histograms = [p for p in panels_reading("roofline_ridge_point") if p["type"] == "histogram"]
    assert histograms
    assert all(t["instant"] for p in histograms for t in p["targets"])


def test_the_chart_ships_the_dashboard_unchanged() -> None:
    (config_map,) = [
        o
        for o in render_objects({"grafanaDashboard": {"enabled": True}})
        if o["kind"] == "ConfigMap"
    ]
    assert json.loads(config_map["data"]["roofline-dashboard.json"]) == DASHBOARD


def test_a_single_model_variable_lists_the_planned_models() -> None:
    model = VARIABLES["model"]
    assert model["definition"].startswith("label_values(roofline_model_recommended_min_batch")
    assert model["definition"].endswith(", model)")
    assert not model["multi"]


@pytest.mark.parametrize(
    "metric",
    [
        "roofline_model_recommended_min_batch",
        "roofline_model_max_batch",
        "roofline_model_tokens_per_second",
        "roofline_model_step_seconds",
    ],
)
def test_every_model_metric_is_shown_for_the_selected_model(metric: str) -> None:
    panels = panels_reading(metric)
    assert panels, metric
    for panel in panels:
        for target in panel["targets"]:
            if metric in metric_names(target["expr"]):
                assert 'model="$model"' in target["expr"], (panel["title"], target["expr"])


def test_the_plan_table_shows_min_and_both_maxima_per_node() -> None:
    (table,) = [p for p in panels_reading("roofline_model_max_batch") if p["type"] == "table"]
    exprs = [t["expr"] for t in table["targets"]]
    assert any("roofline_model_recommended_min_batch" in e for e in exprs)
    assert any('bound="memory"' in e for e in exprs)
    assert any('bound="latency"' in e for e in exprs)
    assert all("by (profile, node, model)" in e for e in exprs)
    assert table["transformations"][1]["options"]["indexByName"]["node"] == 0


def test_the_predicted_step_time_is_plotted_against_batch() -> None:
    (panel,) = panels_reading("roofline_model_step_seconds")
    assert panel["options"]["xField"] == "batch"
    assert panel["targets"][0]["format"] == "table"
    assert panel["fieldConfig"]["defaults"]["unit"] == "s"


def test_each_nodes_bandwidth_and_peak_are_shown_against_its_class_median() -> None:
    (panel,) = panels_reading("roofline_node_relative_performance")
    (target,) = panel["targets"]
    assert 'quantity=~"bandwidth|peak"' in target["expr"]
    assert "{{node}}" in target["legendFormat"]
    assert "{{gpu_class}}" in target["legendFormat"]
    defaults = panel["fieldConfig"]["defaults"]
    assert defaults["unit"] == "percentunit"
    steps = [s["value"] for s in defaults["thresholds"]["steps"]]
    assert 0.9 in steps, "the default outlier threshold is marked"


def test_predicted_and_live_itl_are_plotted_together_with_their_ratio() -> None:
    (panel,) = panels_reading("roofline:model_itl_predicted_seconds")
    assert panel_metrics(panel) == {
        "roofline:serving_itl_seconds",
        "roofline:model_itl_predicted_seconds",
    }
    assert panel["fieldConfig"]["defaults"]["unit"] == "s"
    assert all('model="$model"' in t["expr"] for t in panel["targets"])
    (ratio,) = panels_reading("roofline:model_itl_ratio")
    steps = [s["value"] for s in ratio["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert 1.3 in steps, "the alert's default threshold is drawn"
