"""Kopf handlers: a table of contents that delegates to the engine.

The operator's own caches keep the cluster's nodes and our profiler pods in memory (``cache.py``;
not Kopf indexes, whose start-up is quadratic in the object count), and a Kopf index keeps the
profiles' label claims (a few objects), so a reconcile round reads no API at all; watch events
update the caches and wake the profiles they concern.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import kopf

from roofline_operator.core.names import (
    ANNOTATION_PREFIX,
    FINALIZER,
    GROUP,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    PLURAL,
    VERSION,
)
from roofline_operator.core.nodes import node_facts
from roofline_operator.decide.labels import LabelClaim, label_claim
from roofline_operator.decide.pods import pod_facts
from roofline_operator.run.login import login_in_cluster
from roofline_operator.run.readiness import keep_readiness
from roofline_operator.run.reconcile import ProfileLoop
from roofline_operator.run.release import release_profile
from roofline_operator.run.runtime import Runtime, pod_key
from roofline_operator.run.server import start_server

PROFILER_PODS = {LABEL_MANAGED_BY: MANAGED_BY}
EXIT_TIMEOUT_SECONDS = 20.0


def _claims(kwargs: dict[str, Any]) -> kopf.Index[str, LabelClaim]:
    """The claim index, which Kopf passes as a kwarg named after the index function.

    Taken from ``**kwargs`` because Kopf's handler protocols do not declare index kwargs.
    """
    index: kopf.Index[str, LabelClaim] = kwargs["claim_index"]
    return index


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: Runtime, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    # Kopf runs namespaced (pods in the profiler namespaces only) but the profiles are
    # cluster-scoped: replicas must coordinate through one ClusterKopfPeering.
    settings.peering.clusterwide = True
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    # Kopf would post every handler log line as an Event; the engine posts its own, aggregated.
    settings.posting.level = logging.WARNING
    # Exit within a pod's default 30 s grace period even while Kopf backs off an unreachable API.
    settings.process.ultimate_exiting_timeout = EXIT_TIMEOUT_SECONDS
    config = memo.config
    memo.server.append(
        await start_server(
            memo.metrics.registry, memo.health, config.metrics_host, config.metrics_port
        )
    )
    memo.health.started = True
    memo.tasks.append(asyncio.create_task(keep_readiness(memo), name="readiness"))


@kopf.on.login()
def login(
    memo: Runtime, settings: kopf.OperatorSettings, **kwargs: Any
) -> kopf.ConnectionInfo | None:
    info = login_in_cluster(settings, os.environ) or kopf.login_with_kubeconfig(
        settings=settings, **kwargs
    )
    memo.api.connection = info
    return info


@kopf.on.cleanup()
async def shutdown(memo: Runtime, **_: Any) -> None:
    memo.health.started = False
    memo.health.mark_not_ready("the operator is stopping")
    for task in memo.tasks:
        task.cancel()
    await asyncio.gather(*memo.tasks, return_exceptions=True)
    await memo.close()
    for runner in memo.server:
        await runner.cleanup()


@kopf.index(GROUP, VERSION, PLURAL)
async def claim_index(name: str, body: kopf.Body, **_: Any) -> dict[str, LabelClaim]:
    return {name: label_claim(name, body)}


@kopf.on.event("pods", labels=PROFILER_PODS)
async def pod_changed(type: str | None, body: kopf.Body, memo: Runtime, **_: Any) -> None:
    facts = pod_facts(body)
    if type == "DELETED":
        memo.caches.pods.delete(pod_key(facts))
    else:
        memo.caches.pods.upsert(pod_key(facts), facts)
    memo.wakeups.wake(facts.profile)


@kopf.on.event("nodes")
async def node_changed(
    type: str | None, name: str, body: kopf.Body, memo: Runtime, **_: Any
) -> None:
    if type == "DELETED":
        memo.caches.nodes.delete(name)
    else:
        memo.caches.nodes.upsert(name, node_facts(body))
    memo.wakeups.wake_all()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def profile_changed(memo: Runtime, **_: Any) -> None:
    memo.wakeups.wake_all()


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0)
async def reconcile_profile(
    name: str,
    body: kopf.Body,
    memo: Runtime,
    stopped: kopf.DaemonStopped,
    logger: kopf.Logger,
    **indexes: Any,
) -> None:
    loop = ProfileLoop(memo, name, body, logger)
    await loop.run(stopped, _claims(indexes))


@kopf.on.delete(GROUP, VERSION, PLURAL)
async def release(name: str, body: kopf.Body, memo: Runtime, **_: Any) -> None:
    await release_profile(memo, name, body)
