{{/*
Chart name, truncated to 63 characters because some Kubernetes name fields are limited to that
(DNS-1123 label).
*/}}
{{- define "roofline-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name, truncated to 63 characters; the release name is not repeated when it
already contains the chart name.
*/}}
{{- define "roofline-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart label value: name and version, with "+" replaced because it is not allowed in labels.
*/}}
{{- define "roofline-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object. Selector labels are kept apart because a Deployment's selector is
immutable: it must never contain the chart version.
*/}}
{{- define "roofline-operator.labels" -}}
helm.sh/chart: {{ include "roofline-operator.chart" . }}
{{ include "roofline-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: roofline-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels of the operator pod, its Service and ServiceMonitor.
*/}}
{{- define "roofline-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "roofline-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
Name of the operator's ServiceAccount.
*/}}
{{- define "roofline-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "roofline-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Namespace the profiler pods run in: the only namespace the operator may touch pods in.
*/}}
{{- define "roofline-operator.profilerNamespace" -}}
{{- default .Release.Namespace .Values.profiler.namespace }}
{{- end }}

{{/*
Every namespace the operator may create profiler pods in, as a YAML list without duplicates.
*/}}
{{- define "roofline-operator.profilerNamespaces" -}}
{{- $namespaces := list (include "roofline-operator.profilerNamespace" .) }}
{{- range .Values.rbac.extraProfilerNamespaces }}
{{- $namespaces = append $namespaces . }}
{{- end }}
{{- toYaml ($namespaces | uniq) }}
{{- end }}

{{/*
An image reference from {registry, repository, tag, digest}; a digest pins the image and wins
over the tag, an empty tag falls back to the chart's appVersion.
Usage: include "roofline-operator.imageRef" (dict "image" .Values.image "context" $)
*/}}
{{- define "roofline-operator.imageRef" -}}
{{- $repository := .image.repository }}
{{- if .image.registry }}
{{- $repository = printf "%s/%s" .image.registry .image.repository }}
{{- end }}
{{- if .image.digest }}
{{- printf "%s@%s" $repository .image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .context.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/*
Refuse value combinations that render but cannot work.
*/}}
{{- define "roofline-operator.validateValues" -}}
{{- if and .Values.profiler.createNamespace (eq (include "roofline-operator.profilerNamespace" .) .Release.Namespace) }}
{{- fail "profiler.createNamespace needs profiler.namespace set to a namespace other than the release namespace (Helm does not own the release namespace)" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) .Values.rbac.create (not .Values.serviceAccount.name) }}
{{- fail "rbac.create with serviceAccount.create=false needs serviceAccount.name: the chart will not grant operator permissions to the namespace's default ServiceAccount" }}
{{- end }}
{{- end }}

{{/*
Names of the image pull secrets, which values.yaml takes as `[{name: x}]` (a pod spec's form) or
as plain names.
*/}}
{{- define "roofline-operator.pullSecretNames" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- if kindIs "string" . }}
{{- $names = append $names . }}
{{- else }}
{{- $names = append $names .name }}
{{- end }}
{{- end }}
{{- join "," $names }}
{{- end }}
