"""The alert rules: promtool-checked and unit-tested, and embedded unchanged by the chart."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .promql import metric_names
from .rendering import (
    CI_VALUES,
    RULE_TESTS,
    RULES_FILE,
    SCENARIOS,
    render_objects,
    scenario_id,
    scenario_values,
    the_one,
)

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not found (Debian/Ubuntu: apt-get install prometheus, or a Prometheus "
    "release tarball)",
)
ENGINES = {"vllm", "sglang", "tgi", "tensorrt-llm"}
MONITORING_VALUES = {"prometheusRule": {"enabled": True}}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=300, check=False
    )


def plain_rules() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RULES_FILE.read_text())
    return loaded


def alerts() -> dict[str, dict[str, Any]]:
    """Alert rules by name, and by ``name/cause`` where one alert has several rules."""
    found: dict[str, dict[str, Any]] = {}
    for group in plain_rules()["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                cause = rule["labels"].get("cause")
                found[f"{rule['alert']}/{cause}" if cause else rule["alert"]] = rule
    return found


def rule_tests() -> list[dict[str, Any]]:
    return [test for path in RULE_TESTS for test in yaml.safe_load(path.read_text())["tests"]]


def alert_cases() -> list[dict[str, Any]]:
    return [case for test in rule_tests() for case in test.get("alert_rule_test", [])]


@needs_promtool
def test_promtool_accepts_the_rules_file() -> None:
    result = promtool("check", "rules", str(RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_of_the_rules_pass() -> None:
    assert RULE_TESTS
    result = promtool("test", "rules", *map(str, RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_fail_when_an_alert_misbehaves(tmp_path: Path) -> None:
    """A guard on the guard: dropping the queue condition must break the unit tests."""
    broken = RULES_FILE.read_text().replace(
        "node_namespace_pod:roofline_serving_waiting_requests:avg_over_time >= 1",
        "node_namespace_pod:roofline_serving_waiting_requests:avg_over_time >= 0",
    )
    assert broken != RULES_FILE.read_text()
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES_FILE.name).write_text(broken)
    (tmp_path / "tests").mkdir()
    for path in RULE_TESTS:
        shutil.copy(path, tmp_path / "tests" / path.name)
    result = promtool("test", "rules", *map(str, sorted((tmp_path / "tests").iterdir())))
    assert result.returncode != 0
    assert "nothing waiting stays silent" in result.stdout + result.stderr


def test_every_alert_is_unit_tested_both_firing_and_silent() -> None:
    cases = alert_cases()
    for key in alerts():
        name, _, cause = key.partition("/")
        mine = [case for case in cases if case["alertname"] == name]
        fired = [a for case in mine for a in case.get("exp_alerts", [])]
        assert any(a["exp_labels"].get("cause", "") == cause for a in fired), f"{key} never fires"
        assert any(not case.get("exp_alerts") for case in mine), f"{key} is never silent"


def test_the_underfilled_alert_uses_the_models_minimum_and_falls_back_to_the_nodes() -> None:
    sources = {
        (alert["exp_labels"]["engine"], alert["exp_labels"]["min_batch_source"])
        for case in alert_cases()
        if case["alertname"] == "RooflineUnderfilledBatch"
        for alert in case.get("exp_alerts", [])
    }
    assert {("vllm", "node"), ("sglang", "model"), ("tensorrt-llm", "model")} <= sources
    assert {("tgi", "node"), ("tensorrt-llm", "node")} <= sources


def test_the_overfilled_alert_fires_for_both_causes_on_vllm_and_sglang() -> None:
    fired = {
        (alert["exp_labels"]["engine"], alert["exp_labels"]["cause"])
        for case in alert_cases()
        if case["alertname"] == "RooflineOverfilledBatch"
        for alert in case.get("exp_alerts", [])
    }
    assert fired == {(e, c) for e in ("vllm", "sglang") for c in ("latency", "kv-cache")}


@needs_promtool
@pytest.mark.parametrize(
    ("original", "broken", "failing_test"),
    [
        pytest.param(
            "node_model:roofline_model_recommended_min_batch:max,",
            "node:roofline_recommended_min_batch:max,",
            "held to its model's minimum",
            id="model-minimum-ignored",
        ),
        pytest.param(
            '"model", "$1", "model_name", "(?:.*/)?([^/]+)"',
            '"model", "$1", "model_name", "(.*)"',
            "held to its model's minimum",
            id="org-prefix-kept",
        ),
        pytest.param(
            "or on (node, namespace, pod, engine)",
            "and on (node, namespace, pod, engine)",
            "falls back to the node minimum",
            id="no-fallback",
        ),
    ],
)
def test_promtool_unit_tests_fail_when_the_model_join_breaks(
    tmp_path: Path, original: str, broken: str, failing_test: str
) -> None:
    """Guards on the guard: each way of losing the per-model minimum breaks a unit test."""
    text = RULES_FILE.read_text()
    assert original in text
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES_FILE.name).write_text(text.replace(original, broken))
    (tmp_path / "tests").mkdir()
    for path in RULE_TESTS:
        shutil.copy(path, tmp_path / "tests" / path.name)
    result = promtool("test", "rules", *map(str, sorted((tmp_path / "tests").iterdir())))
    assert result.returncode != 0
    assert failing_test in result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("original", "broken", "failing_test"),
    [
        pytest.param(
            "histogram_quantile(0.5, sum by (namespace, pod, model_name, le) "
            "(rate(vllm:inter_token_latency_seconds_bucket[5m])))",
            "sum by (namespace, pod, model_name) (rate(vllm:inter_token_latency_seconds_sum[5m]))"
            " / sum by (namespace, pod, model_name) "
            "(rate(vllm:inter_token_latency_seconds_count[5m]))",
            "vLLM: pods decoding as their plan predicts stay silent",
            id="histogram-mean-under-chunked-prefill",
        ),
        pytest.param(
            'tgi_batch_inference_duration_sum{method="decode"}',
            "tgi_batch_inference_duration_sum",
            "TGI: decode-only passes",
            id="tgi-prefill-passes-counted",
        ),
        pytest.param(
            "max by (namespace, pod, model_name) (trtllm_num_context_requests) == 0",
            "max by (namespace, pod, model_name) (trtllm_num_context_requests) >= 0",
            "trtllm-serve: iterations without a context request",
            id="trtllm-prefill-iterations-counted",
        ),
        pytest.param(
            "roofline:serving_context_tokens\n            * on (node, model)",
            "roofline:serving_context_tokens\n            * 0 * on (node, model)",
            "vLLM: pods decoding as their plan predicts stay silent",
            id="context-term-dropped",
        ),
        pytest.param(
            "max by (node, model, profile) (roofline_model_itl_intercept_seconds)",
            "min by (node, model, profile) (roofline_model_itl_intercept_seconds)",
            "vLLM: pods decoding as their plan predicts stay silent",
            id="fastest-gpu-predicts",
        ),
    ],
)
def test_promtool_unit_tests_fail_when_the_drift_rules_read_the_wrong_step(
    tmp_path: Path, original: str, broken: str, failing_test: str
) -> None:
    """Guards on the guard: each way of comparing the plan with the wrong live step (a mean that
    counts prefill, prefill passes, a prediction without the context term or from the fastest
    GPU) breaks a unit test."""
    text = RULES_FILE.read_text()
    assert original in text
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES_FILE.name).write_text(text.replace(original, broken))
    (tmp_path / "tests").mkdir()
    (drift,) = [p for p in RULE_TESTS if p.name == "plan-drift.test.yaml"]
    shutil.copy(drift, tmp_path / "tests" / drift.name)
    result = promtool("test", "rules", str(tmp_path / "tests" / drift.name))
    assert result.returncode != 0
    assert failing_test in result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("original", "broken", "test_file", "failing_test"),
    [
        pytest.param(
            "max by (namespace, pod, model_name) "
            "(last_over_time(roofline:serving_kv_cache_capacity_tokens[1d]))",
            "max by (namespace, pod, model_name) (roofline:serving_kv_cache_capacity_tokens)",
            "plan-drift-held.test.yaml",
            "vLLM: a slow engine whose requests stop finishing keeps firing",
            id="vllm-context-waits-for-a-finished-request",
        ),
        pytest.param(
            'last_over_time(roofline:serving_finished_context_tokens{engine="tgi"}[1h])',
            'roofline:serving_finished_context_tokens{engine="tgi"}',
            "plan-drift-held.test.yaml",
            "TGI: a slow engine whose requests stop finishing",
            id="tgi-context-not-held",
        ),
        pytest.param(
            'last_over_time(roofline:serving_finished_context_tokens{engine="tgi"}[1h])',
            'last_over_time(roofline:serving_finished_context_tokens{engine="tgi"}[1d])',
            "plan-drift-held.test.yaml",
            "TGI: a slow engine whose requests stop finishing",
            id="tgi-context-held-unbounded",
        ),
        pytest.param(
            "on (namespace, pod, engine, model_name) group_left ()",
            "on (namespace, pod, engine) group_left ()",
            "plan-drift-held.test.yaml",
            "many-to-many matching not allowed",
            id="two-models-match-many-to-many",
        ),
        pytest.param(
            "min by (node, model) (max by (node, model, profile)",
            "max by (node, model) (max by (node, model, profile)",
            "plan-drift-held.test.yaml",
            "a second, slower profile of the same model",
            id="slower-profile-hides-drift",
        ),
        pytest.param(
            "roofline:serving_decode_rate == 0",
            "roofline:serving_decode_rate < 0",
            "engine-stalled.test.yaml",
            "Engines that hold running requests and produce no token fire",
            id="stalled-engine-unseen",
        ),
    ],
)
def test_promtool_unit_tests_fail_when_a_slow_or_stalled_engine_goes_unseen(
    tmp_path: Path, original: str, broken: str, test_file: str, failing_test: str
) -> None:
    """Guards on the guard: each way of losing a slow or stalled engine (a context that waits for
    a request to finish, a held context without a bound, a many-to-many match, the slowest of
    two profiles, a stall rule that never fires) breaks a unit test."""
    text = RULES_FILE.read_text()
    assert original in text
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES_FILE.name).write_text(text.replace(original, broken))
    (tmp_path / "tests").mkdir()
    (tests,) = [p for p in RULE_TESTS if p.name == test_file]
    shutil.copy(tests, tmp_path / "tests" / tests.name)
    result = promtool("test", "rules", str(tmp_path / "tests" / tests.name))
    assert result.returncode != 0
    assert failing_test in result.stdout + result.stderr


def test_the_stalled_engine_alert_fires_for_every_engine_with_a_progress_counter() -> None:
    fired = {
        alert["exp_labels"]["engine"]
        for case in alert_cases()
        if case["alertname"] == "RooflineEngineStalled"
        for alert in case.get("exp_alerts", [])
    }
    counted = {
        rule["labels"]["engine"]
        for group in plain_rules()["groups"]
        for rule in group["rules"]
        if rule.get("record") == "roofline:serving_decode_rate"
    }
    assert fired == counted == ENGINES - {"tensorrt-llm"}


def test_the_drift_alert_fires_and_stays_silent_for_every_engine() -> None:
    fired = {
        alert["exp_labels"]["engine"]
        for case in alert_cases()
        if case["alertname"] == "RooflinePlanDrift"
        for alert in case.get("exp_alerts", [])
    }
    assert fired == ENGINES
    ratios = {
        test["name"].split(":")[0]
        for test in rule_tests()
        for case in test.get("promql_expr_test", [])
        if "roofline:model_itl_ratio" in case["expr"] and case["exp_samples"]
    }
    assert ratios == {"vLLM", "SGLang", "TGI", "trtllm-serve"}


def test_the_underfilled_alert_fires_and_stays_silent_for_every_engine() -> None:
    fired = {
        alert["exp_labels"]["engine"]
        for case in alert_cases()
        if case["alertname"] == "RooflineUnderfilledBatch"
        for alert in case.get("exp_alerts", [])
    }
    assert fired == ENGINES
    silent_tests = [
        test
        for test in rule_tests()
        if any(
            c["alertname"] == "RooflineUnderfilledBatch" and not c.get("exp_alerts")
            for c in test.get("alert_rule_test", [])
        )
    ]
    engines_fed = {
        engine
        for test in silent_tests
        for engine in ENGINES
        if all(
            any(series["series"].startswith(metric) for series in test["input_series"])
            for metric in engine_metrics(engine)
        )
    }
    assert engines_fed == ENGINES


BATCH_RECORDS = (
    "node_namespace_pod:roofline_serving_running_requests:sum",
    "node_namespace_pod:roofline_serving_waiting_requests:sum",
)


def engine_metrics(engine: str) -> tuple[str, str]:
    """(running, waiting) metric names of an engine, as the recording rules read them."""
    found = []
    for group in plain_rules()["groups"]:
        for rule in group["rules"]:
            if rule.get("record") in BATCH_RECORDS and rule["labels"]["engine"] == engine:
                (metric,) = metric_names(rule["expr"]) - {"kube_pod_info"}
                found.append(metric)
    running, waiting = found
    return running, waiting


def test_every_alert_says_what_to_do() -> None:
    for name, rule in alerts().items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert rule["annotations"]["summary"].strip(), name
        assert len(rule["annotations"]["description"].split()) > 20, name


def test_the_prometheus_rule_with_default_values_equals_the_rules_file() -> None:
    rule = the_one(render_objects(MONITORING_VALUES), "PrometheusRule")
    assert rule["spec"]["groups"] == plain_rules()["groups"]


def test_chart_values_tune_the_thresholds_and_windows() -> None:
    tuned = {
        "prometheusRule": {
            "enabled": True,
            "underfilledBatch": {
                "window": "1h",
                "for": "45m",
                "fillRatio": 0.8,
                "minWaitingRequests": 2,
                "severity": "critical",
            },
            "degradedGpu": {"ratio": 0.9, "minPeers": 5, "for": "2h", "severity": "info"},
            "failedProfile": {"for": "1h", "severity": "critical"},
            "slowerThanPeers": {"for": "1h", "severity": "critical"},
            "planDrift": {"ratio": 1.5, "for": "1h", "severity": "critical"},
            "engineStalled": {"for": "20m", "severity": "critical"},
            "staleProfile": {"maxAgeSeconds": 86400, "for": "10m", "severity": "warning"},
            "overfilledBatch": {
                "window": "20m",
                "for": "5m",
                "kvCacheUsage": 0.9,
                "minWaitingRequests": 3,
                "severity": "critical",
            },
        }
    }
    groups = the_one(render_objects(tuned), "PrometheusRule")["spec"]["groups"]
    by_name = {
        r["alert"] + "/" + r["labels"]["cause"]
        if "cause" in r.get("labels", {})
        else r.get("alert", r.get("record")): r
        for g in groups
        for r in g["rules"]
    }
    underfilled = by_name["RooflineUnderfilledBatch"]
    assert "avg_over_time < 0.8" in underfilled["expr"]
    assert "avg_over_time >= 2" in underfilled["expr"]
    assert (underfilled["for"], underfilled["labels"]["severity"]) == ("45m", "critical")
    for record in (
        "node_namespace_pod:roofline_serving_running_requests:avg_over_time",
        "node_namespace_pod:roofline_serving_waiting_requests:avg_over_time",
    ):
        assert by_name[record]["expr"].endswith(":sum[1h])")
    for name in ("RooflineDegradedGPUBandwidth", "RooflineDegradedGPUPeak"):
        assert "0.9 * quantile" in by_name[name]["expr"]
        assert by_name[name]["expr"].endswith(">= 5")
        assert (by_name[name]["for"], by_name[name]["labels"]["severity"]) == ("2h", "info")
    assert by_name["RooflineProfileFailed"]["for"] == "1h"
    drift = by_name["RooflinePlanDrift"]
    assert drift["expr"] == "roofline:model_itl_ratio > 1.5"
    assert (drift["for"], drift["labels"]["severity"]) == ("1h", "critical")
    stalled = by_name["RooflineEngineStalled"]
    assert (stalled["for"], stalled["labels"]["severity"]) == ("20m", "critical")
    slower = by_name["RooflineNodeSlowerThanPeers"]
    assert (slower["for"], slower["labels"]["severity"]) == ("1h", "critical")
    assert "roofline_profile_timestamp_seconds > 86400\n" in by_name["RooflineProfileStale"]["expr"]
    assert by_name["RooflineProfileStale"]["labels"]["severity"] == "warning"
    latency = by_name["RooflineOverfilledBatch/latency"]
    kv_cache = by_name["RooflineOverfilledBatch/kv-cache"]
    assert latency["expr"].startswith(
        "avg_over_time(node_namespace_pod:roofline_serving_running_requests:sum[20m])"
    )
    assert "kv_cache_usage:max[20m]) >= 0.9\n" in kv_cache["expr"]
    assert kv_cache["expr"].endswith("waiting_requests:sum[20m]) >= 3")
    for rule in (latency, kv_cache):
        assert (rule["for"], rule["labels"]["severity"]) == ("5m", "critical")
    untouched = plain_rules()["groups"]
    assert [g["name"] for g in groups] == [g["name"] for g in untouched]
    assert underfilled["annotations"] == alerts()["RooflineUnderfilledBatch"]["annotations"]


@needs_promtool
@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_rendered_prometheus_rule_passes_promtool(
    scenario: Path | None, tmp_path: Path
) -> None:
    values = scenario_values(scenario)
    values.setdefault("prometheusRule", {})["enabled"] = True
    rule = the_one(render_objects(values), "PrometheusRule")
    path = tmp_path / "rendered.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_ci_scenarios_include_one_with_tuned_alerts() -> None:
    tuned = [
        path
        for path in CI_VALUES
        if scenario_values(path).get("prometheusRule", {}).get("underfilledBatch")
    ]
    assert tuned
