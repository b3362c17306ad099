{{- define "svc.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "svc.labels" -}}
app.kubernetes.io/part-of: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "svc.env" -}}
- name: NATS_URL
  value: {{ .Values.nats.url | quote }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ default (printf "%s-database" (include "svc.fullname" .)) .Values.database.existingSecret }}
      key: {{ .Values.database.existingSecretKey }}
{{- if .Values.keys.existingSecret }}
- name: BackendHost__JwtSigningKey
  valueFrom:
    secretKeyRef:
      name: {{ .Values.keys.existingSecret }}
      key: JWT_SIGNING_KEY
- name: BackendHost__SecretsEncryptionKey
  valueFrom:
    secretKeyRef:
      name: {{ .Values.keys.existingSecret }}
      key: SECRETS_ENCRYPTION_KEY
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}
