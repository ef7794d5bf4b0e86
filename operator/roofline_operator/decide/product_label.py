"""The GPU product label as a cross-check of the product a node's own profiler pod measured.

GPU Feature Discovery labels a node with ``nvidia.com/gpu.product``, but whoever may write the
node's labels (its kubelet, a node agent, any NodeFeature writer while nfd-master is unrestricted)
may write it too, and a node GFD has not labelled yet has none. The fleet view therefore classes
every device by what it measured (``peers.py``), and the label only tells when it disagrees: a
relabelled node, a node whose pods saw another GPU than GFD did, or a stale label after a GPU
swap. The disagreement is reported (a node condition and a Warning Event naming both values); it
never moves the node into another class.

GFD writes the product NVML reports with each space replaced by ``-`` (``NVIDIA H200`` becomes
``NVIDIA-H200``), and with time-slicing (``renameByDefault: false``) appends ``-SHARED``; those
forms agree with the measured name. Under MIG's ``single`` strategy both name the slice
(``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``), so they agree too; under the ``mixed`` strategy the label
names the whole GPU while a pod given a slice measures the slice, so a label that names the
measured slice's GPU (``NVIDIA-A100-SXM4-40GB`` for ``... MIG 1g.5gb``) agrees as well.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from roofline_operator.core.node_results import NodeResult

#: The Node label that names a GPU's product (GPU Feature Discovery).
PRODUCT_LABEL = "nvidia.com/gpu.product"
#: What GFD appends to the product of a time-sliced GPU.
SHARED_SUFFIX = "-SHARED"
#: What follows a GPU's product in the name of one of its MIG slices, in GFD's form.
MIG_INFIX = "-MIG-"
#: A label value as the API server admits it (``validation.IsValidLabelValue``).
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_MAX_LABEL_VALUE_CHARS = 63


@dataclass(frozen=True)
class LabelMismatch:
    """A node's product label and the product its pod measured, which disagree."""

    label: str
    measured: str


def gfd_form(product: str) -> str:
    """A product name as GFD writes it into the label: every run of whitespace a ``-``."""
    return "-".join(product.split())


def label_agrees(label: str, measured: str) -> bool:
    """Whether ``label`` names the ``measured`` product, in GFD's form or as measured."""
    form, named = gfd_form(measured), gfd_form(label)
    if named in (form, form + SHARED_SUFFIX):
        return True
    return bool(named) and form.startswith(named + MIG_INFIX)


def product_label(labels: Mapping[str, str]) -> str | None:
    """The node's product label when it holds a label value; ``None`` when it has none (GFD
    has not labelled it yet, or it is no GPU node). Node labels are untrusted: anything else
    is read as no label, never echoed."""
    value = labels.get(PRODUCT_LABEL)
    if not isinstance(value, str) or not value or len(value) > _MAX_LABEL_VALUE_CHARS:
        return None
    return value if _LABEL_VALUE.fullmatch(value) else None


def label_mismatch(labels: Mapping[str, str], result: NodeResult) -> LabelMismatch | None:
    """The node's product label against the products its GPUs measured: ``None`` when it has
    no label or the label names one of them, else both values (the worst GPU's product, the
    one its status entry and labels describe)."""
    label = product_label(labels)
    if label is None or any(label_agrees(label, g.product) for g in result.gpus):
        return None
    return LabelMismatch(label, result.worst_gpu().product)


def describe(node: str, mismatch: LabelMismatch) -> str:
    """One line naming the node and both values."""
    return (
        f"node {node}: label {PRODUCT_LABEL}={mismatch.label} disagrees with the product its "
        f"profiler pod measured ({mismatch.measured}); it is compared with the "
        f"{mismatch.measured} class, not by its label"
    )
