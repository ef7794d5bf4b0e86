"""``--target gateway``: Helm values for the inference gateway's ``inferencepool`` chart (Gateway
API Inference Extension v1.5.x), carrying the endpoint picker's saturation thresholds.

What the pinned chart and picker read, from their sources at v1.5.0:

* the picker reads one ``EndpointPickerConfig`` file, ``--config-file /config/<pluginsConfigFile>``,
  from the chart's own ``<release>-epp`` ConfigMap (``config/charts/epplib/templates/
  _deployment.yaml:128-129,234-236``); the chart merges ``inferenceExtension.pluginsCustomConfig``
  into that ConfigMap (``config/charts/epplib/templates/_config.yaml:90-91``). A ConfigMap
  applied beside the chart is never mounted, so the export writes the chart's values;
* the chart creates the InferencePool named after the release, with
  ``inferencePool.modelServers.matchLabels``, ``inferencePool.targetPorts`` and
  ``inferenceExtension.failureMode`` (``config/charts/inferencepool/templates/inferencepool.yaml``),
  and points the picker at it (``--pool-name <release>``, ``_deployment.yaml:90-95``). The values
  therefore describe the pool instead of a second InferencePool beside the chart's: nothing
  collides, and ``failureMode`` is written explicitly (the chart's default ``FailOpen``; the
  CRD's own default, for a pool applied without the chart, is ``FailClose``);
* the saturation detector is the ``utilization-detector`` plugin, referenced from
  ``saturationDetector.pluginRef``, with ``queueDepthThreshold`` (default 5) and
  ``kvCacheUtilThreshold`` (default 0.8) (``site-src/guides/epp-configuration/config-text.md``,
  ``pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/config.go``). With flow
  control off (the default), a saturated pool rejects only sheddable requests, those of negative
  priority (``pkg/epp/requestcontrol/admission.go:65-84``); ``--flow-control`` adds the
  ``flowControl`` feature gate (``site-src/guides/flow-control.md:63-69``), under which the
  picker holds requests while the pool is saturated;
* the data layer's metrics source and extractor are listed as the chart's default file lists
  them (the loader adds them only when none is listed, ``pkg/epp/config/loader/defaults.go:291``),
  with the extractor's ``defaultEngine`` for an engine other than vLLM. The scorers and their
  weights are the chart's defaults, so only the thresholds change.

From v1.6 the picker lives in llm-d's router repository; these values are for the v1.5.x chart.
The InferencePool's CRD is v1.6.2's (``inference.networking.k8s.io/v1``). Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export import thresholds
from roofline_cli.export.commented import Note, render_document
from roofline_cli.export.engine_args import OneModelOnly
from roofline_cli.export.options import ExportOptions, by_model, classes_note, object_name, safest
from roofline_cli.export.plans import ExportSource

#: The EndpointPickerConfig's key in ``pluginsCustomConfig`` (the chart's ``pluginsConfigFile``).
CONFIG_KEY = "roofline-plugins.yaml"
#: The chart's default scorers and weights (``config/charts/epplib/templates/_config.yaml``).
SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3))
DETECTOR = "utilization-detector"
DATA_SOURCE = "metrics-data-source"
EXTRACTOR = "core-metrics-extractor"
FLOW_CONTROL_GATE = "flowControl"
FAILURE_MODES = ("FailOpen", "FailClose")
#: The chart's ``inferencePool.modelServerType`` of each engine (``config/charts/inferencepool/
#: values.yaml``); TGI has none.
MODEL_SERVER_TYPES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm-serve"}
#: The chart, as ``helm install`` names it.
#: The longest Helm release name (Helm's own limit, ``pkg/chartutil/validate_name.go``).
HELM_RELEASE_CHARS = 53
CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"


def endpoint_picker_config(
    model: str, source: ExportSource, options: ExportOptions | None = None
) -> tuple[dict[str, Any], str]:
    """The EndpointPickerConfig of one model's pool, and where its numbers came from."""
    options = options or ExportOptions()
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
    extractor: dict[str, Any] = {"type": EXTRACTOR}
    engine = MODEL_SERVER_TYPES.get(options.engine, "vllm")
    if engine != "vllm":
        extractor["parameters"] = {"defaultEngine": engine}
    config: dict[str, Any] = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
    }
    if options.flow_control:
        config["featureGates"] = Note(
            [FLOW_CONTROL_GATE],
            "flow control (--flow-control): the picker holds requests while the pool is "
            "saturated, instead of rejecting only negative-priority ones",
        )
    config["plugins"] = [
        *({"type": name} for name, _ in SCORERS),
        {"type": DATA_SOURCE},
        extractor,
        detector,
    ]
    config["saturationDetector"] = Note(
        {"pluginRef": DETECTOR}, "the saturation detector is the plugin above"
    )
    config["schedulingProfiles"] = [
        {
            "name": "default",
            "plugins": [{"pluginRef": name, "weight": weight} for name, weight in SCORERS],
        }
    ]
    return config, where


def values(model: str, options: ExportOptions, source: ExportSource) -> dict[str, Any]:
    """The ``inferencepool`` chart's values for one model's pool."""
    config, _ = endpoint_picker_config(model, source, options)
    text = render_document(
        config, f"Endpoint picker configuration of {model}'s pool, from {source.description}."
    )
    selector = dict(options.pool_selector) or {"app": object_name(model)}
    shedding = (
        "the picker holds requests while the pool is saturated (flow control)"
        if options.flow_control
        else "with flow control off (the default; --flow-control turns it on) a saturated pool "
        "rejects only negative-priority requests"
    )
    pool = {
        "modelServers": {
            "matchLabels": Note(
                selector,
                "the InferencePool's spec.selector.matchLabels: the serving pods' labels "
                "(--pool-selector)",
            )
        },
        "targetPorts": Note(
            [{"number": options.target_port}],
            "the InferencePool's spec.targetPorts: the engines' HTTP port (--target-port)",
        ),
        "modelServerType": Note(
            MODEL_SERVER_TYPES[options.engine],
            f"the metrics the picker reads (--engine {options.engine})",
        ),
    }
    extension = {
        "extProcPort": Note(
            options.epp_port,
            "the picker's gRPC port, the InferencePool's endpointPickerRef (--epp-port)",
        ),
        "failureMode": Note(
            options.failure_mode,
            "the InferencePool's endpointPickerRef.failureMode (--failure-mode), written "
            "explicitly: FailOpen routes around a picker that does not answer, FailClose "
            "(the CRD's default) refuses the request",
        ),
        "pluginsConfigFile": Note(
            CONFIG_KEY, "the file the picker reads (--config-file /config/<this>)"
        ),
        "pluginsCustomConfig": Note(
            {CONFIG_KEY: Note(text, "the thresholds; the chart mounts it in <release>-epp")},
            f"merged into the chart's own ConfigMap, the only one the picker mounts; {shedding}",
        ),
    }
    return {"inferencePool": pool, "inferenceExtension": extension}


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    """The chart's values for the one model's pool."""
    models = source.models()
    if len(models) != 1:
        raise OneModelOnly(
            f"--target gateway writes one Helm release's values, and {', '.join(models)} are "
            "planned: pick one with --model"
        )
    (model,) = models
    # Helm refuses release names over 53 characters, and the chart names the picker's objects
    # <release>-epp, within the 63 of a Service's name.
    release = object_name(model, HELM_RELEASE_CHARS)
    header = (
        f"Helm values of the inference gateway's inferencepool chart (v1.5.x) for {model}'s "
        f"pool, from {source.description}: helm install {release} {CHART} --version v1.5.0 "
        f"-n {options.namespace} -f THIS_FILE. The chart creates the InferencePool {release} "
        f"(named as the release; route to it from your HTTPRoute) and the endpoint picker "
        f"{release}-epp, which reads the thresholds below."
    )
    return [(header, values(model, options, source))]
