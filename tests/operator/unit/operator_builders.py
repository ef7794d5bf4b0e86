"""Builders of profiles, nodes, specs and pods for the operator's unit tests (no cluster)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tests.profiler.headline_builders import headline_numbers

from roofline_operator.core.node_results import GpuResult, from_compact
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.core.spec import ProfileSpec, parse_spec
from roofline_operator.decide.asked import ProfilerAsk
from roofline_operator.decide.pods import PodFacts, Terminated
from roofline_operator.decide.records import NodeRecord
from roofline_operator.decide.status import build_status
from roofline_profiler.core.limits import DEFAULT_SHAPE
from roofline_profiler.wire.compact import CompactDevice, CompactProfile, encode_compact

GPU = "nvidia.com/gpu"


def device(
    index: int = 0,
    *,
    ridge: float = 180.0,
    min_batch: int = 128,
    bandwidth: float = 4.3e12,
    name: str = "NVIDIA H200",
) -> CompactDevice:
    return CompactDevice(
        index=index,
        name=name,
        numbers=headline_numbers(bandwidth, ridge * bandwidth, ridge, min_batch),
        step_seconds=(3.2e-5, 4.1e-5),
    )


def gpu(index: int = 0, **numbers: Any) -> GpuResult:
    """A GPU's result as the operator keeps it; ``numbers`` as for :func:`device`."""
    (only,) = from_compact(profile(device(index, **numbers)), "h").gpus
    return only


def profile(*devices: CompactDevice, created_at: float = 1_700_000_000.0) -> CompactProfile:
    return CompactProfile(
        dtype="bfloat16",
        shape_k=DEFAULT_SHAPE[0],
        shape_n=DEFAULT_SHAPE[1],
        created_at=created_at,
        duration_seconds=12.5,
        batches=(1, 256),
        devices=devices or (device(),),
        backend="cuda",
    )


def node(
    name: str,
    *,
    gpus: int = 1,
    labels: Mapping[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
) -> NodeFacts:
    return NodeFacts(
        name=name,
        labels={"pool": "h200", **(labels or {})},
        unschedulable=unschedulable,
        ready=ready,
        allocatable={GPU: str(gpus), "cpu": "16"},
    )


def spec(**fields: Any) -> ProfileSpec:
    return parse_spec({"nodeSelector": {"pool": "h200"}, **fields})


#: What a pod of :func:`spec` is asked to measure, which :func:`profile` answers.
ASKED = ProfilerAsk(device="cuda", dtype="bfloat16", shape=DEFAULT_SHAPE)


def succeeded_pod(
    name: str, node_name: str, spec_hash: str, attempt: int = 1, **kw: Any
) -> PodFacts:
    """A finished pod; its default result was measured a second after the pod was created."""
    created_at = kw.pop("created_at", 1000.0)
    message = kw.pop("message", None) or encode_compact(profile(created_at=created_at + 1.0))
    return PodFacts(
        name=name,
        namespace=kw.pop("namespace", "roofline-system"),
        profile="fleet",
        node=node_name,
        attempt=attempt,
        spec_hash=spec_hash,
        phase="Succeeded",
        created_at=created_at,
        started_at=created_at + 1.0,
        bound=True,
        terminated=Terminated(exit_code=0, reason="Completed", message=message),
        owner_uids=kw.pop("owner_uids", ("u",)),
        asked=kw.pop("asked", ASKED),
        **kw,
    )


def fresh_succeeded_pod(
    name: str, node_name: str, spec_hash: str, attempt: int = 1, **kw: Any
) -> PodFacts:
    """:func:`succeeded_pod` created just now in the namespace the engine's tests configure
    (``default``), for rounds that run on the wall clock."""
    kw.setdefault("namespace", "default")
    return succeeded_pod(name, node_name, spec_hash, attempt, created_at=time.time(), **kw)


def status_of(records: Mapping[str, NodeRecord], **kw: Any) -> dict[str, Any]:
    """A profile's status from its node records, at a fixed time and with no earlier status."""
    return build_status(
        records=dict(records),
        spec_hash="h",
        conflicts={},
        spec_error=None,
        previous_conditions=[],
        generation=1,
        now=1000.0,
        **kw,
    )
