"""Releasing a deleted profile (the finalizer's work): its pods, the node labels it owns, its
record annotations or NodeFeature objects, and the ConfigMaps of its models.

Only what the profile owns goes: pods the operator created for it (``provenance.py``), labels
whose owner label names it, its own record annotation key, NodeFeature objects by its own label
selector. What another profile wrote stays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from typing import Any

from roofline_operator.core.names import LABEL_PROFILE
from roofline_operator.core.spec import parse_spec
from roofline_operator.core.spec_fields import SpecError
from roofline_operator.decide import provenance
from roofline_operator.decide.labels import label_patch, label_safe
from roofline_operator.decide.node_features import BACKEND_NODE_FEATURE
from roofline_operator.decide.pods import ProfileRef
from roofline_operator.decide.records import record_annotation_key
from roofline_operator.run.kubeapi import list_node_features
from roofline_operator.run.runtime import Runtime


def release_namespaces(runtime: Runtime, body: Mapping[str, Any]) -> set[str]:
    """Where a profile being deleted may have pods to delete: the configured namespace and its
    spec's, never one its status names (a status editor could point the deletes anywhere).
    Pods an earlier spec left in another namespace go with the profile all the same: their
    owner reference hands them to the garbage collector."""
    namespaces = {runtime.config.namespace}
    with contextlib.suppress(SpecError):
        namespaces.add(parse_spec(body.get("spec") or {}).namespace or runtime.config.namespace)
    return namespaces


async def release_profile(runtime: Runtime, name: str, body: Mapping[str, Any]) -> None:
    """Delete a profile's pods, remove the node labels it owns and its record annotations
    (the finalizer's work). Only pods the operator created are deleted (``provenance.py``)."""
    client = await runtime.client()
    caches = runtime.caches
    await caches.prime(client, runtime.config.profiler_namespaces)
    uid = str((body.get("metadata") or {}).get("uid", ""))
    own = provenance.partition(
        caches.pods_of(name), ProfileRef(name, uid), release_namespaces(runtime, body)
    ).own
    jobs: list[Awaitable[Any]] = [
        client.delete_pod(p.namespace, p.name) for p in own if not p.deleting
    ]
    config = runtime.config
    if config.node_label_backend == BACKEND_NODE_FEATURE:
        # One DELETE per object: no deletecollection, which the chart does not grant.
        namespace = config.operator_namespace
        for found in await list_node_features(client, namespace, name):
            jobs.append(client.delete_node_feature(namespace, found.name))
    else:
        key = record_annotation_key(name)
        for node in caches.nodes.values():
            patch = None
            if node.labels.get(LABEL_PROFILE) == label_safe(name):
                patch = label_patch(node.labels, None)
            annotations = {key: None} if key in node.records else {}
            if patch or annotations:
                jobs.append(client.patch_node_labels(node.name, patch or {}, annotations))
    written = runtime.models_config_maps.pop(name, {})
    jobs += [client.delete_config_map(ns, cm, uid) for (ns, cm), uid in written.items()]
    await asyncio.gather(*jobs)
    runtime.metrics.forget(name)
    runtime.wakeups.forget(name)
    runtime.wakeups.wake_all()
