"""``--target wva``: llm-d's workload-variant autoscaler's saturation ConfigMap.

llm-d's autoscaler v0.5.1 reads ``wva-saturation-scaling-config`` in its own namespace
(``internal/config/helpers.go``): every key holds one YAML entry, ``default`` for every variant
and others that override it for one ``model_id`` in one ``namespace``, each with
``kvCacheThreshold``, ``queueLengthThreshold``, ``kvSpareTrigger`` and ``queueSpareTrigger``
(``internal/interfaces/saturation_scaling.go``; an entry whose ``kvCacheThreshold`` is below its
``kvSpareTrigger`` is dropped). Its docs (``docs/saturation-scaling-config.md``) ask for the
same thresholds as the endpoint picker's, so they are derived the same way
(``thresholds.py``). The ``default`` entry keeps the upstream defaults: it serves models
nobody profiled. Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note, render_document
from roofline_cli.export.options import WVA_CONFIGMAP, ExportOptions, by_model, classes_note, safest
from roofline_cli.export.plans import ExportSource


def _entry(model: str, options: ExportOptions, source: ExportSource) -> str:
    plans = by_model(source.plans)[model]
    plan = safest(plans)
    kv, kv_how = thresholds.kv_cache_threshold(plan)
    depth, depth_how = thresholds.queue_depth(plan)
    kv_spare, kv_spare_how = thresholds.kv_spare_trigger(plan)
    queue_spare, queue_spare_how = thresholds.queue_spare_trigger(plan)
    entry = {
        "model_id": Note(options.model_id or model, "the served model name (--model-id)"),
        "namespace": Note(options.namespace, "the namespace of its variants"),
        "kvCacheThreshold": Note(kv, kv_how),
        "queueLengthThreshold": Note(depth, depth_how),
        "kvSpareTrigger": Note(kv_spare, kv_spare_how),
        "queueSpareTrigger": Note(queue_spare, queue_spare_how),
    }
    header = f"{model}: from {plan.source}; {classes_note(plans, plan)}."
    return render_document(entry, header)


def _default() -> str:
    entry = {
        "kvCacheThreshold": thresholds.WVA_DEFAULT_KV_THRESHOLD,
        "queueLengthThreshold": thresholds.WVA_DEFAULT_QUEUE_THRESHOLD,
        "kvSpareTrigger": thresholds.WVA_DEFAULT_KV_SPARE,
        "queueSpareTrigger": thresholds.WVA_DEFAULT_QUEUE_SPARE,
    }
    return render_document(entry, "The upstream defaults, for models nobody profiled.")


def entry_key(model: str) -> str:
    """A ConfigMap key for a model's entry: its name (a label value is a valid key)."""
    return model


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """One ConfigMap: ``default`` and one entry per model."""
    data: dict[str, Any] = {"default": _default()}
    for model in source.models():
        data[entry_key(model)] = _entry(model, options, source)
    metadata = {"name": WVA_CONFIGMAP, "namespace": options.wva_namespace}
    header = (
        f"llm-d workload-variant-autoscaler saturation thresholds from {source.description}; "
        "apply in the autoscaler's namespace (--wva-namespace)."
    )
    return [(header, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})]
