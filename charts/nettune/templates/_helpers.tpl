{{/* Names, labels and images shared by the templates. */}}

{{- define "nettune.name" -}}nettune{{- end -}}

{{- define "nettune.controller.name" -}}{{ .Release.Name }}-controller{{- end -}}
{{- define "nettune.agent.name" -}}{{ .Release.Name }}-agent{{- end -}}

{{/* The agent's service-account user name, as the API server sees it. */}}
{{- define "nettune.agent.username" -}}system:serviceaccount:{{ .Release.Namespace }}:{{ include "nettune.agent.name" . }}{{- end -}}

{{- define "nettune.labels" -}}
app.kubernetes.io/name: {{ include "nettune.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "nettune.controller.selector" -}}
app.kubernetes.io/name: {{ include "nettune.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "nettune.agent.selector" -}}
app.kubernetes.io/name: {{ include "nettune.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{/* image: registry/repository:tag, the tag defaulting to appVersion. */}}
{{- define "nettune.image" -}}
{{- $root := index . 0 -}}{{- $img := index . 1 -}}
{{- $tag := $img.tag | default $root.Values.image.tag | default $root.Chart.AppVersion -}}
{{ $root.Values.image.registry }}/{{ $img.repository }}:{{ $tag }}
{{- end -}}

{{- define "nettune.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The Secret with the credentials of the controller's event push to Loki:
observability.lokiPushSecret, else observability.lokiSecret (one tenant:
a push takes one).
*/}}
{{- define "nettune.lokiPushSecret" -}}
{{- .Values.observability.lokiPushSecret | default .Values.observability.lokiSecret -}}
{{- end }}
