"""Node labels through Node Feature Discovery: one ``NodeFeature`` object per labelled node.

Where NFD owns node labels, the operator does not patch nodes: it keeps, in its own namespace, one
``nfd.k8s-sigs.io/v1alpha1`` ``NodeFeature`` per node whose ``spec.labels`` are exactly the labels
the node backend would patch, and nfd-master writes them to the node. Removing a node's labels is
deleting its object. The builders here are pure; the applier sends them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline_operator.labels import label_safe
from roofline_operator.names import LABEL_MANAGED_BY, LABEL_PROFILE, MANAGED_BY

NFD_GROUP = "nfd.k8s-sigs.io"
NFD_VERSION = "v1alpha1"
NFD_PLURAL = "nodefeatures"
#: The label by which nfd-master knows which node an object describes.
NFD_NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
#: The two label backends (``ROOFLINE_NODE_LABEL_BACKEND``, chart value ``nodeLabels.backend``).
BACKEND_NODE = "node"
BACKEND_NODE_FEATURE = "nodeFeature"
BACKENDS = (BACKEND_NODE, BACKEND_NODE_FEATURE)


def node_feature_name(node: str) -> str:
    """``roofline-<label-safe node>``: at most 72 characters, a valid object name."""
    return f"roofline-{label_safe(node).lower()}"


def build_node_feature(
    node: str,
    labels: Mapping[str, str],
    profile: str,
    namespace: str,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``NodeFeature`` that gives ``node`` the ``labels`` (owned by ``profile``); it also
    carries the profile's record annotation of the node (``records.py``), if any."""
    body: dict[str, Any] = {
        "apiVersion": f"{NFD_GROUP}/{NFD_VERSION}",
        "kind": "NodeFeature",
        "metadata": {
            "name": node_feature_name(node),
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
