"""The profiler container's resources: what the profile sets, its GPUs, and a memory request and
limit sized from measurement where the profile sets none.

A container without a memory request is BestEffort: the scheduler does not count it beside the
serving pods on the node, and when the node runs short the kernel kills it first (its
``oom_score_adj`` is 1000); one without a limit can take what the serving pods need. On a real
node a CPU profile's container held 3.4 GB that no one had accounted for.

The sizes come from ``bench/profiler_memory.py`` (records in ``bench/results/``): the peak
resident set of ``roofline profile`` in fresh processes. On a CPU every measured buffer is
resident: two bandwidth buffers of 8 × the last-level cache each (at least 256 MiB, at most 10%
of the node's memory), the decode weights and their copies (2 × the cache), the peak search's
operands; 1.4–1.5 GiB on a 32 MiB-cache CPU (3.4 GB was seen on a VM reporting a 480 MiB
cache). A model plan measures after the roofline, with its own bounded buffers (decoder-layer
copies, a KV buffer of at most 2 GiB): 2.7–2.9 GiB in all with a Llama-3.1-8B or -70B plan. On
a GPU the buffers and weights live in device memory, outside the pod's memory cgroup; the host
keeps the interpreter, torch and the profiler (0.67 GiB here, where ``--device cuda`` stops
before CUDA initialises) and the CUDA context, which no GPU here could measure.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline_operator.core.resources_spec import parse_quantity
from roofline_operator.core.spec import ProfileSpec

#: ``(request, limit)`` of memory by ``spec.device`` when the profile sets none, from the peak
#: resident sets measured (module docstring). The request covers what was measured, so the
#: scheduler accounts for it and the kernel ranks the pod like its neighbours; the limit leaves
#: room for larger caches and GPU drivers, and bounds what a runaway profile can take.
DEFAULT_MEMORY: dict[str, tuple[str, str]] = {
    "gpu": ("2Gi", "8Gi"),
    "cpu": ("4Gi", "12Gi"),
}


def _bytes(quantity: Any) -> int:
    return int(parse_quantity(quantity, "memory"))


def memory(spec: ProfileSpec) -> tuple[Any, Any]:
    """The container's memory request and limit: the profile's where it sets them, the default
    (:data:`DEFAULT_MEMORY`) otherwise, never a request above the limit."""
    requests: Mapping[str, Any] = spec.resources.get("requests") or {}
    limits: Mapping[str, Any] = spec.resources.get("limits") or {}
    request, limit = requests.get("memory"), limits.get("memory")
    default_request, default_limit = DEFAULT_MEMORY[spec.device]
    if request is None and limit is None:
        return default_request, default_limit
    if request is None:
        return min(default_request, limit, key=_bytes), limit
    if limit is None:
        return request, max(default_limit, request, key=_bytes)
    return request, limit


def container_resources(spec: ProfileSpec, gpus: int) -> dict[str, Any]:
    """The spec's resources with the memory filled in, plus the GPUs as a limit (extended
    resources need one); a CPU profile's pod asks for no GPU."""
    requests = dict(spec.resources.get("requests") or {})
    limits = dict(spec.resources.get("limits") or {})
    requests["memory"], limits["memory"] = memory(spec)
    if not spec.selection.measures_cpu:
        limits[spec.selection.gpu_resource] = str(gpus)
        requests.pop(spec.selection.gpu_resource, None)
    return {"limits": limits, "requests": requests}
