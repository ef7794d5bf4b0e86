"""A profile's reconcile loop on an in-memory client, and the nodes as its patches left them:
shared by the reconcile tests."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import kopf
from prometheus_client import CollectorRegistry
from tests.operator.unit.recording_client import RecordingClient

from roofline_operator.core.nodes import NodeFacts
from roofline_operator.run.config import load_config
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.reconcile import ProfileLoop
from roofline_operator.run.runtime import Runtime


def loop_with(client: RecordingClient, spec: Mapping[str, Any], status: Any = None) -> ProfileLoop:
    runtime = Runtime(config=load_config([], {}), metrics=OperatorMetrics(CollectorRegistry()))
    runtime.api.connection = kopf.ConnectionInfo(server="http://cluster.invalid")
    runtime.api.built_from = runtime.api.connection
    runtime.api.client = client  # type: ignore[assignment]
    body = {
        "metadata": {
            "name": "fleet",
            "uid": "u",
            "generation": 4,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"nodeSelector": {"pool": "h200"}, **spec},
        "status": status or {},
    }
    return ProfileLoop(runtime, "fleet", body, logging.getLogger("test"))


def as_patched(facts: NodeFacts, client: RecordingClient) -> NodeFacts:
    """``facts`` after every label and annotation patch ``client`` sent to its node."""
    labels = dict(facts.labels)
    records = dict(facts.records)
    for target, patches in ((labels, client.labelled), (records, client.annotated)):
        for name, patch in patches:
            if name == facts.name:
                for key, value in patch.items():
                    if value is None:
                        target.pop(key, None)
                    else:
                        target[key] = value
    return replace(facts, labels=labels, records=records)
