"""``--target wva``: what llm-d's workload-variant autoscaler v0.5.1 needs to scale one model's
Deployment at the plan's saturation thresholds.

What v0.5.1 reads, from its sources (its Go module is not served by the module proxy here, so
the tests check these objects against the fields named below, by reading, not by running it):

* its engine takes only the ``default`` entry of the saturation ConfigMap that applies to a
  model's namespace (``internal/engines/saturation/engine.go:210-225``); per-model entries
  (``model_id``, ``namespace``) are parsed and validated but never used. A ConfigMap of the same
  name, ``wva-saturation-scaling-config`` (``internal/config/helpers.go:15``), in the model's own
  namespace replaces the global one for that namespace. The autoscaler watches it once the
  namespace holds a VariantAutoscaling, or when the *Namespace* carries the label
  ``wva.llmd.ai/config-enabled: "true"`` (``internal/constants/labels.go:16``,
  ``internal/controller/configmap_helpers.go:102-121``), so the ConfigMap goes in
  ``--namespace`` with ``default`` holding the plan's thresholds. One ``default`` per namespace:
  one model per namespace;
* the entry's fields are ``kvCacheThreshold``, ``queueLengthThreshold``, ``kvSpareTrigger`` and
  ``queueSpareTrigger`` (``internal/interfaces/saturation_scaling.go:16-25``; ``Validate`` at
  line 75 refuses a ``kvCacheThreshold`` below its ``kvSpareTrigger``), derived as the endpoint
  picker's (``thresholds.py``);
* a **VariantAutoscaling** (``llmd.ai/v1alpha1``: ``spec.scaleTargetRef``, ``spec.modelID``,
  ``api/v1alpha1/variantautoscaling_types.go:11-24``; the accelerator from its label
  ``inference.optimization/acceleratorName``, ``internal/utils/variant.go:58``) makes the
  autoscaler analyse the Deployment and publish ``wva_desired_replicas{variant_name=<its
  name>}`` (``internal/constants/metrics.go:102``, ``internal/metrics/metrics.go:137-155``);
* the autoscaler does not scale the Deployment itself: an **HPA** on that external metric does,
  at ``averageValue: 1`` (replicas = the desired count), as its own chart's
  ``templates/hpa.yaml`` writes it, through an adapter serving the metric from Prometheus
  (``config/samples/prometheus-adapter-values.yaml``), with the label ``exported_namespace``
  that Prometheus gives the VariantAutoscaling's namespace.

The HPA targets the same Deployment as ``--target keda``'s ScaledObject: apply one of the two.
Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note, render_document
from roofline_cli.export.engine_args import OneModelOnly
from roofline_cli.export.options import (
    WVA_CONFIGMAP,
    ExportOptions,
    by_model,
    classes_note,
    object_name,
    safest,
)
from roofline_cli.export.plans import ExportSource
from roofline_operator.decide.labels import label_safe

API = "llmd.ai/v1alpha1"
#: The Namespace label that opts a namespace into namespace-local ConfigMaps.
CONFIG_ENABLED_LABEL = "wva.llmd.ai/config-enabled"
#: The VariantAutoscaling label the autoscaler reads the accelerator from.
ACCELERATOR_LABEL = "inference.optimization/acceleratorName"
DESIRED_REPLICAS_METRIC = "wva_desired_replicas"
#: The longest Deployment name kept whole in ``<name>-va-hpa`` (63 characters).
VARIANT_BASE_CHARS = 63 - len("-va-hpa")


def variant_name(deployment: str) -> str:
    """The VariantAutoscaling of a Deployment, named as llm-d's chart names it (``<name>-va``);
    a name too long for its HPA's ``<name>-va-hpa`` to stay within 63 characters is shortened
    with a digest of the whole (``object_name``), never cut, so two never share a name."""
    base = (
        deployment
        if len(deployment) <= VARIANT_BASE_CHARS
        else object_name(deployment, VARIANT_BASE_CHARS)
    )
    return f"{base}-va"


def _default_entry(model: str, source: ExportSource) -> str:
    plans = by_model(source.plans)[model]
    plan = safest(plans)
    kv, kv_how = thresholds.kv_cache_threshold(plan)
    depth, depth_how = thresholds.queue_depth(plan)
    kv_spare, kv_spare_how = thresholds.kv_spare_trigger(plan)
    queue_spare, queue_spare_how = thresholds.queue_spare_trigger(plan)
    entry = {
        "kvCacheThreshold": Note(kv, kv_how),
        "queueLengthThreshold": Note(depth, depth_how),
        "kvSpareTrigger": Note(kv_spare, kv_spare_how),
        "queueSpareTrigger": Note(queue_spare, queue_spare_how),
    }
    header = f"{model}: from {plan.source}; {classes_note(plans, plan)}."
    return render_document(entry, header)


def _config_map(model: str, options: ExportOptions, source: ExportSource) -> dict[str, Any]:
    data = {
        "default": Note(
            _default_entry(model, source),
            "the only entry v0.5.1's engine reads: in this namespace it replaces the global "
            "default, for every variant of the namespace",
        )
    }
    metadata = {"name": WVA_CONFIGMAP, "namespace": options.namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _variant(model: str, options: ExportOptions, source: ExportSource) -> dict[str, Any]:
    deployment = options.deployment or object_name(model)
    plan = safest(by_model(source.plans)[model])
    labels = {
        ACCELERATOR_LABEL: Note(
            label_safe(plan.gpu_class),
            f"the accelerator the autoscaler reports: the class of the thresholds, "
            f"{plan.gpu_class}",
        )
    }
    spec = {
        "scaleTargetRef": Note(
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "spec.scaleTargetRef: the serving Deployment (--deployment)",
        ),
        "modelID": Note(
            options.model_id or model, "spec.modelID: the served model name (--model-id)"
        ),
    }
    metadata = {"name": variant_name(deployment), "namespace": options.namespace, "labels": labels}
    return {"apiVersion": API, "kind": "VariantAutoscaling", "metadata": metadata, "spec": spec}


def _hpa(model: str, options: ExportOptions) -> dict[str, Any]:
    deployment = options.deployment or object_name(model)
    metric = {
        "name": DESIRED_REPLICAS_METRIC,
        "selector": {
            "matchLabels": Note(
                {"variant_name": variant_name(deployment), "exported_namespace": options.namespace},
                "the VariantAutoscaling's series: its name, and its namespace as Prometheus "
                "labels a series scraped from the autoscaler's own namespace",
            )
        },
    }
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicas": Note(
            max(1, options.min_replicas),
            "spec.minReplicas (--min-replicas, at least 1: an HPA scales to zero only behind an "
            "alpha feature gate)",
        ),
        "maxReplicas": Note(options.max_replicas, "spec.maxReplicas (--max-replicas)"),
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": metric,
                    "target": Note(
                        {"type": "AverageValue", "averageValue": "1"},
                        "one replica per desired replica: the HPA runs the count the autoscaler "
                        "decided",
                    ),
                },
            }
        ],
    }
    metadata = {"name": f"{variant_name(deployment)}-hpa", "namespace": options.namespace}
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": spec,
    }


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """The namespace-local ConfigMap, the VariantAutoscaling and its HPA, for the one model."""
    models = source.models()
    if len(models) != 1:
        raise OneModelOnly(
            f"--target wva: llm-d's autoscaler v0.5.1 applies one default entry per namespace, "
            f"and {', '.join(models)} are planned: export one model per namespace with --model "
            "and --namespace"
        )
    (model,) = models
    ns = options.namespace
    return [
        (
            f"llm-d workload-variant-autoscaler v0.5.1 saturation thresholds for {model} in "
            f"namespace {ns}, from {source.description}. The autoscaler reads this namespace's "
            f"copy once a VariantAutoscaling lives here (below), or after: kubectl label "
            f"namespace {ns} {CONFIG_ENABLED_LABEL}=true",
            _config_map(model, options, source),
        ),
        (
            f"Makes the autoscaler analyse {model}'s Deployment and publish "
            f"{DESIRED_REPLICAS_METRIC} for it.",
            _variant(model, options, source),
        ),
        (
            f"Scales the Deployment to the autoscaler's {DESIRED_REPLICAS_METRIC}, served as an "
            "external metric by an adapter from Prometheus (prometheus-adapter). Do not also "
            "apply --target keda's ScaledObject: one autoscaler per Deployment.",
            _hpa(model, options),
        ),
    ]
