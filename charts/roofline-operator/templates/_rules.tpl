{{/*
The parts of observability/prometheus/rules/roofline.rules.yaml (embedded as
files/roofline.rules.yaml) that chart values change, keyed by alert or record name (an alert
defined by several rules, told apart by their `cause` label, as `<alert>/<cause>`). Everything
else (annotations, the recording rules without parameters) is taken from the file as it is, so
the file stays the one source of truth; with the default values every entry below reproduces
the file exactly, which tests/deploy checks.
*/}}
{{- define "roofline-operator.ruleOverrides" -}}
{{- $underfilled := .Values.prometheusRule.underfilledBatch }}
{{- $degraded := .Values.prometheusRule.degradedGpu }}
{{- $failed := .Values.prometheusRule.failedProfile }}
{{- $slower := .Values.prometheusRule.slowerThanPeers }}
{{- $drift := .Values.prometheusRule.planDrift }}
{{- $stalled := .Values.prometheusRule.engineStalled }}
{{- $stale := .Values.prometheusRule.staleProfile }}
{{- $overfilled := .Values.prometheusRule.overfilledBatch }}
node_namespace_pod:roofline_serving_running_requests:avg_over_time:
  expr: avg_over_time(node_namespace_pod:roofline_serving_running_requests:sum[{{ $underfilled.window }}])
node_namespace_pod:roofline_serving_waiting_requests:avg_over_time:
  expr: avg_over_time(node_namespace_pod:roofline_serving_waiting_requests:sum[{{ $underfilled.window }}])
RooflineUnderfilledBatch:
  expr: |-
    node_namespace_pod:roofline_serving_batch_fill_ratio:avg_over_time < {{ $underfilled.fillRatio }}
    and on (node, namespace, pod, engine)
    node_namespace_pod:roofline_serving_waiting_requests:avg_over_time >= {{ $underfilled.minWaitingRequests }}
  for: {{ $underfilled.for }}
  severity: {{ $underfilled.severity }}
RooflineOverfilledBatch/latency:
  expr: |-
    avg_over_time(node_namespace_pod:roofline_serving_running_requests:sum[{{ $overfilled.window }}])
    > on (node, model) group_left ()
    node_model:roofline_model_max_batch_latency:min
  for: {{ $overfilled.for }}
  severity: {{ $overfilled.severity }}
RooflineOverfilledBatch/kv-cache:
  expr: |-
    avg_over_time(node_namespace_pod:roofline_serving_kv_cache_usage:max[{{ $overfilled.window }}]) >= {{ $overfilled.kvCacheUsage }}
    and on (node, namespace, pod, engine)
    avg_over_time(node_namespace_pod:roofline_serving_waiting_requests:sum[{{ $overfilled.window }}]) >= {{ $overfilled.minWaitingRequests }}
  for: {{ $overfilled.for }}
  severity: {{ $overfilled.severity }}
{{- range $alert, $metric := dict "RooflineDegradedGPUBandwidth" "roofline_memory_bandwidth_bytes_per_second" "RooflineDegradedGPUPeak" "roofline_peak_flops_per_second" }}
{{ $alert }}:
  expr: |-
    {{ $metric }}
    < on (product, dtype) group_left ()
    {{ $degraded.ratio }} * quantile by (product, dtype) (0.5, {{ $metric }})
    and on (product, dtype)
    count by (product, dtype) ({{ $metric }}) >= {{ $degraded.minPeers }}
  for: {{ $degraded.for }}
  severity: {{ $degraded.severity }}
{{- end }}
RooflinePlanDrift:
  expr: roofline:model_itl_ratio > {{ $drift.ratio }}
  for: {{ $drift.for }}
  severity: {{ $drift.severity }}
RooflineEngineStalled:
  for: {{ $stalled.for }}
  severity: {{ $stalled.severity }}
RooflineNodeSlowerThanPeers:
  for: {{ $slower.for }}
  severity: {{ $slower.severity }}
RooflineProfileFailed:
  for: {{ $failed.for }}
  severity: {{ $failed.severity }}
RooflineProfileStale:
  expr: |-
    time() - roofline_profile_timestamp_seconds > {{ int64 $stale.maxAgeSeconds }}
    unless on (profile, node) roofline_node_profile_unschedulable == 1
  for: {{ $stale.for }}
  severity: {{ $stale.severity }}
{{- end }}
