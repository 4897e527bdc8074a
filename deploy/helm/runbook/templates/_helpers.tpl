{{- define "runbook.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "runbook.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runbook.labels" -}}
{{ include "runbook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* runbook.yaml: the values' config, with the address and the playbook directory the pod needs. */}}
{{- define "runbook.config" -}}
{{- $fixed := dict "playbooks" "/etc/runbook/playbooks" "server" (dict "listen" "0.0.0.0:8088") -}}
{{- toYaml (mustMergeOverwrite (deepCopy (.Values.config | default dict)) $fixed) -}}
{{- end -}}

{{- define "runbook.checks" -}}
{{- if not (has .Values.state.type (list "bolt" "postgres")) -}}
{{- fail (printf "state.type is bolt or postgres, not %q" .Values.state.type) -}}
{{- end -}}
{{- if and (eq .Values.state.type "bolt") (gt (int .Values.replicas) 1) -}}
{{- fail "state.type bolt holds one replica (one process owns the state file): set replicas: 1, or state.type: postgres for several" -}}
{{- end -}}
{{- if and (eq .Values.state.type "postgres") (not .Values.state.postgres.secretName) -}}
{{- fail "state.type postgres needs state.postgres.secretName: the Secret holding the database URL" -}}
{{- end -}}
{{- end -}}
