{{- define "gateway.values" -}}{{ toJson (index .Values.gateways .Values.gatewayType) }}{{- end }}

{{- define "gateway.labels" -}}
{{- $gateway := index .Values.gateways .Values.gatewayType -}}
{{- range $key, $val := $gateway.labels }}
{{ $key }}: {{ $val | quote }}
{{- end }}
mesh.io/rev: {{ .Values.revision | default "default" | quote }}
install.operator.mesh.io/owning-resource: {{ .Values.ownerName | default "unknown" }}
operator.mesh.io/component: {{ if eq .Values.gatewayType "mesh-egressgateway" }}"EgressGateways"{{ else }}"IngressGateways"{{ end }}
release: {{ .Release.Name }}
app.kubernetes.io/name: {{ $gateway.name | quote }}
app.kubernetes.io/part-of: "mesh"
app.kubernetes.io/managed-by: "meshctl"
{{- end }}

{{- define "gateway.selector" -}}
{{- $gateway := index .Values.gateways .Values.gatewayType -}}
{{- range $key, $val := $gateway.labels }}
{{ $key }}: {{ $val | quote }}
{{- end }}
{{- end }}
