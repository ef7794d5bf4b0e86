"""``roofline operator``: parse the flags, then run Kopf in this process.

Kopf's own CLI is not used so that the operator has one documented set of flags (and env
variables) and one typed configuration, checked before anything connects to a cluster.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TypedDict

import kopf
from prometheus_client import CollectorRegistry

from roofline_operator.run.config import ConfigError, OperatorConfig, load_config
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.runtime import Runtime


class KopfLogging(TypedDict):
    debug: bool
    verbose: bool
    quiet: bool


def kopf_logging(log_level: int) -> KopfLogging:
    """Kopf's logging switches for a log level: ``--verbose`` is Kopf's verbose mode (debug
    messages of the operator, none of asyncio), ``--debug`` its debug mode."""
    return {
        "debug": log_level <= logging.DEBUG,
        "verbose": log_level < logging.INFO,
        "quiet": log_level >= logging.WARNING,
    }


def run_operator(config: OperatorConfig) -> None:
    """Run until SIGINT/SIGTERM.

    Kopf runs namespaced, over the profiler namespaces: it watches pods there alone (what the
    chart grants), while profiles and nodes, cluster-scoped, are watched cluster-wide all the
    same. Peering stays cluster-wide (``handlers.configure``).
    """
    from roofline_operator.run import handlers  # noqa: F401  (registers the handlers)

    kopf.configure(**kopf_logging(config.log_level))
    if config.log_level >= logging.INFO:
        # Kopf logs every successful handler call; with a thousand nodes that drowns the log.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    runtime = Runtime(config=config, metrics=OperatorMetrics(CollectorRegistry()))
    kopf.run(
        namespaces=list(config.profiler_namespaces),
        standalone=config.peering is None,
        peering_name=config.peering,
        priority=config.priority,
        memo=runtime,
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = load_config(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"roofline operator: {exc}", file=sys.stderr)
        return 2
    run_operator(config)
    return 0
