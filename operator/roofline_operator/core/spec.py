"""A RooflineProfile's spec as a typed, validated value.

The CRD schema and its CEL rules reject most mistakes at admission, but an API server without
them (an old cluster, a schema-less emulator, an object stored before a CRD upgrade) can still
hand over anything. Parsing here turns such a spec into one :class:`SpecError` line for the
``Ready`` condition instead of an exception inside a reconcile round.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from roofline_operator.core.model_spec import (
    ModelSpec,
    ModelSpecError,
    model_fields_for_hash,
    parse_cost,
    parse_models,
    parse_slo,
)
from roofline_operator.core.resources_spec import parse_resources
from roofline_operator.core.selection_spec import (
    NodeSelection,
    parse_gpu_resource,
    parse_node_selection,
    parse_tolerations,
)
from roofline_operator.core.spec_fields import (
    SpecError,
    bounded_field,
    integer_field,
    optional_str,
)
from roofline_operator.core.workload_spec import (
    PlannedWorkload,
    parse_ttft_slo,
    parse_workload,
    workload_fields_for_hash,
)
from roofline_profiler.core import limits, units

DEFAULT_DTYPE = "bfloat16"
DEFAULT_MAX_PARALLEL = 4
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_PENDING_TIMEOUT_SECONDS = 300
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_RETRY_BACKOFF_SECONDS = 30
#: How long a node that left the selection for readiness, a cordon or a taint, or a reading of no
#: allocatable GPUs (a device plugin restarting) keeps its record and labels (``spec.
#: retainUnavailableFor``): long enough for a reboot, a drain or a driver upgrade.
DEFAULT_RETAIN_UNAVAILABLE = "1h"
#: The longest ``retainUnavailableFor``: thirty days.
MAX_RETAIN_UNAVAILABLE_SECONDS = 30 * 86400.0
#: A published bandwidth, peak or ridge point that moves by more than this (percent) is news.
DEFAULT_CHANGE_THRESHOLD_PERCENT = 10
#: A node more than this (percent) below its GPU class's median bandwidth or peak, beyond its
#: uncertainty, is slower than its peers (``decide/peers.py``).
DEFAULT_OUTLIER_THRESHOLD_PERCENT = 10
#: Retry delays double per attempt but never exceed this.
MAX_RETRY_BACKOFF_SECONDS = 3600.0

#: Units of ``reprofileInterval`` and ``retainUnavailableFor``, as the CRD's pattern allows.
CRD_INTERVAL_UNITS = ("ms", "s", "m", "h")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
#: A DNS subdomain (RFC 1123): the names of Secrets, ServiceAccounts, PriorityClasses and
#: RuntimeClasses.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string (``90s``, ``1h30m``, ``168h``), the CRD's format.

    Go's format is what CEL's ``duration()`` accepts, so the schema and the operator agree; the
    units are the CRD pattern's.
    """
    if not isinstance(text, str) or not text:
        raise SpecError(f"duration {text!r} is empty")
    try:
        return units.parse_duration(text, CRD_INTERVAL_UNITS)
    except units.DurationError:
        raise SpecError(f"duration {text!r} is not like '90s', '30m' or '168h'") from None


@dataclass(frozen=True)
class ProfileSpec:
    selection: NodeSelection
    image: str | None
    resources: Mapping[str, Any]
    raw_tolerations: tuple[Mapping[str, Any], ...]
    namespace: str | None
    dtype: str
    shape: tuple[int, int] | None
    batches: tuple[int, ...]
    min_batch_efficiency_percent: int | None
    quick: bool
    max_parallel: int
    reprofile_interval_seconds: float | None
    timeout_seconds: int
    pending_timeout_seconds: int
    max_attempts: int
    retry_backoff_seconds: int
    label_nodes: bool
    #: Seconds an unavailable but still matching node keeps its record and labels.
    retain_unavailable_seconds: float = 3600.0
    #: Relative change (percent) of a published bandwidth, peak or ridge point, beyond noise,
    #: that raises a ``DeviceChanged`` Event and condition.
    change_threshold_percent: int = DEFAULT_CHANGE_THRESHOLD_PERCENT
    #: How far (percent) below its GPU class's median bandwidth or peak, beyond its uncertainty,
    #: a node is slower than its peers: a ``SlowerThanPeers`` Event, condition and gauge.
    outlier_threshold_percent: int = DEFAULT_OUTLIER_THRESHOLD_PERCENT
    models: tuple[ModelSpec, ...] = ()
    #: ``spec.slo.interTokenLatency`` in seconds, and as the user wrote it.
    itl_slo_seconds: float | None = None
    itl_slo: str | None = None
    #: ``spec.workload`` and ``spec.slo.timeToFirstToken`` (seconds, and as written): what the
    #: plan's largest sustainable request rate is computed for (``workload_spec``).
    workload: PlannedWorkload | None = None
    ttft_slo_seconds: float | None = None
    ttft_slo: str | None = None
    gpu_hour_cost: Decimal | None = None
    #: Secrets to pull the profiler image with, besides the operator's own.
    image_pull_secrets: tuple[str, ...] = ()
    service_account: str | None = None
    #: A priority class lets the pod preempt lower-priority serving pods on a busy node.
    priority_class: str | None = None
    #: A runtime class such as ``nvidia`` where the GPU runtime is not the default.
    runtime_class: str | None = None

    @property
    def device(self) -> str:
        """``gpu`` or ``cpu``: what the profiler pods measure (``selection_spec.DEVICES``)."""
        return self.selection.device

    def retry_delay(self, failed_attempts: int) -> float:
        """Exponential backoff: the base delay, doubled for every further failed attempt."""
        exponent = max(failed_attempts - 1, 0)
        return float(min(self.retry_backoff_seconds * 2.0**exponent, MAX_RETRY_BACKOFF_SECONDS))

    def measurement_hash(self, extra: str = "") -> str:
        """A short digest of the fields that change what a profile measures.

        Nodes profiled under another digest are re-profiled; scheduling knobs (parallelism,
        timeouts, labels) are left out so that tuning them costs no GPU time. ``extra`` carries
        what the spec only refers to (the content of a model's ConfigMap).
        """
        fields = {
            "device": self.device,
            "image": self.image,
            "dtype": self.dtype,
            "shape": self.shape,
            "batches": self.batches,
            "efficiency": self.min_batch_efficiency_percent,
            "quick": self.quick,
            "gpuResource": self.selection.gpu_resource,
            "gpusPerNode": self.selection.gpus_per_node,
            "resources": self.resources,
            **model_fields_for_hash(self.models, self.itl_slo_seconds, self.gpu_hour_cost),
            **(
                workload_fields_for_hash(self.workload, self.ttft_slo_seconds)
                if self.models
                else {}
            ),
        }
        if extra:
            fields["resolved"] = extra
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


#: The message for a ``shape`` that lost its ``n``: YAML 1.1 (kubectl) reads a bare ``n`` key as
#: the boolean false, so ``{k: 4096, n: 14336}`` arrives as ``{"k": 4096, "false": 14336}``.
SHAPE_FALSE_KEY_MESSAGE = (
    'spec.shape has a key "false": YAML 1.1 readers such as kubectl read a bare n as false; '
    'quote it ("n": 14336) or use weightShape: "4096x14336"'
)
SHAPE_INCOMPLETE_MESSAGE = (
    'spec.shape needs both k and "n" (a bare n is read as false by kubectl); '
    'or use weightShape: "KxN"'
)
_WEIGHT_SHAPE = re.compile(r"([1-9][0-9]{0,6})x([1-9][0-9]{0,6})")


def _shape(raw: Any) -> tuple[int, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecError("spec.shape must be an object with k and n")
    if "false" in raw or False in raw:
        raise SpecError(SHAPE_FALSE_KEY_MESSAGE)
    k = integer_field(raw, "k", None, limits.MIN_DIMENSION, limits.MAX_DIMENSION)
    n = integer_field(raw, "n", None, limits.MIN_DIMENSION, limits.MAX_DIMENSION)
    if k is None or n is None:
        raise SpecError(SHAPE_INCOMPLETE_MESSAGE)
    try:
        return limits.check_shape(k, n)
    except limits.LimitError as exc:
        raise SpecError(f"spec.shape: {exc}") from None


def _weight_shape(spec: Mapping[str, Any]) -> tuple[int, int] | None:
    """``weightShape: "KxN"`` (preferred: YAML cannot misread it) or the older ``shape``."""
    text = spec.get("weightShape")
    if text is None or text == "":
        return _shape(spec.get("shape"))
    if spec.get("shape") is not None:
        raise SpecError("spec: set weightShape or shape, not both")
    match = _WEIGHT_SHAPE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise SpecError(f'spec.weightShape must be "KxN" such as "4096x14336", got {text!r}')
    try:
        return limits.check_shape(int(match.group(1)), int(match.group(2)))
    except limits.LimitError as exc:
        raise SpecError(f"spec.weightShape: {exc}") from None


def _batches(raw: Any) -> tuple[int, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("spec.batches must be a list of integers")
    if not raw:
        return ()
    try:
        batches = limits.check_batches(raw)
    except limits.LimitError as exc:
        raise SpecError(f"spec.batches: {exc}") from None
    if len(batches) != len(raw):
        raise SpecError("spec.batches must not repeat a batch size")
    return batches


def _object_name(spec: Mapping[str, Any], key: str) -> str | None:
    value = optional_str(spec, key)
    if value is not None and (len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value)):
        raise SpecError(f"spec.{key} {value!r} is not a valid object name")
    return value


def _pull_secrets(raw: Any) -> tuple[str, ...]:
    """``imagePullSecrets: [{name: regcred}]``, the form a Pod takes."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("spec.imagePullSecrets must be a list of {name: ...}")
    names = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
            raise SpecError(f"spec.imagePullSecrets[{i}] needs the name of a Secret")
        names.append(name)
    return tuple(names)


def parse_spec(spec: Mapping[str, Any]) -> ProfileSpec:
    """Validate ``spec`` (with the CRD's defaults filled in) into a :class:`ProfileSpec`.

    The fields are checked in a fixed order, so a spec with several mistakes always names the
    same one first.
    """
    gpu_resource = parse_gpu_resource(spec)
    namespace = _namespace(spec)
    dtype = _dtype(spec)
    interval = _reprofile_interval(spec)
    retain = _retain_unavailable(spec)
    resources = parse_resources(spec.get("resources"))
    efficiency = integer_field(
        spec,
        "minBatchEfficiencyPercent",
        None,
        limits.MIN_EFFICIENCY_PERCENT,
        limits.MAX_EFFICIENCY_PERCENT,
    )
    tolerations, raw_tolerations = parse_tolerations(spec.get("tolerations"))
    label_nodes = spec.get("labelNodes", True)
    quick = spec.get("quick", False)
    if not isinstance(label_nodes, bool) or not isinstance(quick, bool):
        raise SpecError("spec.labelNodes and spec.quick must be true or false")
    return ProfileSpec(
        selection=parse_node_selection(spec, gpu_resource, tolerations),
        image=optional_str(spec, "image"),
        resources=resources,
        raw_tolerations=raw_tolerations,
        namespace=namespace,
        dtype=dtype,
        shape=_weight_shape(spec),
        batches=_batches(spec.get("batches")),
        min_batch_efficiency_percent=efficiency,
        quick=quick,
        max_parallel=bounded_field(spec, "maxParallel", DEFAULT_MAX_PARALLEL),
        reprofile_interval_seconds=interval,
        timeout_seconds=bounded_field(spec, "timeoutSeconds", DEFAULT_TIMEOUT_SECONDS),
        pending_timeout_seconds=bounded_field(
            spec, "pendingTimeoutSeconds", DEFAULT_PENDING_TIMEOUT_SECONDS
        ),
        max_attempts=bounded_field(spec, "maxAttempts", DEFAULT_MAX_ATTEMPTS),
        retry_backoff_seconds=bounded_field(
            spec, "retryBackoffSeconds", DEFAULT_RETRY_BACKOFF_SECONDS
        ),
        label_nodes=label_nodes,
        retain_unavailable_seconds=retain,
        change_threshold_percent=bounded_field(
            spec, "changeThresholdPercent", DEFAULT_CHANGE_THRESHOLD_PERCENT
        ),
        outlier_threshold_percent=bounded_field(
            spec, "outlierThresholdPercent", DEFAULT_OUTLIER_THRESHOLD_PERCENT
        ),
        image_pull_secrets=_pull_secrets(spec.get("imagePullSecrets")),
        service_account=_object_name(spec, "serviceAccountName"),
        priority_class=_object_name(spec, "priorityClassName"),
        runtime_class=_object_name(spec, "runtimeClassName"),
        **_model_fields(spec),
    )


def _namespace(spec: Mapping[str, Any]) -> str | None:
    namespace = optional_str(spec, "namespace")
    if namespace is not None and not _NAMESPACE.fullmatch(namespace):
        raise SpecError(f"spec.namespace {namespace!r} is not a valid namespace name")
    return namespace


def _dtype(spec: Mapping[str, Any]) -> str:
    dtype = optional_str(spec, "dtype") or DEFAULT_DTYPE
    if dtype not in limits.DTYPE_NAMES:
        raise SpecError(f"spec.dtype must be one of {', '.join(limits.DTYPE_NAMES)}, got {dtype!r}")
    return dtype


def _reprofile_interval(spec: Mapping[str, Any]) -> float | None:
    """``reprofileInterval`` in seconds, at least a minute; ``None``: profile once."""
    text = optional_str(spec, "reprofileInterval")
    interval = parse_duration(text) if text else None
    if interval is not None and interval < 60:
        raise SpecError(f"spec.reprofileInterval must be at least 1m, got {text!r}")
    return interval


def _retain_unavailable(spec: Mapping[str, Any]) -> float:
    """``retainUnavailableFor`` in seconds, at most :data:`MAX_RETAIN_UNAVAILABLE_SECONDS`."""
    text = optional_str(spec, "retainUnavailableFor") or DEFAULT_RETAIN_UNAVAILABLE
    try:
        retain = parse_duration(text)
    except SpecError as exc:
        raise SpecError(f"spec.retainUnavailableFor: {exc}") from None
    if retain > MAX_RETAIN_UNAVAILABLE_SECONDS:
        raise SpecError(f"spec.retainUnavailableFor must be at most 720h, got {text!r}")
    return retain


def check_namespace(spec: ProfileSpec, watched: tuple[str, ...]) -> None:
    """``spec.namespace`` must be one of the operator's profiler namespaces: only there does it
    watch pods and may create them (``--extra-namespace``, the chart's
    ``rbac.extraProfilerNamespaces``)."""
    if spec.namespace is not None and spec.namespace not in watched:
        raise SpecError(
            f"spec.namespace {spec.namespace!r} is not a profiler namespace of the operator "
            f"({', '.join(watched)}); add it to the chart's rbac.extraProfilerNamespaces"
        )


def _model_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    try:
        slo_seconds, slo = parse_slo(spec.get("slo"))
        workload = parse_workload(spec.get("workload"))
        ttft_seconds, ttft = parse_ttft_slo(spec.get("slo"), workload)
        return {
            "workload": workload,
            "ttft_slo_seconds": ttft_seconds,
            "ttft_slo": ttft,
            "models": parse_models(spec.get("models")),
            "itl_slo_seconds": slo_seconds,
            "itl_slo": slo,
            "gpu_hour_cost": parse_cost(spec.get("gpuHourCost")),
        }
    except ModelSpecError as exc:
        raise SpecError(str(exc)) from None
