"""Size budgets of what the operator writes per node, from the worst case, and their enforcement.

Two copies of a node's publication have hard limits set by the API server:

* the record annotation on the Node (``records.py``): all annotations of one object together may
  hold 256 KiB, shared with every other writer of that Node, and one per profile;
* the ``status.nodes[]`` entry: the whole object may hold about 1.5 MiB, and ``status.py`` lists up
  to :data:`~roofline_operator.decide.status.DEFAULT_STATUS_MAX_NODES` full entries.

The largest legitimate entry is a node of 8 GPUs profiled with 8 models of 63-character names
(in the status, each served in the longest format name and an FP8 cache) and the nine weight
formats a profile may measure, with intervals, warnings, a failure message and a material change:
11.5 KB as a record annotation, 12.4 KB as a status entry (measured by
``tests/operator/unit/decide/test_sizes.py``), so neither fits its budget whole. An entry over
budget loses, in this order, what costs least to lose: the intervals (hysteresis then treats the
numbers as exact until the next profile; the weight formats' go too), the warnings (the next
profile reports them again), the per-model detail beyond the batch bounds (tokens per second and
step times at the range's ends, the ITL model, the KV tokens), the per-GPU product names (the
node's stays at the top level), the weight formats' rooflines (the gauges keep them until a
restart, the next profile sends them again; no label or decision reads them), the per-GPU entries
(the worst GPU stays at the top level, and it is what the labels describe), and at last the model
plans themselves. The worst case fits its budgets once the weight formats went: every GPU's
numbers and every model's batch bounds stay.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from roofline_operator.core.node_formats import WEIGHT_FORMATS_KEY
from roofline_profiler.wire import plan_fields

#: Kubernetes' limit on the total size of one object's annotations.
ANNOTATIONS_LIMIT_BYTES = 256 * 1024
#: Profiles whose records one Node can carry within half of that limit (the other half is left
#: to every other writer of the Node).
MAX_RECORDS_PER_NODE = 32
#: One record annotation's budget: 4 KiB.
RECORD_ANNOTATION_BUDGET_BYTES = ANNOTATIONS_LIMIT_BYTES // 2 // MAX_RECORDS_PER_NODE
#: One ``status.nodes[]`` entry's budget: a hundred of them take 600 KiB of the 1.5 MiB an
#: object may hold, leaving the rest to the summary, the per-model aggregates and Kopf.
STATUS_ENTRY_BUDGET_BYTES = 6 * 1024

#: Keys of a model's entry kept when its detail is dropped, besides its batch bounds
#: (:func:`model_core_keys`): what it is (how it is served included), or why it has no plan.
#: The largest request rate per replica is kept too: a per-replica limit, as the bounds are.
MODEL_IDENTITY_KEYS = (
    "name",
    "contextTokens",
    "tensorParallel",
    "weightFormat",
    "kvCacheDtype",
    "reason",
    "message",
    "maxRequestRate",
)


def model_core_keys() -> frozenset[str]:
    """Keys of a model's entry kept when its detail is dropped: what it is, and the rows of
    ``plan_fields.MODEL_PLAN`` that are batch bounds."""
    bounds = (f.key for f in plan_fields.MODEL_PLAN if f.bound)
    return frozenset((*MODEL_IDENTITY_KEYS, *bounds))


def encoded_size(entry: Any) -> int:
    """Bytes of ``entry`` as compact JSON, as it is sent."""
    return len(json.dumps(entry, separators=(",", ":"), sort_keys=True).encode())


def _without_intervals(entry: dict[str, Any]) -> dict[str, Any]:
    def strip(block: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in block.items() if not k.endswith("Interval")}

    trimmed = strip(entry)
    for key in ("devices", WEIGHT_FORMATS_KEY):
        if isinstance(trimmed.get(key), list):
            trimmed[key] = [strip(d) if isinstance(d, dict) else d for d in trimmed[key]]
    return trimmed


def _without_warnings(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "warnings"}


def _without_model_detail(entry: dict[str, Any]) -> dict[str, Any]:
    models = entry.get("models")
    if not isinstance(models, list):
        return entry
    kept = model_core_keys()
    core = [{k: v for k, v in m.items() if k in kept} if isinstance(m, dict) else m for m in models]
    return {**entry, "models": core}


def _without_device_products(entry: dict[str, Any]) -> dict[str, Any]:
    devices = entry.get("devices")
    if not isinstance(devices, list):
        return entry
    bare = [
        {k: v for k, v in d.items() if k != "product"} if isinstance(d, dict) else d
        for d in devices
    ]
    return {**entry, "devices": bare}


def _without_weight_formats(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != WEIGHT_FORMATS_KEY}


def _without_devices(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "devices"}


def _without_models(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "models"}


#: What goes, in order, until an entry fits its budget.
TRIM_STEPS: tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] = (
    _without_intervals,
    _without_warnings,
    _without_model_detail,
    _without_device_products,
    _without_weight_formats,
    _without_devices,
    _without_models,
)


def fit(entry: dict[str, Any], budget: int) -> dict[str, Any]:
    """``entry`` itself when it fits ``budget`` bytes, else with :data:`TRIM_STEPS` applied in
    order until it does (or none is left: the headline numbers always stay)."""
    for step in TRIM_STEPS:
        if encoded_size(entry) <= budget:
            return entry
        entry = step(entry)
    return entry
