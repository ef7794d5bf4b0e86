"""An emulated Kubernetes cluster for testing the roofline operator without a cluster.

An API server with the semantics Kopf and kubectl depend on (``apiserver``, ``store``), a fake
scheduler and kubelet that run profiler pods as local processes with injectable faults
(``scheduler``, ``kubelet``, ``faults``), and the real ``roofline operator`` and ``kubectl``
processes pointed at it (``processes``). See docs/testing-operator.md.
"""

from .cluster import Cluster, gpu_node
from .faults import FaultMode, SyntheticGpu
from .processes import Kubectl, OperatorFactory, OperatorProcess
from .waiting import wait_for

__all__ = [
    "Cluster",
    "FaultMode",
    "Kubectl",
    "OperatorFactory",
    "OperatorProcess",
    "SyntheticGpu",
    "gpu_node",
    "wait_for",
]
