{{/* The suffix a revision adds to the names of per-revision objects ("" for the default revision). */}}
{{- define "mesh.revSuffix" -}}
{{- if not (eq .Values.revision "") }}-{{ .Values.revision }}{{ end -}}
{{- end }}

{{- define "mesh.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: "meshctl"
app.kubernetes.io/part-of: "mesh"
app.kubernetes.io/version: {{ .Values.global.tag | quote }}
{{- end }}

{{- define "mesh.componentLabels" -}}
mesh.io/rev: {{ .Values.revision | default "default" | quote }}
install.operator.mesh.io/owning-resource: {{ .Values.ownerName | default "unknown" }}
operator.mesh.io/component: "Pilot"
{{- end }}

{{- define "mesh.image" -}}
{{- $hub := .Values.pilot.hub | default .Values.global.hub -}}
{{- $tag := .Values.pilot.tag | default .Values.global.tag -}}
{{- if contains "/" .Values.pilot.image }}{{ .Values.pilot.image }}{{ else }}{{ $hub }}/{{ .Values.pilot.image }}:{{ $tag }}{{ end -}}
{{- with (.Values.pilot.variant | default .Values.global.variant) }}-{{ . }}{{ end -}}
{{- end }}

{{/* The injection webhook entries' shared part (Istio's "core" define). */}}
{{- define "mesh.injectorCore" }}
- name: {{ .Prefix }}sidecar-injector.mesh.io
  clientConfig:
    {{- if .injectionURL }}
    url: {{ .injectionURL | quote }}
    {{- else }}
    service:
      name: meshd{{ if not (eq .revision "") }}-{{ .revision }}{{ end }}
      namespace: {{ .namespace }}
      path: {{ .injectionPath | quote }}
      port: 443
    {{- end }}
    {{- if .caBundle }}
    caBundle: {{ .caBundle | quote }}
    {{- end }}
  sideEffects: None
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
  failurePolicy: Fail
  reinvocationPolicy: {{ .reinvocationPolicy | quote }}
  admissionReviewVersions: ["v1"]
{{- end }}
