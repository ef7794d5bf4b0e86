"""Names that cross the boundary between the operator and the cluster (see docs/contracts.md).

Kept in one place because the CRD, the pods, the node labels and the metrics must agree on them.
"""

from __future__ import annotations

import enum
from datetime import datetime, timezone
from typing import Any

GROUP = "roofline.dev"
VERSION = "v1alpha1"
PLURAL = "rooflineprofiles"
KIND = "RooflineProfile"
API_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = f"{PLURAL}.{GROUP}"

FINALIZER = "roofline.dev/cleanup"
ANNOTATION_PREFIX = "roofline.dev"

# Profiler pod labels. The profile and node labels hold label-safe forms of the names
# (``labels.label_safe``): a label value has at most 63 characters, a node name up to 253.
LABEL_APP_NAME = "app.kubernetes.io/name"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
APP_NAME = "roofline-profiler"
MANAGED_BY = "roofline-operator"
LABEL_PROFILE = "roofline.dev/profile"
LABEL_NODE = "roofline.dev/node"
CONTAINER_NAME = "profiler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"

# Profiler pod annotations: the full profile and node names, which attempt of which spec the pod
# measures.
ANNOTATION_PROFILE = "roofline.dev/profile"
ANNOTATION_NODE = "roofline.dev/node"
ANNOTATION_ATTEMPT = "roofline.dev/attempt"
ANNOTATION_SPEC_HASH = "roofline.dev/spec-hash"

# The durable per-node record of a profile (``records.py``): an annotation on the Node (or on its
# NodeFeature), one key per profile, ``record.roofline.dev/<label-safe profile name>``.
ANNOTATION_RECORD_PREFIX = "record.roofline.dev/"

# Node labels. ``LABEL_PROFILE`` doubles as the owner of a node's labels.
LABEL_RIDGE_POINT = "roofline.dev/ridge-point"
LABEL_MIN_BATCH = "roofline.dev/min-batch"
LABEL_BANDWIDTH_GBPS = "roofline.dev/bandwidth-gbps"
LABEL_PEAK_TFLOPS = "roofline.dev/peak-tflops"
#: The node's class: the label-safe form (``labels.label_safe``) of the device its own profiler pod
#: measured (a GPU's product name, a CPU's model name), never a value copied from another label.
#: It names the fleet view's peer group and is the stable selector of exported Kueue flavors.
LABEL_CLASS = "roofline.dev/class"
#: The kind of device the node's labels describe: ``gpu`` or ``cpu``, the ``spec.device`` of the
#: profile that owns them (the oldest profile selecting the node, which may be a CPU profile on a
#: node with GPUs): a selector that means GPU numbers requires ``roofline.dev/device=gpu``.
LABEL_DEVICE = "roofline.dev/device"
NODE_LABEL_KEYS = (
    LABEL_RIDGE_POINT,
    LABEL_MIN_BATCH,
    LABEL_BANDWIDTH_GBPS,
    LABEL_PEAK_TFLOPS,
    LABEL_PROFILE,
    LABEL_CLASS,
    LABEL_DEVICE,
)

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


class NodeState(str, enum.Enum):
    """Where a node stands in its profiling cycle; the CRD's status enum lists the same values."""

    QUEUED = "Queued"
    PROFILING = "Profiling"
    PROFILED = "Profiled"
    RETRYING = "Retrying"
    FAILED = "Failed"
    #: Still matching the selector but not schedulable now (NotReady, cordoned or tainted, no
    #: allocatable GPUs): its record and labels stay for ``spec.retainUnavailableFor``.
    UNAVAILABLE = "Unavailable"
    #: The pod stayed Pending unbound past ``pendingTimeoutSeconds`` (the node's GPUs are busy,
    #: a taint or a missing runtime class): not a failure, it is tried again later.
    UNSCHEDULABLE = "Unschedulable"


class FailureReason(str, enum.Enum):
    """Why one attempt on one node failed: a bounded set, used as a metric label value."""

    POD_FAILED = "PodFailed"
    OOM_KILLED = "OOMKilled"
    TIMEOUT = "Timeout"
    #: Bound to the node but its container never started (image pull, runtime class, volume).
    NOT_STARTED = "NotStarted"
    INVALID_RESULT = "InvalidResult"
    #: A result measured on another backend than the pod was given: a GPU pod that saw no GPU
    #: and measured the CPU (runtime class, device plugin, driver), or a CPU pod that found one.
    WRONG_DEVICE = "WrongDevice"
    POD_REJECTED = "PodRejected"
    POD_GONE = "PodGone"
    NODE_GONE = "NodeGone"


def format_time(seconds: float | None) -> str | None:
    """A Kubernetes timestamp (RFC 3339, UTC, whole seconds) of unix ``seconds``."""
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


def parse_time(text: Any) -> float | None:
    """Unix seconds of a Kubernetes RFC 3339 timestamp, or ``None`` if absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
