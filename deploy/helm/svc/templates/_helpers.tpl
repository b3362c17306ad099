{{- define "svc.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "svc.labels" -}}
app.kubernetes.io/part-of: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
Secrets reach the services as mounted files, never as environment variables (issue 21, item 1): each
setting's `<VARIABLE>_FILE` names its file. DATABASE_URL goes to every container; the token-signing key
only to rbac, the secrets-encryption key only to the webhook dispatcher (see "svc.secretVolumes").
*/}}
{{- define "svc.env" -}}
- name: NATS_URL
  value: {{ .Values.nats.url | quote }}
- name: DATABASE_URL_FILE
  value: /var/run/secrets/svc/database/{{ .Values.database.existingSecretKey }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}


{{/* The key file settings of one service: the keys it needs and no other. Argument: dict root, service. */}}
{{- define "svc.keyEnv" -}}
{{- if .root.Values.keys.existingSecret }}
{{- if eq .service "rbac" }}
- name: BackendHost__JwtSigningKey_FILE
  value: /var/run/secrets/svc/keys/JWT_SIGNING_KEY
{{- end }}
{{- if eq .service "webhook-dispatcher" }}
- name: BackendHost__SecretsEncryptionKey_FILE
  value: /var/run/secrets/svc/keys/SECRETS_ENCRYPTION_KEY
{{- end }}
{{- end }}
{{- end -}}

{{/* Mounts of the secret files. Argument: dict root, service ("migrate" for the migration job). */}}
{{- define "svc.secretMounts" -}}
- { name: database-secret, mountPath: /var/run/secrets/svc/database, readOnly: true }
{{- if and .root.Values.keys.existingSecret (has .service (list "rbac" "webhook-dispatcher")) }}
- { name: keys-secret, mountPath: /var/run/secrets/svc/keys, readOnly: true }
{{- end }}
{{- end -}}

{{/*
The secret volumes, each holding only the items the service reads; mode 0440 with the pods' fsGroup 1000,
so uid 1000 reads them and nothing is world-readable. Argument: dict root, service.
*/}}
{{- define "svc.secretVolumes" -}}
- name: database-secret
  secret:
    secretName: {{ default (printf "%s-database" (include "svc.fullname" .root)) .root.Values.database.existingSecret }}
    defaultMode: 288 # 0440
    items:
      - { key: {{ .root.Values.database.existingSecretKey }}, path: {{ .root.Values.database.existingSecretKey }} }
{{- if and .root.Values.keys.existingSecret (has .service (list "rbac" "webhook-dispatcher")) }}
- name: keys-secret
  secret:
    secretName: {{ .root.Values.keys.existingSecret }}
    defaultMode: 288 # 0440
    items:
      {{- if eq .service "rbac" }}
      - { key: JWT_SIGNING_KEY, path: JWT_SIGNING_KEY }
      {{- else }}
      - { key: SECRETS_ENCRYPTION_KEY, path: SECRETS_ENCRYPTION_KEY }
      {{- end }}
{{- end }}
{{- end -}}
