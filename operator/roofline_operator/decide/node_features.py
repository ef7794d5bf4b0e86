"""Node labels through Node Feature Discovery: one ``NodeFeature`` object per profile and node.

Where NFD owns node labels, the operator does not patch nodes: it keeps, in its own namespace, one
``nfd.k8s-sigs.io/v1alpha1`` ``NodeFeature`` per profile and node whose ``spec.labels`` are
exactly the labels the node backend would patch (none when the profile does not own the node's
labels, or does not label nodes), and nfd-master writes them to the node. The object also carries
the profile's record annotation of the node, so every profile keeps a durable record of every
node, labelled or not. Each profile writes and deletes only its own objects (their names
derive from both), so when label ownership moves between profiles the old owner never deletes
what the new one wrote. The builders here are pure; the applier sends them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from roofline_operator.core.names import LABEL_MANAGED_BY, LABEL_PROFILE, MANAGED_BY
from roofline_operator.decide.labels import label_safe

NFD_GROUP = "nfd.k8s-sigs.io"
NFD_VERSION = "v1alpha1"
NFD_PLURAL = "nodefeatures"
#: The label by which nfd-master knows which node an object describes.
NFD_NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
#: The two label backends (``ROOFLINE_NODE_LABEL_BACKEND``, chart value ``nodeLabels.backend``).
BACKEND_NODE = "node"
BACKEND_NODE_FEATURE = "nodeFeature"
BACKENDS = (BACKEND_NODE, BACKEND_NODE_FEATURE)


def _dns_part(text: str, limit: int) -> str:
    part = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return part[:limit].strip("-") or "x"


def node_feature_name(profile: str, node: str) -> str:
    """``roofline-<profile>-<node>-<digest>``: one object per profile and node, a valid object
    name (at most 200 characters); the digest keeps names apart that the shortening merges."""
    digest = hashlib.sha256(f"{profile}\0{node}".encode()).hexdigest()[:8]
    return f"roofline-{_dns_part(profile, 60)}-{_dns_part(node, 120)}-{digest}"


def build_node_feature(
    node: str,
    labels: Mapping[str, str],
    profile: str,
    namespace: str,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``NodeFeature`` of ``profile`` for ``node``, giving it the ``labels`` (maybe none); it
    also carries the profile's record annotation of the node (``records.py``), if any."""
    body: dict[str, Any] = {
        "apiVersion": f"{NFD_GROUP}/{NFD_VERSION}",
        "kind": "NodeFeature",
        "metadata": {
            "name": node_feature_name(profile, node),
            "namespace": namespace,
            "labels": {
                NFD_NODE_NAME_LABEL: node,
                LABEL_MANAGED_BY: MANAGED_BY,
                LABEL_PROFILE: label_safe(profile),
            },
        },
        "spec": {"labels": dict(labels)},
    }
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def profile_selector(profile: str) -> str:
    """The label selector of every ``NodeFeature`` a profile owns."""
    return f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_PROFILE}={label_safe(profile)}"
