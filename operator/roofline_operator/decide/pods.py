"""Profiler pods: the pure builder, and the facts the operator reads back from the watch.

A profiler pod takes a node's GPUs for one measurement and then ends; it carries its result in the
termination message, so the operator needs neither a volume nor a log read to collect it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline_operator.core.names import (
    ANNOTATION_ATTEMPT,
    ANNOTATION_NODE,
    ANNOTATION_PROFILE,
    ANNOTATION_SPEC_HASH,
    API_VERSION,
    APP_NAME,
    CONTAINER_NAME,
    KIND,
    LABEL_APP_NAME,
    LABEL_MANAGED_BY,
    LABEL_NODE,
    LABEL_PROFILE,
    MANAGED_BY,
    TERMINATION_MESSAGE_PATH,
    parse_time,
)
from roofline_operator.core.spec import ProfileSpec
from roofline_operator.core.workload_spec import workload_arguments
from roofline_operator.decide.asked import ProfilerAsk, asked_of
from roofline_operator.decide.labels import label_safe
from roofline_operator.decide.model_sources import MODELS_FILE_KEY
from roofline_operator.decide.pod_resources import container_resources

#: The profiler runs as this unprivileged user (the image's non-root user).
PROFILER_UID = 65532
#: Nodes named in one DELETE-collection request, which keeps its label selector (and URL) short.
MAX_NODES_PER_COLLECTION = 100
#: Pods past these phases hold no GPU: only they may be deleted by collection.
FINISHED_POD_FIELDS = "status.phase!=Pending,status.phase!=Running"


@dataclass(frozen=True)
class ProfileRef:
    """The owning RooflineProfile, enough for owner references and labels."""

    name: str
    uid: str


@dataclass(frozen=True)
class PodDefaults:
    """What the operator's configuration adds to every profiler pod (chart values)."""

    #: Secrets (in the profiler pods' namespace) to pull the profiler image with.
    image_pull_secrets: tuple[str, ...] = ()
    #: Service account of profiler pods; ``None`` leaves the namespace's ``default``.
    service_account: str | None = None


def _slug(text: str, limit: int) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return slug[:limit].strip("-") or "x"


def profiler_pod_name(profile: str, node: str, spec_hash: str, attempt: int) -> str:
    """A deterministic name per (profile, node, spec, attempt), at most 63 characters.

    Determinism is what makes a create idempotent: after a restart, or when the watch lags behind
    our own create, a second create of the same attempt is answered 409 instead of starting a
    second pod on the same GPUs.
    """
    digest = hashlib.sha256(f"{profile}\0{node}\0{spec_hash}\0{attempt}".encode()).hexdigest()[:8]
    return f"roofline-{_slug(profile, 20)}-{_slug(node, 24)}-{digest}"


#: Where the pod mounts the ConfigMap of its models (``model_sources``) and the file in it.
MODELS_MOUNT_PATH = "/etc/roofline/models"
MODELS_FILE = f"{MODELS_MOUNT_PATH}/{MODELS_FILE_KEY}"


#: The profiler's ``--device`` for each ``spec.device``: never ``all``, which falls back to the
#: CPU when the container sees no GPU; ``cuda`` (CUDA and ROCm alike) refuses to start instead.
DEVICE_ARGUMENT = {"gpu": "cuda", "cpu": "cpu"}


def profiler_command(spec: ProfileSpec, models: bool = False) -> list[str]:
    """The pod's command; with ``models`` it plans the models of its mounted models file."""
    device = DEVICE_ARGUMENT[spec.device]
    command = ["roofline", "profile", "--device", device, "--dtype", spec.dtype]
    if spec.shape is not None:
        command += ["--shape", f"{spec.shape[0]}x{spec.shape[1]}"]
    if spec.batches:
        command += ["--batches", ",".join(str(b) for b in spec.batches)]
    if spec.min_batch_efficiency_percent is not None:
        command += ["--min-batch-efficiency", str(spec.min_batch_efficiency_percent)]
    if spec.quick:
        command.append("--quick")
    if models:
        command += ["--models-file", MODELS_FILE]
        if spec.itl_slo_seconds is not None:
            command += ["--itl-slo", f"{spec.itl_slo_seconds:g}s"]
        command += workload_arguments(spec.workload, spec.ttft_slo_seconds)
        if spec.gpu_hour_cost is not None:
            command += ["--gpu-hour-cost", str(spec.gpu_hour_cost)]
    return [*command, "--compact", TERMINATION_MESSAGE_PATH]


def build_profiler_pod(
    *,
    profile: ProfileRef,
    spec: ProfileSpec,
    node: str,
    gpus: int,
    attempt: int,
    spec_hash: str,
    namespace: str,
    image: str,
    models_config_map: str | None = None,
    defaults: PodDefaults | None = None,
) -> dict[str, Any]:
    """The Pod that profiles ``node`` once."""
    models = models_config_map is not None
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}]
    if models_config_map is not None:
        volumes.append({"name": "models", "configMap": {"name": models_config_map}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _pod_metadata(profile, node, attempt, spec_hash, namespace),
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "activeDeadlineSeconds": spec.timeout_seconds,
            "affinity": node_pinning(node),
            "tolerations": [dict(t) for t in spec.raw_tolerations],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": PROFILER_UID,
                "runAsGroup": PROFILER_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [profiler_container(spec, gpus, image, models)],
            "volumes": volumes,
            **pod_placement(spec, defaults or PodDefaults()),
        },
    }


def _pod_metadata(
    profile: ProfileRef, node: str, attempt: int, spec_hash: str, namespace: str
) -> dict[str, Any]:
    """Name, labels, annotations and owner of a profiler pod.

    Labels carry label-safe forms of the profile and node names (for selectors), annotations the
    full names (for reading back): a node name may be longer than a label value may be.
    """
    return {
        "name": profiler_pod_name(profile.name, node, spec_hash, attempt),
        "namespace": namespace,
        "labels": {
            LABEL_APP_NAME: APP_NAME,
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_PROFILE: label_safe(profile.name),
            LABEL_NODE: label_safe(node),
        },
        "annotations": {
            ANNOTATION_PROFILE: profile.name,
            ANNOTATION_NODE: node,
            ANNOTATION_ATTEMPT: str(attempt),
            ANNOTATION_SPEC_HASH: spec_hash,
        },
        "ownerReferences": [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": profile.name,
                "uid": profile.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def node_pinning(node: str) -> dict[str, Any]:
    """The affinity that pins a pod to ``node``.

    A required node affinity on ``metadata.name`` rather than ``spec.nodeName``, so that the
    scheduler still runs and accounts for the GPUs the pod requests: a GPU held by a serving pod
    keeps the profiler Pending instead of oversubscribing the device.
    """
    match = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [match]}]
            }
        }
    }


def profiler_container(spec: ProfileSpec, gpus: int, image: str, models: bool) -> dict[str, Any]:
    """The one container: the profiler's command, its GPUs, a locked-down security context, a
    writable ``/tmp``, and with ``models`` the mounted models file."""
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if models:
        mounts.append({"name": "models", "mountPath": MODELS_MOUNT_PATH, "readOnly": True})
    return {
        "name": CONTAINER_NAME,
        "image": spec.image or image,
        "imagePullPolicy": "IfNotPresent",
        "command": profiler_command(spec, models),
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "MPLCONFIGDIR", "value": "/tmp"},
            # The profiler names the host in its result after this, not after the pod.
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "resources": container_resources(spec, gpus),
        "terminationMessagePath": TERMINATION_MESSAGE_PATH,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }


def pod_placement(spec: ProfileSpec, defaults: PodDefaults) -> dict[str, Any]:
    """Pull secrets, service account, priority and runtime class of a profiler pod.

    Pull secrets are the operator's and the profile's together (a profile may name a registry
    the chart does not know); the profile's service account replaces the operator's. The token
    stays unmounted either way: the profiler never calls the API.
    """
    fields: dict[str, Any] = {}
    secrets = list(dict.fromkeys([*defaults.image_pull_secrets, *spec.image_pull_secrets]))
    if secrets:
        fields["imagePullSecrets"] = [{"name": name} for name in secrets]
    account = spec.service_account or defaults.service_account
    if account:
        fields["serviceAccountName"] = account
    if spec.priority_class:
        fields["priorityClassName"] = spec.priority_class
    if spec.runtime_class:
        fields["runtimeClassName"] = spec.runtime_class
    return fields


@dataclass(frozen=True)
class Terminated:
    exit_code: int | None
    reason: str | None
    message: str | None


@dataclass(frozen=True)
class PodFacts:
    """The fields of a profiler pod the reconcile round reads (kept in the pod cache, ``cache``)."""

    name: str
    namespace: str
    profile: str
    node: str
    attempt: int
    spec_hash: str
    phase: str
    reason: str | None = None
    created_at: float | None = None
    started_at: float | None = None
    deleting: bool = False
    bound: bool = False
    scheduler_message: str | None = None
    waiting_reason: str | None = None
    terminated: Terminated | None = None
    #: UIDs of the RooflineProfiles its owner references name (``provenance.py`` checks them).
    owner_uids: tuple[str, ...] = ()
    #: Its ``roofline.dev/profile`` and ``roofline.dev/node`` labels: what a DELETE-collection
    #: selects pods by (``finished_pod_collections``), whatever the annotations say.
    profile_label: str = ""
    node_label: str = ""
    #: What its command asks to measure; its result must answer that (``asked.py``).
    asked: ProfilerAsk | None = None


def _container_argv(spec: Mapping[str, Any]) -> list[str]:
    """The profiler container's command and arguments, as the pod was created with them."""
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    named = [c for c in containers if c.get("name") == CONTAINER_NAME]
    container: Mapping[str, Any] = (named or containers or [{}])[0]
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    return [str(a) for a in argv]


def _container_status(status: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = status.get("containerStatuses") or []
    named = [s for s in statuses if s.get("name") == CONTAINER_NAME]
    first: Mapping[str, Any] = (named or statuses or [{}])[0]
    return first


def pod_facts(body: Mapping[str, Any]) -> PodFacts:
    """Extract :class:`PodFacts` from a Pod object as served by the API.

    Profile and node names come from the annotations, which hold them whole; the labels are the
    fallback for pods created before the annotations existed, whose names fit a label anyway.
    """
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    status = body.get("status") or {}
    state = _container_status(status).get("state") or {}
    terminated = state.get("terminated")
    scheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    try:
        attempt = int(annotations.get(ANNOTATION_ATTEMPT, "1"))
    except ValueError:
        attempt = 1
    running = state.get("running") or {}
    owners = metadata.get("ownerReferences") or []
    return PodFacts(
        name=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace", "")),
        profile=str(annotations.get(ANNOTATION_PROFILE) or labels.get(LABEL_PROFILE, "")),
        node=str(annotations.get(ANNOTATION_NODE) or labels.get(LABEL_NODE, "")),
        attempt=attempt,
        spec_hash=str(annotations.get(ANNOTATION_SPEC_HASH, "")),
        phase=str(status.get("phase") or "Pending"),
        reason=status.get("reason"),
        created_at=parse_time(metadata.get("creationTimestamp")),
        started_at=parse_time(running.get("startedAt")) or parse_time(status.get("startTime")),
        deleting=metadata.get("deletionTimestamp") is not None,
        bound=bool((body.get("spec") or {}).get("nodeName")),
        scheduler_message=scheduled[0].get("message") if scheduled else None,
        waiting_reason=(state.get("waiting") or {}).get("reason"),
        terminated=None
        if terminated is None
        else Terminated(
            exit_code=terminated.get("exitCode"),
            reason=terminated.get("reason"),
            message=terminated.get("message"),
        ),
        owner_uids=tuple(
            str(ref.get("uid"))
            for ref in owners
            if isinstance(ref, Mapping) and ref.get("kind") == KIND and ref.get("uid")
        ),
        profile_label=str(labels.get(LABEL_PROFILE, "")),
        node_label=str(labels.get(LABEL_NODE, "")),
        asked=asked_of(_container_argv(body.get("spec") or {})),
    )


@dataclass(frozen=True)
class PodCollection:
    """One DELETE-collection request: finished pods of one profile on some nodes of a namespace."""

    namespace: str
    label_selector: str
    field_selector: str
    #: The pods the request is meant to delete, for the fallback of one delete per pod.
    pods: tuple[str, ...]


def finished_pod_collections(
    profile: str, pods: Sequence[PodFacts], watched: Iterable[PodFacts] = ()
) -> tuple[list[PodCollection], list[PodFacts]]:
    """Group finished pods into DELETE-collection requests of at most 100 nodes each; the
    pods that must go one by one instead.

    Deleting finished pods by collection costs one request per hundred nodes instead of one per
    node. The selectors name the nodes and require a finished phase, so a pod that is still
    running (or one created after the request) can never be caught. They cannot see owner
    references, though: a node where the watch shows any other pod with the selector's labels
    (``watched``: every pod the operator watches; a look-alike that is not ours, in any phase)
    is left out, and its finished pod is deleted by name, so the collection never deletes a
    foreign pod the operator has seen.
    """
    mine = {(p.namespace, p.name) for p in pods}
    safe_profile = label_safe(profile)
    crowded = {
        (p.namespace, p.node_label)
        for p in watched
        if p.profile_label == safe_profile and (p.namespace, p.name) not in mine
    }
    singles = [p for p in pods if (p.namespace, label_safe(p.node)) in crowded]
    by_namespace: dict[str, list[PodFacts]] = {}
    for pod in pods:
        if (pod.namespace, label_safe(pod.node)) not in crowded:
            by_namespace.setdefault(pod.namespace, []).append(pod)
    collections: list[PodCollection] = []
    for namespace, members in sorted(by_namespace.items()):
        nodes = sorted({label_safe(p.node) for p in members})
        for start in range(0, len(nodes), MAX_NODES_PER_COLLECTION):
            chunk = nodes[start : start + MAX_NODES_PER_COLLECTION]
            chosen = set(chunk)
            selector = (
                f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_PROFILE}={safe_profile},"
                f"{LABEL_NODE} in ({','.join(chunk)})"
            )
            names = tuple(p.name for p in members if label_safe(p.node) in chosen)
            collections.append(PodCollection(namespace, selector, FINISHED_POD_FIELDS, names))
    return collections, singles
