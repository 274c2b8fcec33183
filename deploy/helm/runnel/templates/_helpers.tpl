{{/* The chart name, or nameOverride. */}}
{{- define "runnel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of every resource: release-chart, or fullnameOverride. */}}
{{- define "runnel.fullname" -}}
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

{{- define "runnel.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "runnel.labels" -}}
helm.sh/chart: {{ include "runnel.chart" . }}
{{ include "runnel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select runnel's pods. */}}
{{- define "runnel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runnel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "runnel.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "runnel.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the token: the operator's, or the chart's. */}}
{{- define "runnel.secretName" -}}
{{- default (include "runnel.fullname" .) .Values.auth.existingSecret }}
{{- end }}

{{/* registry/variant:tag, or @digest. */}}
{{- define "runnel.image" -}}
{{- $v := .Values.image.variant }}
{{- if not (has $v (list "runnel" "runnel-agents")) }}
{{- fail (printf "image.variant is %q; use runnel or runnel-agents" $v) }}
{{- end }}
{{- $repo := $v }}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $v }}{{ end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The pod's terminationGracePeriodSeconds: the preStop pause, runnel's
shutdown grace (the same value is RUNNEL_SHUTDOWN_GRACE), and the margin
in which cancelled runs deliver their answers.
*/}}
{{- define "runnel.terminationGracePeriodSeconds" -}}
{{- $c := .Values.config }}
{{- if lt (int $c.terminationMarginSeconds) 10 }}
{{- fail "config.terminationMarginSeconds must be at least 10: runnel gives cancelled runs 10 s to deliver their answers after the grace" }}
{{- end }}
{{- if lt (int $c.shutdownGraceSeconds) 1 }}
{{- fail "config.shutdownGraceSeconds must be a positive number of seconds" }}
{{- end }}
{{- add (int $c.preStopSleepSeconds) (int $c.shutdownGraceSeconds) (int $c.terminationMarginSeconds) }}
{{- end }}
