"""What the user chooses beside the plan: names, namespaces, the engine, the demand. Each field's
default is the one ``roofline export --help`` shows. Pure module."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from roofline_cli.export.plans import ClassPlan

#: The engines, as ``--engine`` names them, and their key in a plan's engine flags.
ENGINES = {"vllm": "vllm", "sglang": "sglang", "tgi": "tgi", "tensorrt-llm": "tensorrtLlm"}
#: Engines whose Prometheus metrics name the served model (KEDA's query needs that).
METRIC_ENGINES = ("vllm", "sglang")
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
DEFAULT_TARGET_PORT = 8000
#: The endpoint picker's gRPC port in the inference gateway's charts.
DEFAULT_EPP_PORT = 9002
DEFAULT_UTILIZATION = 0.75
#: The smallest planned utilisation: 1% of the decode ceiling (a share that divides a demand by
#: 10⁻³⁰⁰ would overflow).
MIN_UTILIZATION = 0.01
DEFAULT_RESOURCE = "nvidia.com/gpu"
#: A serving pod's CPU and memory requests when the plan does not say them (kueue): those of the
#: project's vLLM walk-through (manifests/examples/kueue.yaml) for one replica.
DEFAULT_CPU_PER_REPLICA = "8"
DEFAULT_MEMORY_PER_REPLICA = "64Gi"
DEFAULT_COHORT = "roofline"
#: The ConfigMap llm-d's autoscaler v0.5.1 reads (``internal/config/helpers.go``).
WVA_CONFIGMAP = "wva-saturation-scaling-config"


@dataclass(frozen=True)
class ExportOptions:
    namespace: str = "default"
    engine: str = "vllm"
    #: ``configmap`` or ``patch`` (engine-args).
    form: str = "configmap"
    #: The serving Deployment (KEDA's target, the patch's object); default: the model's name.
    deployment: str | None = None
    container_index: int = 0
    prometheus: str = DEFAULT_PROMETHEUS
    #: KEDA's ``authenticationRef`` for a Prometheus that needs credentials: the kind
    #: (``TriggerAuthentication`` or ``ClusterTriggerAuthentication``) and the name.
    authentication_ref: tuple[str, str] | None = None
    #: The Prometheus scaler's ``authModes`` (``bearer``, ``basic``, ``tls``…), when the
    #: TriggerAuthentication does not carry them.
    auth_modes: str | None = None
    min_replicas: int = 1
    max_replicas: int = 10
    #: The serving pods' labels (InferencePool selector); default ``app: <model>``.
    pool_selector: Mapping[str, str] = field(default_factory=dict)
    target_port: int = DEFAULT_TARGET_PORT
    epp_port: int = DEFAULT_EPP_PORT
    #: The InferencePool's ``failureMode`` (gateway): the chart's default, written explicitly.
    failure_mode: str = "FailOpen"
    #: The endpoint picker's ``flowControl`` feature gate (gateway).
    flow_control: bool = False
    #: Decode tokens/s the queue must sustain (kueue).
    tokens_per_second: float | None = None
    #: Requests/s the queue must sustain (kueue), sized by each class's ``maxRequestRate``.
    request_rate: float | None = None
    utilization: float = DEFAULT_UTILIZATION
    #: The accelerator's extended resource (kueue); a CPU-device profile requests none.
    resource: str = DEFAULT_RESOURCE
    #: One replica's pod requests, Kubernetes quantities (kueue).
    cpu_per_replica: str = DEFAULT_CPU_PER_REPLICA
    memory_per_replica: str = DEFAULT_MEMORY_PER_REPLICA
    cohort: str = DEFAULT_COHORT
    #: The model's served name where it differs from its plan's name (llm-d's ``model_id``).
    model_id: str | None = None


#: Longest object name written (an RFC 1123 label, so that it serves as a label value too).
MAX_OBJECT_NAME = 63
#: Hex digits of the digest that keeps apart two long names cut to one prefix.
NAME_DIGEST_CHARS = 10


def object_name(text: str, limit: int = MAX_OBJECT_NAME) -> str:
    """``text`` as a Kubernetes object name (an RFC 1123 label): lower case, other characters
    as ``-``. One longer than 63 keeps its first 52 characters and a ``-`` and 10 hex digits of
    the SHA-256 of the whole ``text`` (as the operator's ``label_safe``), so that two texts
    sharing a long prefix never share a name; ``command`` refuses two sources whose names are
    still one (``llama-3.1-8b`` and ``Llama-3.1-8B``). ``limit`` is shorter for a name others
    extend (a Helm release's ``<release>-epp``)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if len(name) <= limit:
        return name or "model"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    keep = limit - NAME_DIGEST_CHARS - 1
    return f"{name[:keep].rstrip('-')}-{digest[:NAME_DIGEST_CHARS]}"


def by_model(plans: Sequence[ClassPlan]) -> dict[str, list[ClassPlan]]:
    grouped: dict[str, list[ClassPlan]] = {}
    for plan in plans:
        grouped.setdefault(plan.model, []).append(plan)
    return grouped


def safest(plans: Sequence[ClassPlan]) -> ClassPlan:
    """The class whose SLO batch is smallest: a per-replica threshold from it holds on every
    class (pick one with ``--class`` for a Deployment pinned to one)."""
    return min(plans, key=lambda p: (p.max_batch, p.max_batch_by_memory, p.gpu_class))


def classes_note(plans: Sequence[ClassPlan], chosen: ClassPlan) -> str:
    if len(plans) == 1:
        return f"GPU class {chosen.gpu_class}"
    others = ", ".join(p.gpu_class for p in plans if p is not chosen)
    return (
        f"GPU class {chosen.gpu_class}, the smallest SLO batch of the classes that serve it "
        f"(also {others}), so that it holds on every one; --class picks one"
    )
