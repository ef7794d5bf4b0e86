"""The operator's start-up configuration: command-line flags over environment variables.

Loaded once, validated at once, so a typo in a Helm value stops the pod with one clear line
instead of surfacing later as a half-working operator.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from roofline_operator import __version__
from roofline_operator.decide.node_features import BACKEND_NODE, BACKENDS
from roofline_operator.decide.pods import PodDefaults
from roofline_operator.decide.status import DEFAULT_STATUS_MAX_NODES

SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: What ``make images`` builds (the Dockerfile's ``profiler`` target); nothing publishes it, so
#: a cluster sets its own registry (the chart's ``profiler.image``).
DEFAULT_PROFILER_IMAGE = f"roofline:{__version__}"
DEFAULT_METRICS_PORT = 9090
#: Log level of ``--verbose``: between INFO and DEBUG, Kopf's own verbose mode.
VERBOSE = (logging.DEBUG + logging.INFO) // 2


class ConfigError(ValueError):
    """An invalid start-up setting; ``str()`` is the one line shown to the user."""


@dataclass(frozen=True)
class OperatorConfig:
    #: Namespace of profiler pods for profiles that do not name one.
    namespace: str
    #: Address and port of the HTTP server that serves ``/metrics`` and ``/healthz``.
    metrics_host: str
    metrics_port: int
    #: Image of profiler pods for profiles that do not name one.
    profiler_image: str
    #: Kopf peering: ``None`` runs standalone (one replica only).
    peering: str | None
    priority: int
    #: Longest pause between two reconcile rounds of a profile, even without events.
    resync_seconds: float
    #: Pause after a wake-up so that a burst of watch events becomes one round.
    batch_window_seconds: float
    #: API requests in flight at once, across all profiles.
    api_concurrency: int
    log_level: int
    #: Where node labels go: ``node`` patches Nodes, ``nodeFeature`` writes NFD NodeFeature
    #: objects in :attr:`operator_namespace` for nfd-master to apply.
    node_label_backend: str = BACKEND_NODE
    #: The operator's own namespace, home of its NodeFeature objects.
    operator_namespace: str = "default"
    #: Nodes with a full entry in ``status.nodes[]`` (those needing attention first); every
    #: node's publication is in its record annotation anyway. 0 lists none.
    status_max_nodes: int = DEFAULT_STATUS_MAX_NODES
    #: Namespaces besides :attr:`namespace` that profiles may name in ``spec.namespace``.
    extra_namespaces: tuple[str, ...] = ()

    @property
    def profiler_namespaces(self) -> tuple[str, ...]:
        """Every namespace profiler pods may run in: the only ones whose pods are watched,
        listed and deleted (the chart grants pods there alone)."""
        return tuple(dict.fromkeys((self.namespace, *self.extra_namespaces)))

    #: Pull secrets and service account of every profiler pod (profiles may add their own).
    pod_defaults: PodDefaults = field(default_factory=PodDefaults)


def _parser() -> argparse.ArgumentParser:
    """Every flag says its default and the environment variable it overrides."""
    parser = argparse.ArgumentParser(
        prog="roofline operator",
        description="Profile the GPU nodes selected by RooflineProfile objects and publish "
        "their decode roofline to status, node labels and Prometheus. Each flag overrides "
        "the environment variable named in brackets.",
    )
    _add_namespace_flags(parser)
    _add_server_flags(parser)
    _add_profiler_pod_flags(parser)
    _add_peering_flags(parser)
    _add_pacing_flags(parser)
    _add_publication_flags(parser)
    _add_log_level_flags(parser)
    parser.add_argument("--version", action="version", version=f"roofline operator {__version__}")
    return parser


def _add_namespace_flags(parser: argparse.ArgumentParser) -> None:
    """Where profiler pods run."""
    parser.add_argument(
        "--namespace",
        help="namespace of profiler pods for profiles without spec.namespace (default: the "
        "operator's own namespace, else default) [ROOFLINE_NAMESPACE]",
    )
    parser.add_argument(
        "--extra-namespace",
        action="append",
        metavar="NS",
        help="another namespace profiles may name in spec.namespace; repeatable (default: none) "
        "[ROOFLINE_EXTRA_NAMESPACES, comma-separated]",
    )


def _add_server_flags(parser: argparse.ArgumentParser) -> None:
    """The HTTP server of ``/metrics`` and ``/healthz``."""
    parser.add_argument(
        "--metrics-host",
        help="address of the /metrics and /healthz server (default 0.0.0.0) "
        "[ROOFLINE_METRICS_HOST]",
    )
    parser.add_argument(
        "--metrics-port",
        help=f"port of the /metrics and /healthz server (default {DEFAULT_METRICS_PORT}) "
        "[ROOFLINE_METRICS_PORT]",
    )


def _add_profiler_pod_flags(parser: argparse.ArgumentParser) -> None:
    """What every profiler pod gets unless its profile says otherwise."""
    parser.add_argument(
        "--profiler-image",
        help="profiler image for profiles without spec.image "
        f"(default {DEFAULT_PROFILER_IMAGE}) [ROOFLINE_PROFILER_IMAGE]",
    )
    parser.add_argument(
        "--profiler-image-pull-secrets",
        metavar="NAME[,NAME...]",
        help="Secrets in the profiler namespace to pull the profiler image with (default: "
        "none) [ROOFLINE_PROFILER_IMAGE_PULL_SECRETS]",
    )
    parser.add_argument(
        "--profiler-service-account",
        metavar="NAME",
        help="service account of profiler pods for profiles without spec.serviceAccountName "
        "(default: the namespace's default) [ROOFLINE_PROFILER_SERVICE_ACCOUNT]",
    )


def _add_peering_flags(parser: argparse.ArgumentParser) -> None:
    """Kopf peering, which keeps several replicas from handling the same profiles."""
    peering = parser.add_mutually_exclusive_group()
    peering.add_argument("--standalone", action="store_true", help="no peering (the default)")
    peering.add_argument(
        "--peering", help="Kopf ClusterKopfPeering name (default: none) [ROOFLINE_PEERING]"
    )
    parser.add_argument("--priority", default="0", help="peering priority (default 0)")


def _add_pacing_flags(parser: argparse.ArgumentParser) -> None:
    """How often rounds run and how many requests they keep in flight."""
    parser.add_argument(
        "--resync-seconds",
        help="longest pause between two rounds of a profile (default 30) [ROOFLINE_RESYNC_SECONDS]",
    )
    parser.add_argument(
        "--batch-window-seconds",
        help="pause after a watch event that gathers a burst into one round (default 0.5) "
        "[ROOFLINE_BATCH_WINDOW_SECONDS]",
    )
    parser.add_argument(
        "--api-concurrency",
        help="API requests in flight at once (default 32) [ROOFLINE_API_CONCURRENCY]",
    )


def _add_publication_flags(parser: argparse.ArgumentParser) -> None:
    """Where node labels go, and how much of the fleet the status lists."""
    parser.add_argument(
        "--node-label-backend",
        help="node (patch Nodes) or nodeFeature (NFD NodeFeature objects) (default node) "
        "[ROOFLINE_NODE_LABEL_BACKEND]",
    )
    parser.add_argument(
        "--status-max-nodes",
        help="nodes listed in full in a profile's status.nodes[] "
        f"(default {DEFAULT_STATUS_MAX_NODES}) [ROOFLINE_STATUS_MAX_NODES]",
    )


def _add_log_level_flags(parser: argparse.ArgumentParser) -> None:
    level = parser.add_mutually_exclusive_group()
    level.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="log every handler call and the operator's debug messages",
    )
    level.add_argument("--debug", action="store_true", help="log everything, asyncio included")
    level.add_argument("--quiet", "-q", action="store_true", help="log warnings only")


def _pick(flag: str | None, env: Mapping[str, str], key: str, default: str) -> str:
    if flag is not None:
        return flag
    return env.get(key) or default


def _number(text: str, name: str, *, minimum: float, integer: bool) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{name} must be {kind}, got {text!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum:g}, got {text!r}")
    return value


def _integer(text: str, name: str, *, minimum: int) -> int:
    return int(_number(text, name, minimum=minimum, integer=True))


def _seconds(text: str, name: str, *, minimum: float) -> float:
    return _number(text, name, minimum=minimum, integer=False)


def _default_namespace() -> str:
    try:
        return SERVICE_ACCOUNT_NAMESPACE_FILE.read_text().strip() or "default"
    except OSError:
        return "default"


def _log_level(args: argparse.Namespace) -> int:
    if args.debug:
        return logging.DEBUG
    if args.verbose:
        return VERBOSE
    if args.quiet:
        return logging.WARNING
    return logging.INFO


def _check_namespace(namespace: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace):
        raise ConfigError(f"namespace {namespace!r} is not a valid Kubernetes namespace name")
    return namespace


def load_config(argv: Sequence[str], env: Mapping[str, str] | None = None) -> OperatorConfig:
    """Parse ``argv`` over ``env``; raise :class:`ConfigError` on the first invalid value.

    ``--help`` and argparse's own usage errors still exit through argparse (status 0 and 2).
    """
    env = os.environ if env is None else env
    args = _parser().parse_args(list(argv))
    port = _metrics_port(args, env)
    peering = None if args.standalone else (args.peering or env.get("ROOFLINE_PEERING") or None)
    image = _profiler_image(args, env)
    return OperatorConfig(
        namespace=_check_namespace(
            _pick(args.namespace, env, "ROOFLINE_NAMESPACE", "") or _default_namespace()
        ),
        metrics_host=_pick(args.metrics_host, env, "ROOFLINE_METRICS_HOST", "0.0.0.0"),
        metrics_port=port,
        profiler_image=image,
        peering=peering,
        priority=_integer(args.priority, "--priority", minimum=-(2**31)),
        resync_seconds=_seconds(
            _pick(args.resync_seconds, env, "ROOFLINE_RESYNC_SECONDS", "30"),
            "--resync-seconds",
            minimum=0.1,
        ),
        batch_window_seconds=_seconds(
            _pick(args.batch_window_seconds, env, "ROOFLINE_BATCH_WINDOW_SECONDS", "0.5"),
            "--batch-window-seconds",
            minimum=0,
        ),
        api_concurrency=_integer(
            _pick(args.api_concurrency, env, "ROOFLINE_API_CONCURRENCY", "32"),
            "--api-concurrency",
            minimum=1,
        ),
        log_level=_log_level(args),
        node_label_backend=_backend(
            _pick(args.node_label_backend, env, "ROOFLINE_NODE_LABEL_BACKEND", BACKEND_NODE)
        ),
        operator_namespace=_check_namespace(
            env.get("ROOFLINE_OPERATOR_NAMESPACE") or _default_namespace()
        ),
        extra_namespaces=_extra_namespaces(args, env),
        pod_defaults=_pod_defaults(args, env),
        status_max_nodes=_integer(
            _pick(
                args.status_max_nodes,
                env,
                "ROOFLINE_STATUS_MAX_NODES",
                str(DEFAULT_STATUS_MAX_NODES),
            ),
            "--status-max-nodes",
            minimum=0,
        ),
    )


def _metrics_port(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    text = _pick(args.metrics_port, env, "ROOFLINE_METRICS_PORT", str(DEFAULT_METRICS_PORT))
    port = _integer(text, "--metrics-port", minimum=0)
    if port > 65535:
        raise ConfigError(f"--metrics-port must be at most 65535, got {port}")
    return port


def _profiler_image(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    image = _pick(args.profiler_image, env, "ROOFLINE_PROFILER_IMAGE", DEFAULT_PROFILER_IMAGE)
    if not image.strip() or any(c.isspace() for c in image):
        raise ConfigError(f"--profiler-image {image!r} is not an image reference")
    return image


def _extra_namespaces(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, ...]:
    """``--extra-namespace`` (repeated) or ``ROOFLINE_EXTRA_NAMESPACES`` (comma-separated)."""
    names = (
        args.extra_namespace
        if args.extra_namespace is not None
        else (env.get("ROOFLINE_EXTRA_NAMESPACES") or "").split(",")
    )
    return tuple(_check_namespace(ns.strip()) for ns in names if ns.strip())


def _pod_defaults(args: argparse.Namespace, env: Mapping[str, str]) -> PodDefaults:
    secrets = _pick(
        args.profiler_image_pull_secrets, env, "ROOFLINE_PROFILER_IMAGE_PULL_SECRETS", ""
    )
    account = _pick(args.profiler_service_account, env, "ROOFLINE_PROFILER_SERVICE_ACCOUNT", "")
    return PodDefaults(
        image_pull_secrets=_secret_names(secrets),
        service_account=_object_name(account, "--profiler-service-account"),
    )


def _backend(text: str) -> str:
    if text not in BACKENDS:
        raise ConfigError(
            f"--node-label-backend must be one of {', '.join(BACKENDS)}, got {text!r}"
        )
    return text


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _object_name(text: str, flag: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise ConfigError(f"{flag} {text!r} is not a valid object name")
    return text


def _secret_names(text: str) -> tuple[str, ...]:
    """Comma-separated Secret names (blanks around them ignored), each checked."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    return tuple(
        name for name in dict.fromkeys(names) if _object_name(name, "--profiler-image-pull-secrets")
    )
