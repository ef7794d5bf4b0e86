"""Every metric the alerts and the dashboard read is one that something really exposes.

The operator's names come from a scrape of its own metric registry, filled with one profile, so
a renamed or dropped metric fails here rather than as a silent, empty panel or an alert that
can never fire. The per-model series (``roofline_model_*``) are taken from the "Model plans"
section of docs/contracts.md with the labels it documents, until the operator's registry exposes
them; from then on the registry's labels must be the documented ones.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from roofline_operator.decide.peers import Spread, Standing
from roofline_operator.run.format_metrics import FormatRooflineSample
from roofline_operator.run.metrics import DeviceSample, NodeSample, OperatorMetrics, ProfileSnapshot
from roofline_operator.run.model_metrics import FormatSample
from roofline_operator.run.peer_metrics import PeerSample
from roofline_profiler.core.weight_formats import FAMILIES, KV_CACHE_DTYPES
from tests.profiler.format_builders import compact_format
from tests.profiler.headline_builders import headline_numbers

from .promql import grouping_labels, metric_names, selector_labels
from .rendering import DASHBOARD_FILE, ROOT, RULES_FILE

#: Serving-engine and kube-state-metrics series the batch rules join (see docs/deploy.md).
EXTERNAL_METRICS = frozenset(
    {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "tgi_batch_current_size",
        "tgi_queue_size",
        "trtllm_num_requests_running",
        "trtllm_num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "kube_pod_info",
        # The live decode step and context of each engine (the plan-drift rules).
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:request_prompt_tokens_sum",
        "vllm:request_prompt_tokens_count",
        "vllm:request_generation_tokens_sum",
        "sglang:inter_token_latency_seconds_bucket",
        "sglang:decode_sum_seq_lens",
        "tgi_batch_inference_duration_sum",
        "tgi_batch_inference_duration_count",
        "tgi_request_input_length_sum",
        "tgi_request_input_length_count",
        "tgi_request_generated_tokens_sum",
        "trtllm_iteration_latency_seconds",
        "trtllm_num_context_requests",
        "trtllm_kv_cache_used_blocks",
        "trtllm_kv_cache_tokens_per_block",
        # Whether each engine makes progress (RooflineEngineStalled).
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
    }
)
_PRINTF_QUERY = re.compile(r'printf\s+"((?:\\.|[^"\\])*)"')
_LABEL_VALUES = re.compile(r"^\s*label_values\((?P<expr>.*),\s*(?P<label>\w+)\s*\)\s*$")


def scrape_operator() -> dict[str, set[str]]:
    """Sample names the operator exposes, each with its label names, from its registry."""
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.collector.update(
        ProfileSnapshot(
            profile="fleet",
            devices=(
                DeviceSample(
                    node="gpu-a",
                    gpu="0",
                    product="NVIDIA H200",
                    dtype="bfloat16",
                    numbers=headline_numbers(
                        4.3e12,
                        7.8e14,
                        181.0,
                        64,
                        ((4.2e12, 4.4e12), (7.7e14, 7.9e14), (178, 184), (64, 64)),
                    ),
                    step_seconds=((1, 3.1e-5), (64, 3.3e-5)),
                ),
            ),
            nodes=(NodeSample("gpu-a", 1.7e9, 42.0, failed=False),),
            counts={"matched": 1, "profiled": 1, "failed": 0, "pending": 0},
            peers=(
                PeerSample(
                    Standing(
                        "gpu-a",
                        "NVIDIA H200",
                        {q: Spread(0.8, 0.78, 0.82) for q in ("bandwidth", "peak", "ridge point")},
                        ("bandwidth",),
                    )
                ),
            ),
            formats=(FormatSample("Llama-3.1-8B-Instruct", "awq-int4", "fp8"),),
            weight_formats=(
                FormatRooflineSample(
                    "gpu-a", "0", "NVIDIA H200", "bfloat16", compact_format("awq-int4-g128")
                ),
            ),
        )
    )
    metrics.pods_launched.labels(profile="fleet").inc()
    metrics.failures.labels(profile="fleet", reason="PodFailed").inc()
    metrics.reconcile_errors.labels(profile="fleet").inc()
    metrics.device_changes.labels(profile="fleet", quantity="bandwidth").inc()
    metrics.held_back.labels(profile="fleet").inc()
    metrics.foreign_pods.labels(profile="fleet").inc()
    exposed: dict[str, set[str]] = {}
    text = generate_latest(metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exposed.setdefault(sample.name, set()).update(sample.labels)
    return exposed


def contract_metric_names() -> set[str]:
    """The operator metrics docs/contracts.md promises."""
    text = (ROOT / "docs" / "contracts.md").read_text()
    section = text.split("## Operator metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `(roofline_[a-z_]+)`", section, re.MULTILINE))


#: Labels every per-model series carries (docs/contracts.md, "Model plans").
MODEL_LABELS = frozenset({"profile", "node", "gpu", "product", "dtype", "model"})
_MODEL_METRIC = re.compile(
    r"^- `(roofline_model_[a-z_]+)`(?: \(extra label `(\w+)`)?", re.MULTILINE
)


def contract_model_metrics() -> dict[str, set[str]]:
    """The per-node model metrics docs/contracts.md promises (the list after the paragraph
    that names their labels), each with its label names."""
    blocks = model_metrics_section().split("\n\n")
    assert all(f"`{label}`" in blocks[1] for label in MODEL_LABELS)
    return {
        name: set(MODEL_LABELS) | ({extra} if extra else set())
        for name, extra in _MODEL_METRIC.findall(blocks[2])
    }


def model_metrics_section() -> str:
    text = (ROOT / "docs" / "contracts.md").read_text()
    section = text.split("## Model plans", 1)[1].split("\n## ", 1)[0]
    return section.split("### Metrics", 1)[1].split("\n### ", 1)[0]


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES_FILE.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def recorded_names() -> set[str]:
    return {rule["record"] for rule in rules() if "record" in rule}


def annotation_queries(rule: dict[str, Any]) -> list[str]:
    """PromQL inside the annotation templates (`printf "..." | query`)."""
    queries = []
    for text in rule.get("annotations", {}).values():
        for template in _PRINTF_QUERY.findall(text):
            queries.append(template.replace("%q", '"x"').replace('\\"', '"'))
    return queries


def rule_expressions() -> list[str]:
    return [expr for rule in rules() for expr in [rule["expr"], *annotation_queries(rule)]]


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["definition"])
            assert match, variable["definition"]
            exprs.append(match["expr"])
    return exprs


EXPOSED = scrape_operator()
MODEL_METRICS = contract_model_metrics()
#: What the rules and the dashboard may read from the operator: its registry, plus the
#: contracted per-model series it does not expose yet.
AVAILABLE = {**MODEL_METRICS, **EXPOSED}


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(rule_expressions, id="rules"),
        pytest.param(dashboard_expressions, id="dashboard"),
    ],
)
def test_every_metric_read_is_exposed_recorded_or_a_known_engine_metric(source: Any) -> None:
    known = set(AVAILABLE) | recorded_names() | EXTERNAL_METRICS
    used = {name for expr in source() for name in metric_names(expr)}
    assert used, "no metric names found"
    assert used <= known, sorted(used - known)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(rule_expressions, id="rules"),
        pytest.param(dashboard_expressions, id="dashboard"),
    ],
)
def test_operator_metrics_are_selected_only_by_labels_they_carry(source: Any) -> None:
    for expr in source():
        for metric, labels in selector_labels(expr).items():
            if metric in AVAILABLE:
                assert labels <= AVAILABLE[metric], (expr, labels - AVAILABLE[metric])
        names = metric_names(expr)
        if names and names <= set(AVAILABLE):
            carried = set.union(*(AVAILABLE[name] for name in names))
            assert grouping_labels(expr) <= carried, (expr, grouping_labels(expr) - carried)


def test_the_dashboard_variables_read_labels_the_operator_exposes() -> None:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = _LABEL_VALUES.match(variable["definition"])
        assert match
        (metric,) = metric_names(match["expr"])
        carried = AVAILABLE.get(metric) or {"namespace", "pod", "node", "engine", "model_name"}
        assert match["label"] in carried, variable["definition"]


def test_the_rules_read_every_operator_metric_they_alert_on() -> None:
    used = {name for expr in rule_expressions() for name in metric_names(expr)}
    assert {
        "roofline_recommended_min_batch",
        "roofline_memory_bandwidth_bytes_per_second",
        "roofline_peak_flops_per_second",
        "roofline_node_profile_failed",
        "roofline_profile_timestamp_seconds",
        "roofline_model_recommended_min_batch",
        "roofline_model_max_batch",
    } <= used


def test_the_contract_names_the_model_metrics_and_their_extra_labels() -> None:
    extra = {name: labels - MODEL_LABELS for name, labels in MODEL_METRICS.items()}
    assert extra == {
        "roofline_model_recommended_min_batch": set(),
        "roofline_model_max_batch": {"bound"},
        "roofline_model_tokens_per_second": {"range_end"},
        "roofline_model_step_seconds": {"batch"},
        "roofline_model_itl_intercept_seconds": set(),
        "roofline_model_itl_per_sequence_seconds": set(),
        "roofline_model_itl_per_sequence_context_token_seconds": set(),
        "roofline_model_max_requests_per_second": {"limited_by"},
    }


def test_model_metrics_the_operator_exposes_carry_the_contracts_labels() -> None:
    for name, labels in MODEL_METRICS.items():
        if name in EXPOSED:
            assert EXPOSED[name] == labels, name


def test_the_operator_exposes_the_metrics_the_contract_names() -> None:
    assert contract_metric_names() <= set(EXPOSED)


def test_the_contract_names_the_per_profile_format_info_and_its_bounded_labels() -> None:
    """Not a per-node gauge: one series per model of a profile, its label values a fixed set."""
    blocks = model_metrics_section().split("\n\n")
    (intro,) = [b for b in blocks if b.startswith("Per model of a profile")]
    (listed,) = [b for b in blocks if b.startswith("- `roofline_model_format_info`")]
    labels = {"profile", "model", "weight_format", "kv_cache_dtype"}
    assert all(f"`{label}`" in intro for label in labels)
    assert EXPOSED["roofline_model_format_info"] == labels
    for value in (*FAMILIES, "dtype", *KV_CACHE_DTYPES):
        assert f"`{value}`" in listed, value
    assert "roofline_model_format_info" not in MODEL_METRICS
