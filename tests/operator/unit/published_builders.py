"""The operator's view of the profiler's synthetic planned profile, built as a round builds it.

The pod's termination message is the compact text ``roofline profile --compact`` writes for
``tests.profiler.synthetic.planned_result``; the operator reads it through ``classify_pod`` (the
validating decoder) and records it with ``record_profile``, as the planner does for a finished pod.
Times are fixed, so every form built from the record is too.
"""

from __future__ import annotations

from dataclasses import replace

from tests.operator.unit.operator_builders import node, spec, succeeded_pod
from tests.profiler.synthetic import planned_result

from roofline_operator.core.names import NodeState
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.decide.hysteresis import record_profile
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.outcomes import Succeeded, classify_pod
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire.compact import encode_compact
from roofline_profiler.wire.result import ProfileResult

PROFILE = "fleet"
NAMESPACE = "roofline-system"
NODE = "gpu-node-17"
#: The profiled model, by the name its plan carries.
MODEL = "llama-3.1-8b"
#: When the operator reads the finished pod: a minute after the profile was created.
READ_AT = planned_result().created_at_unix + 60.0


def profiled_spec() -> ProfileSpec:
    return spec(models=[{"name": MODEL, "preset": MODEL}], gpuHourCost="2.50")


def models_view(the_spec: ProfileSpec) -> ModelsView:
    return ModelsView(the_spec.models, {}, the_spec.gpu_hour_cost)


def termination_message(result: ProfileResult | None = None) -> str:
    """What the profiler pod writes to its termination message (``--compact``)."""
    return encode_compact((result or planned_result()).to_compact())


def profiled_node() -> NodeFacts:
    return node(NODE, labels={"kubernetes.io/hostname": NODE})


def profiled_record(the_spec: ProfileSpec) -> NodeRecord:
    """The node's record after its first profile's pod succeeded with the synthetic result."""
    spec_hash = the_spec.measurement_hash()
    created_at = READ_AT - 90.0
    pod = succeeded_pod(
        f"roofline-{PROFILE}-{NODE}-1",
        NODE,
        spec_hash,
        message=termination_message(),
        created_at=created_at,
    )
    outcome = classify_pod(pod, the_spec, READ_AT, gpus=1)
    assert isinstance(outcome, Succeeded), outcome
    profiling = NodeRecord(
        name=NODE,
        gpus=1,
        state=NodeState.PROFILING,
        attempts=1,
        cycle_hash=spec_hash,
        pod=pod.name,
        pod_namespace=pod.namespace,
        last_attempt_at=created_at,
    )
    record, _ = record_profile(profiling, outcome.result, the_spec.change_threshold_percent)
    return replace(record, state=NodeState.PROFILED, pod=None, pod_namespace=None)
