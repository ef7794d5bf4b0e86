"""Node labels: label-safe numbers, the labels of a profiled node, and who may write them.

Labels are for scheduling (node selectors, Kueue ResourceFlavors), so they must be stable strings
that a selector can match: integers where the value is a count, at most one decimal otherwise.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from roofline_operator.core.names import (
    LABEL_BANDWIDTH_GBPS,
    LABEL_CLASS,
    LABEL_DEVICE,
    LABEL_MIN_BATCH,
    LABEL_PEAK_TFLOPS,
    LABEL_PROFILE,
    LABEL_RIDGE_POINT,
    NODE_LABEL_KEYS,
    parse_time,
)
from roofline_operator.core.node_results import DEVICE_KINDS, GpuResult
from roofline_operator.core.nodes import NodeFacts, select_nodes
from roofline_operator.core.selection_spec import NodeSelection
from roofline_operator.core.spec import parse_spec
from roofline_operator.core.spec_fields import SpecError

#: The Kubernetes label value syntax (apimachinery ``validation.IsValidLabelValue``), for
#: ``fullmatch``: ``match`` with ``$`` accepts a trailing newline.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_LABEL_VALUE_CHARS = 63
#: Hex digits of the digest that keeps two shortened names apart.
LABEL_DIGEST_CHARS = 10


def label_safe(name: str) -> str:
    """``name`` itself when it is a valid label value, else a shortened prefix plus a digest.

    Node names may have 253 characters and profile names too, a label value only 63. Selectors
    and ownership checks compare the same mapping of the full name (kept in an annotation), so the
    digest makes two names that share a long prefix distinct labels.
    """
    if len(name) <= MAX_LABEL_VALUE_CHARS and LABEL_VALUE.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:LABEL_DIGEST_CHARS]
    keep = MAX_LABEL_VALUE_CHARS - LABEL_DIGEST_CHARS - 1
    prefix = re.sub(r"[^-A-Za-z0-9_.]", "-", name[:keep])
    prefix = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", prefix)
    return f"{prefix}-{digest}" if prefix else digest


def format_label_value(value: float, decimals: int = 1) -> str:
    """``value`` as a label value: rounded to ``decimals`` places, trailing zeros dropped.

    ``153.0`` becomes ``"153"``, ``48.25`` becomes ``"48.2"``; negative or non-finite numbers have
    no label form (a leading ``-`` is not allowed) and raise ``ValueError``.
    """
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{value!r} cannot be a label value")
    text = f"{round(value, decimals):.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if len(text) > MAX_LABEL_VALUE_CHARS or not LABEL_VALUE.fullmatch(text):
        raise ValueError(f"{value!r} does not fit a label value")
    return text


def node_labels_for(gpu: GpuResult, profile: str, device: str = "gpu") -> dict[str, str]:
    """The labels that describe a node by ``gpu``, its worst GPU (or its CPU, for a ``device:
    cpu`` profile), owned by ``profile``.

    The owner label holds :func:`label_safe` of the profile name, which is the name itself for
    any name of at most 63 characters. The class label holds :func:`label_safe` of the product
    the node's own pod measured (``status.nodes[].product``): what the fleet view classes it by
    and what exported Kueue flavors select, never a value copied from another label. The device
    label says which kind of device every number describes.
    """
    if device not in DEVICE_KINDS:
        raise ValueError(f"device {device!r} is not one of {', '.join(DEVICE_KINDS)}")
    return {
        LABEL_RIDGE_POINT: format_label_value(gpu.ridge_point),
        LABEL_MIN_BATCH: str(gpu.recommended_min_batch),
        LABEL_BANDWIDTH_GBPS: format_label_value(gpu.bandwidth_bytes_per_second / 1e9, 0),
        LABEL_PEAK_TFLOPS: format_label_value(gpu.peak_flops_per_second / 1e12),
        LABEL_PROFILE: label_safe(profile),
        LABEL_CLASS: label_safe(gpu.product),
        LABEL_DEVICE: device,
    }


def label_patch(
    current: Mapping[str, str], desired: Mapping[str, str] | None
) -> dict[str, str | None] | None:
    """The merge patch of ``metadata.labels`` from ``current`` to ``desired``, or ``None``.

    ``desired=None`` removes our labels. ``None`` values in a JSON merge patch delete keys, which
    leaves every label that is not ours untouched.
    """
    target: Mapping[str, str | None] = desired or dict.fromkeys(NODE_LABEL_KEYS)
    patch = {k: v for k, v in target.items() if current.get(k) != v}
    for key in NODE_LABEL_KEYS:
        if key not in target and key in current:
            patch[key] = None
    return patch or None


@dataclass(frozen=True)
class LabelClaim:
    """A profile's claim on the labels of the nodes it selects, ranked by the profile's age."""

    name: str
    created_at: float
    #: ``None`` when the profile labels no nodes (``labelNodes: false``, an invalid spec, or
    #: the profile is being deleted).
    selection: NodeSelection | None


def label_claim(name: str, body: Mapping[str, Any]) -> LabelClaim:
    """The claim of the RooflineProfile ``body``, as every other profile sees it."""
    metadata = body.get("metadata") or {}
    created_at = parse_time(metadata.get("creationTimestamp")) or 0.0
    try:
        spec = parse_spec(body.get("spec") or {})
    except SpecError:
        return LabelClaim(name, created_at, None)
    deleting = metadata.get("deletionTimestamp") is not None
    selection = spec.selection if spec.label_nodes and not deleting else None
    return LabelClaim(name, created_at, selection)


def label_owners(claims: Iterable[LabelClaim], nodes: Iterable[NodeFacts]) -> dict[str, str]:
    """Node name to the profile that owns its labels: the oldest claim, then by name.

    A fixed, global order means every profile reaches the same verdict on its own, so two
    profiles never take turns overwriting a node's labels.
    """
    candidates = list(nodes)
    owners: dict[str, str] = {}
    for claim in sorted(claims, key=lambda c: (c.created_at, c.name)):
        if claim.selection is not None:
            for node in select_nodes(candidates, claim.selection):
                owners.setdefault(node, claim.name)
    return owners
