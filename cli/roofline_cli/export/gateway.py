"""``--target gateway``: the inference gateway's endpoint-picker thresholds and an InferencePool.

The endpoint picker (EPP) reads an ``EndpointPickerConfig`` file (``apiVersion:
inference.networking.x-k8s.io/v1alpha1``), shipped in a ConfigMap and passed by
``--config-file``: the Gateway API Inference Extension's chart mounts its ConfigMap and names
the key with ``inferenceExtension.pluginsConfigFile``. Its saturation detector is the
``utilization-detector`` plugin, referenced from ``saturationDetector.pluginRef``, with
``queueDepthThreshold`` (default 5) and ``kvCacheUtilThreshold`` (default 0.8, in (0, 1]):
GAIE v1.5.0, the last release whose module holds the endpoint picker
(``site-src/guides/epp-configuration/config-text.md``,
``pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/config.go``; from v1.6
the picker lives in llm-d's router). The scorers and their weights are the chart's defaults,
so only the thresholds change. The InferencePool is ``inference.networking.k8s.io/v1``, GAIE
v1.6.2's CRD. Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note, render_document
from roofline_cli.export.options import ExportOptions, by_model, classes_note, object_name, safest
from roofline_cli.export.plans import ExportSource

#: The key of the EndpointPickerConfig in the ConfigMap (the chart's ``pluginsConfigFile``).
CONFIG_KEY = "roofline-plugins.yaml"
#: The chart's default scorers and weights (``config/charts/epplib/templates/_config.yaml``).
SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3))
DETECTOR = "utilization-detector"


def endpoint_picker_config(model: str, source: ExportSource) -> tuple[dict[str, Any], str]:
    """The EndpointPickerConfig of one model's pool, and where its numbers came from."""
    plans = by_model(source.plans)[model]
    plan = safest(plans)
    kv, kv_how = thresholds.kv_cache_threshold(plan)
    depth, depth_how = thresholds.queue_depth(plan)
    where = f"{plan.source}; {classes_note(plans, plan)}"
    detector = {
        "type": DETECTOR,
        "parameters": {
            "queueDepthThreshold": Note(
                depth, f"utilization-detector queueDepthThreshold: {depth_how}"
            ),
            "kvCacheUtilThreshold": Note(
                kv, f"utilization-detector kvCacheUtilThreshold: {kv_how}; from {where}"
            ),
        },
    }
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [*({"type": name} for name, _ in SCORERS), detector],
        "saturationDetector": Note(
            {"pluginRef": DETECTOR}, "the saturation detector is the plugin above"
        ),
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [{"pluginRef": name, "weight": weight} for name, weight in SCORERS],
            }
        ],
    }
    return config, where


def _config_map(model: str, options: ExportOptions, source: ExportSource) -> dict[str, Any]:
    config, _ = endpoint_picker_config(model, source)
    text = render_document(
        config, f"Endpoint picker configuration of {model}'s pool, from {source.description}."
    )
    pool = object_name(model)
    data = {
        CONFIG_KEY: Note(
            text,
            f"inferenceExtension.pluginsCustomConfig of the inferencepool chart, with "
            f"inferenceExtension.pluginsConfigFile: {CONFIG_KEY} (the EPP reads it at start)",
        )
    }
    metadata = {"name": f"{pool}-epp-config", "namespace": options.namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _pool(model: str, options: ExportOptions) -> dict[str, Any]:
    pool = object_name(model)
    selector = dict(options.pool_selector) or {"app": pool}
    spec = {
        "selector": Note(
            {"matchLabels": selector},
            "spec.selector.matchLabels: the serving pods' labels (--pool-selector)",
        ),
        "targetPorts": Note(
            [{"number": options.target_port}],
            "spec.targetPorts: the engines' HTTP port (--target-port; vLLM serves on 8000)",
        ),
        "endpointPickerRef": Note(
            {"name": f"{pool}-epp", "port": {"number": options.epp_port}},
            "spec.endpointPickerRef: the endpoint picker's Service and gRPC port (--epp-port)",
        ),
    }
    metadata = {"name": pool, "namespace": options.namespace}
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": metadata,
        "spec": spec,
    }


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """Per model: the endpoint picker's ConfigMap and the InferencePool."""
    documents: list[tuple[str, Any]] = []
    for model in source.models():
        documents.append(
            (
                f"Endpoint picker thresholds for {model}, from {source.description}.",
                _config_map(model, options, source),
            )
        )
        documents.append((f"InferencePool of {model}'s serving pods.", _pool(model, options)))
    return documents
