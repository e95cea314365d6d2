{{/* Names and labels shared by every template. */}}
{{- define "cushare.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cushare.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "cushare.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "cushare.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cushare.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cushare.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node
{{- end -}}

{{- define "cushare.labels" -}}
{{ include "cushare.selectorLabels" . }}
app.kubernetes.io/part-of: cushare
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* A number as the programs read it: Helm parses every YAML number as a
     float64, which prints 1000000 as 1e+06. Whole numbers print as integers. */}}
{{- define "cushare.num" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- end -}}

{{- define "cushare.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* One --resource flag per advertised resource, in the plugin's syntax
     NAME[:key=value,...] (docs/kubernetes.md). */}}
{{- define "cushare.resourceFlags" -}}
{{- if .Values.devicePlugin.memory.enabled }}
{{- range .Values.devicePlugin.advertise }}
{{- if .memLimit }}
{{- fail (printf "devicePlugin.advertise %s: memLimit cannot be combined with devicePlugin.memory.enabled (both set CUSHARE_MEM_LIMIT)" .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.devicePlugin.advertise }}
{{- $opts := list }}
{{- if .slots }}{{ $opts = append $opts (printf "slots=%d" (int64 .slots)) }}{{ end }}
{{- if .priority }}{{ $opts = append $opts (printf "priority=%s" .priority) }}{{ end }}
{{- if .weight }}{{ $opts = append $opts (printf "weight=%d" (int64 .weight)) }}{{ end }}
{{- if .memLimit }}{{ $opts = append $opts (printf "mem-limit=%s" .memLimit) }}{{ end }}
- --resource={{ .name }}{{ if $opts }}:{{ join "," $opts }}{{ end }}
{{- end }}
{{- if .Values.devicePlugin.memory.enabled }}
- --resource={{ .Values.devicePlugin.memory.name }}:kind=memory,unit={{ .Values.devicePlugin.memory.unit }}
{{- end }}
{{- end -}}

{{/* The metrics endpoint's listen address: the pod's IP by default (the env
     POD_IP, downward API). Any address is refused: on a shared network the
     NetworkPolicy is what keeps tenants from the endpoint (docs/kubernetes.md). */}}
{{- define "cushare.metricsHost" -}}
{{- $h := .Values.metrics.bindAddress | toString -}}
{{- if has $h (list "" "0.0.0.0" "*" "::" "[::]") -}}
{{- fail (printf "metrics.bindAddress %q listens on every address: use $(POD_IP) (the default), 127.0.0.1 or a specific IP" $h) -}}
{{- end -}}
{{ $h }}
{{- end -}}
