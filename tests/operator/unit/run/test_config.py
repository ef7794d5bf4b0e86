from __future__ import annotations

import logging

import pytest

from roofline_operator.decide.pods import PodDefaults
from roofline_operator.decide.status import DEFAULT_STATUS_MAX_NODES
from roofline_operator.run.cli import kopf_logging
from roofline_operator.run.config import DEFAULT_PROFILER_IMAGE, ConfigError, _parser, load_config


def test_defaults_need_no_flags_and_no_environment() -> None:
    config = load_config([], {})
    assert config.metrics_port == 9090
    assert config.metrics_host == "0.0.0.0"
    assert config.peering is None
    assert config.profiler_image == DEFAULT_PROFILER_IMAGE
    assert config.namespace  # the service account's namespace in a pod, else "default"
    assert config.log_level == logging.INFO


def test_flags_win_over_the_environment() -> None:
    env = {"ROOFLINE_METRICS_PORT": "8000", "ROOFLINE_NAMESPACE": "from-env"}
    config = load_config(["--metrics-port", "9100", "--namespace", "from-flag"], env)
    assert (config.metrics_port, config.namespace) == (9100, "from-flag")


def test_the_environment_fills_what_flags_leave_out() -> None:
    env = {
        "ROOFLINE_METRICS_PORT": "8000",
        "ROOFLINE_NAMESPACE": "gpu-ops",
        "ROOFLINE_PROFILER_IMAGE": "registry.local/roofline:1",
        "ROOFLINE_PEERING": "roofline",
        "ROOFLINE_RESYNC_SECONDS": "5",
    }
    config = load_config([], env)
    assert config.metrics_port == 8000
    assert config.namespace == "gpu-ops"
    assert config.profiler_image == "registry.local/roofline:1"
    assert config.peering == "roofline"
    assert config.resync_seconds == 5.0


def test_standalone_overrides_peering_from_the_environment() -> None:
    assert load_config(["--standalone"], {"ROOFLINE_PEERING": "roofline"}).peering is None


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(["--metrics-port", "http"], "--metrics-port must be an integer", id="port"),
        pytest.param(["--metrics-port", "70000"], "at most 65535", id="port-range"),
        pytest.param(["--namespace", "Bad_NS"], "namespace", id="namespace"),
        pytest.param(["--resync-seconds", "0"], "--resync-seconds", id="resync"),
        pytest.param(["--api-concurrency", "0"], "--api-concurrency", id="concurrency"),
        pytest.param(["--profiler-image", "two words"], "image", id="image"),
        pytest.param(
            ["--profiler-image-pull-secrets", "ok,Not_OK"], "Not_OK", id="pull-secret-name"
        ),
        pytest.param(["--profiler-service-account", "A"], "service-account", id="account"),
    ],
)
def test_bad_settings_fail_fast_with_one_line(argv: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as caught:
        load_config(argv, {})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("flags", "switches"),
    [
        ([], {"debug": False, "verbose": False, "quiet": False}),
        (["--quiet"], {"debug": False, "verbose": False, "quiet": True}),
        (["--verbose"], {"debug": False, "verbose": True, "quiet": False}),
        (["--debug"], {"debug": True, "verbose": True, "quiet": False}),
    ],
)
def test_each_log_flag_sets_its_own_level(flags: list[str], switches: dict[str, bool]) -> None:
    assert kopf_logging(load_config(flags, {}).log_level) == switches


def test_verbose_logs_more_than_the_default_and_less_than_debug() -> None:
    levels = [load_config(f, {}).log_level for f in (["--debug"], ["--verbose"], [], ["--quiet"])]
    assert levels == sorted(levels)
    assert len(set(levels)) == 4


def test_the_node_label_backend_comes_from_the_environment_and_is_checked() -> None:
    assert load_config([], {}).node_label_backend == "node"
    env = {"ROOFLINE_NODE_LABEL_BACKEND": "nodeFeature"}
    assert load_config([], env).node_label_backend == "nodeFeature"
    with pytest.raises(ConfigError, match="node, nodeFeature"):
        load_config([], {"ROOFLINE_NODE_LABEL_BACKEND": "nfd"})


def test_the_status_node_bound_comes_from_a_flag_or_the_environment() -> None:
    assert load_config([], {}).status_max_nodes == DEFAULT_STATUS_MAX_NODES
    assert load_config([], {"ROOFLINE_STATUS_MAX_NODES": "7"}).status_max_nodes == 7
    assert load_config(["--status-max-nodes", "0"], {}).status_max_nodes == 0
    with pytest.raises(ConfigError, match="--status-max-nodes"):
        load_config(["--status-max-nodes", "-1"], {})


def test_the_profiler_namespaces_are_the_namespace_and_each_extra_one() -> None:
    flags = ["--namespace", "prof", "--extra-namespace", "team-a", "--extra-namespace", "prof"]
    assert load_config(flags, {}).profiler_namespaces == ("prof", "team-a")
    env = {"ROOFLINE_NAMESPACE": "prof", "ROOFLINE_EXTRA_NAMESPACES": "team-a, team-b"}
    assert load_config([], env).profiler_namespaces == ("prof", "team-a", "team-b")
    with pytest.raises(ConfigError, match="not a valid Kubernetes namespace"):
        load_config(["--extra-namespace", "Team_A"], {})


def test_profiler_pull_secrets_and_account_come_from_flags_or_the_environment() -> None:
    assert load_config([], {}).pod_defaults == PodDefaults()
    env = {
        "ROOFLINE_PROFILER_IMAGE_PULL_SECRETS": " regcred , mirror,regcred",
        "ROOFLINE_PROFILER_SERVICE_ACCOUNT": "roofline-profiler",
    }
    from_env = load_config([], env).pod_defaults
    assert from_env == PodDefaults(("regcred", "mirror"), "roofline-profiler")
    flagged = load_config(["--profiler-image-pull-secrets", "other"], env).pod_defaults
    assert flagged.image_pull_secrets == ("other",)


def test_every_operator_flag_has_help_that_names_its_default() -> None:
    parser = _parser()
    for action in parser._actions:
        if action.dest in ("help", "version"):
            continue
        assert action.help, f"{action.option_strings} has no help"
        switch = action.nargs == 0
        assert switch or "default" in action.help, f"{action.option_strings} shows no default"
