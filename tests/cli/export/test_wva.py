"""llm-d's workload-variant autoscaler v0.5.1: the namespace-local ``default`` entry, the
VariantAutoscaling and the HPA on ``wva_desired_replicas``.

The autoscaler's Go module is not served by the module proxy here, so these objects are checked
against the fields its pinned sources read (v0.5.1), by reading them, not by running it:

* ``internal/engines/saturation/engine.go:210-225``: ``SaturationConfigForNamespace(namespace)``
  then only ``saturationConfigMap["default"]``;
* ``internal/config/helpers.go:15``: the ConfigMap's name ``wva-saturation-scaling-config``;
* ``internal/constants/labels.go:16`` and ``internal/controller/configmap_helpers.go:102-121``:
  ``wva.llmd.ai/config-enabled: "true"`` on the Namespace opts it in;
* ``internal/interfaces/saturation_scaling.go:16-25``: the entry's yaml fields, and ``Validate``
  (line 75): thresholds in [0, 1], ``kvCacheThreshold >= kvSpareTrigger``;
* ``api/v1alpha1/variantautoscaling_types.go:11-24`` and ``groupversion_info.go:29``:
  ``llmd.ai/v1alpha1``, ``spec.scaleTargetRef`` (required), ``spec.modelID`` (required, not
  empty), ``spec.variantCost`` (optional);
* ``internal/utils/variant.go:58``: the accelerator label;
* ``internal/constants/metrics.go:102,118`` and ``internal/metrics/metrics.go:137-155``: the
  gauge ``wva_desired_replicas`` labelled ``variant_name`` with the VariantAutoscaling's name;
  the chart's ``templates/hpa.yaml`` selects it with ``exported_namespace`` at ``averageValue:
  "1"``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from roofline_cli.export import wva
from roofline_cli.export.commented import plain
from roofline_cli.export.engine_args import OneModelOnly
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import WVA_CONFIGMAP, ExportOptions
from tests.cli.export_sources import MODEL, class_plan, status_profile

#: ``internal/interfaces/saturation_scaling.go:10-45``: every yaml field of an entry.
ENTRY_FIELDS = {
    "model_id", "namespace", "kvCacheThreshold", "queueLengthThreshold", "kvSpareTrigger",
    "queueSpareTrigger", "enableLimiter", "analyzerName", "scaleUpThreshold", "scaleDownBoundary",
}  # fmt: skip
#: ``api/v1alpha1/variantautoscaling_types.go:11-24``: the spec's json fields, and the required.
VARIANT_SPEC_FIELDS = {"scaleTargetRef", "modelID", "variantCost"}
VARIANT_REQUIRED = {"scaleTargetRef", "modelID"}


def _by_kind(**options: Any) -> dict[str, dict[str, Any]]:
    source = source_of_profile(status_profile(), "p")
    documents = [plain(d) for _, d in wva.build(source, ExportOptions(**options))]
    return {d["kind"]: d for d in documents}


def test_the_namespace_local_configmap_holds_only_the_default_entry_v051_reads() -> None:
    config_map = _by_kind(namespace="llm", model_id="meta/llama")["ConfigMap"]
    assert config_map["metadata"] == {"name": WVA_CONFIGMAP, "namespace": "llm"}
    assert list(config_map["data"]) == ["default"]
    default = yaml.safe_load(config_map["data"]["default"])
    # The L40S class: maxBatch 24 of 40 = 0.6 of the KV cache; ⌈2.4⌉ = 3 queued; the spare
    # triggers at the upstream defaults' proportions (0.1 of 0.8, 3 of 5).
    assert default == {
        "kvCacheThreshold": 0.6,
        "queueLengthThreshold": 3,
        "kvSpareTrigger": 0.07,
        "queueSpareTrigger": 2,
    }
    assert set(default) <= ENTRY_FIELDS
    assert 0 <= default["kvSpareTrigger"] <= default["kvCacheThreshold"] <= 1


def test_the_header_says_how_the_namespace_opts_in() -> None:
    source = source_of_profile(status_profile(), "p")
    (header, _), *_ = wva.build(source, ExportOptions(namespace="llm"))
    assert "kubectl label namespace llm wva.llmd.ai/config-enabled=true" in header


def test_the_variant_autoscaling_names_the_deployment_and_the_served_model() -> None:
    variant = _by_kind(namespace="llm", deployment="llama", model_id="meta/llama")[
        "VariantAutoscaling"
    ]
    assert variant["apiVersion"] == "llmd.ai/v1alpha1"
    assert VARIANT_REQUIRED <= set(variant["spec"]) <= VARIANT_SPEC_FIELDS
    assert variant["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "llama",
    }
    assert variant["spec"]["modelID"] == "meta/llama"
    assert variant["metadata"]["name"] == "llama-va"
    assert variant["metadata"]["labels"] == {
        "inference.optimization/acceleratorName": "NVIDIA-L40S-948f618979"
    }


def test_the_hpa_scales_the_deployment_to_the_autoscalers_desired_replicas() -> None:
    documents = _by_kind(namespace="llm", deployment="llama", min_replicas=0, max_replicas=7)
    hpa, variant = documents["HorizontalPodAutoscaler"], documents["VariantAutoscaling"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == variant["spec"]["scaleTargetRef"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 7)
    ((metric),) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"] == {
        "name": "wva_desired_replicas",
        "selector": {
            "matchLabels": {
                "variant_name": variant["metadata"]["name"],
                "exported_namespace": "llm",
            }
        },
    }
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}


def test_one_namespace_default_serves_one_model() -> None:
    source = source_of_profile(status_profile(), "p")
    two = replace(source, plans=(*source.plans, class_plan(model="other")))
    with pytest.raises(OneModelOnly, match="one default entry per namespace"):
        wva.build(two, ExportOptions())


def test_no_per_model_entry_is_written() -> None:
    config_map = _by_kind()["ConfigMap"]
    assert MODEL not in config_map["data"]


def test_a_long_deployment_names_its_variant_and_hpa_within_63_characters_by_a_digest() -> None:
    """``<deployment>-va-hpa`` cut at 63 characters would be invalid, and two long Deployments
    that share a prefix would share a VariantAutoscaling: the shortened base ends in a digest."""
    first, second = "serving-" + "a" * 60 + "-one", "serving-" + "a" * 60 + "-two"
    names = []
    for deployment in (first, second):
        documents = _by_kind(namespace="llm", deployment=deployment)
        variant = documents["VariantAutoscaling"]["metadata"]["name"]
        hpa = documents["HorizontalPodAutoscaler"]["metadata"]["name"]
        assert variant.endswith("-va")
        assert hpa == f"{variant}-hpa"
        assert len(hpa) <= 63
        names.append(variant)
    assert names[0] != names[1]


def test_a_short_deployment_keeps_its_name_in_the_variant() -> None:
    deployment = "d" * wva.VARIANT_BASE_CHARS
    variant = _by_kind(namespace="llm", deployment=deployment)["VariantAutoscaling"]
    assert variant["metadata"]["name"] == f"{deployment}-va"
