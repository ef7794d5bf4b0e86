"""The PromQL name extraction the metric checks rely on: if it misses names, they prove nothing."""

from __future__ import annotations

import pytest

from .promql import grouping_labels, metric_names, selector_labels


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        pytest.param("up", {"up"}, id="bare-name"),
        pytest.param(
            'roofline_ridge_point{node=~"$node"}', {"roofline_ridge_point"}, id="selector"
        ),
        pytest.param(
            "avg_over_time(vllm:num_requests_running[30m])",
            {"vllm:num_requests_running"},
            id="function-and-range",
        ),
        pytest.param(
            "sum by (namespace, pod) (tgi_queue_size)"
            ' * on (namespace, pod) group_left (node) kube_pod_info{node!=""}',
            {"tgi_queue_size", "kube_pod_info"},
            id="grouping-and-join",
        ),
        pytest.param(
            "time() - roofline_profile_timestamp_seconds > 604800",
            {"roofline_profile_timestamp_seconds"},
            id="scalar-function-and-number",
        ),
        pytest.param(
            "a < on (product, dtype) group_left () 0.85 * quantile by (product) (0.5, b)"
            " and on (product) count by (product) (b) >= 3",
            {"a", "b"},
            id="keywords-and-quantile",
        ),
        pytest.param(
            'label_values(roofline_decode_step_seconds{node="$sweep_node"}, gpu)',
            {"roofline_decode_step_seconds", "gpu"},
            id="grafana-label-values-keeps-the-label-argument",
        ),
        pytest.param(
            'x{a="by (b) {c}"} offset 5m',
            {"x"},
            id="strings-with-syntax-inside",
        ),
    ],
)
def test_metric_names_are_every_selected_series(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_selector_labels_are_read_per_metric() -> None:
    expr = 'a{node=~"$node",gpu="0"} / on (node) b{profile!="x"}'
    assert selector_labels(expr) == {"a": {"node", "gpu"}, "b": {"profile"}}


def test_grouping_labels_come_from_every_clause() -> None:
    expr = "sum by (namespace, pod) (x) * on (namespace) group_left (node) y"
    assert grouping_labels(expr) == {"namespace", "pod"}
