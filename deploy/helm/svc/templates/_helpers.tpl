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
Secrets reach the services as mounted files, never as environment variables: each
setting's `<VARIABLE>_FILE` names its file. DATABASE_URL goes to every container; the token-signing key
only to rbac, the secrets-encryption key only to the webhook dispatcher (see "svc.secretVolumes").
*/}}
{{- define "svc.env" -}}
- name: NATS_URL
  value: {{ .Values.nats.url | quote }}
{{- with .Values.nats.tls }}
{{- if .existingSecret }}
- name: NATS_TLS_CA_FILE
  value: /var/run/secrets/svc/nats-tls/ca.crt
{{- if .clientCertificate }}
- name: NATS_TLS_CERT_FILE
  value: /var/run/secrets/svc/nats-tls/tls.crt
- name: NATS_TLS_KEY_FILE
  value: /var/run/secrets/svc/nats-tls/tls.key
{{- end }}
{{- if .serverName }}
- name: NATS_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- end }}
{{- end }}
- name: DATABASE_URL_FILE
  value: /var/run/secrets/svc/database/{{ .Values.database.existingSecretKey }}
{{- if not (hasKey (.Values.env | default dict) "BackendHost__NatsReplicas") }}
- name: BackendHost__NatsReplicas
  value: {{ .Values.nats.replicas | default 1 | quote }}
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}


{{/* The NATS credentials of one service (none for the migration job). Argument: dict root, service. */}}
{{- define "svc.natsAuthEnv" -}}
{{- $auth := .root.Values.nats.auth }}
{{- if and $auth.existingSecret $auth.type (ne .service "migrate") }}
{{- if eq $auth.type "creds" }}
- name: NATS_CREDS_FILE
  value: /var/run/secrets/svc/nats-auth/{{ .service }}.creds
{{- else if eq $auth.type "nkey" }}
- name: NATS_NKEY_SEED_FILE
  value: /var/run/secrets/svc/nats-auth/{{ .service }}.nk
{{- else if eq $auth.type "userPassword" }}
- name: NATS_USER
  value: {{ .service | quote }}
- name: NATS_PASSWORD_FILE
  value: /var/run/secrets/svc/nats-auth/{{ .service }}.password
{{- else if eq $auth.type "token" }}
- name: NATS_TOKEN_FILE
  value: /var/run/secrets/svc/nats-auth/token
{{- end }}
{{- end }}
{{- $plugins := .root.Values.nats.pluginAuth }}
{{- if and $plugins $plugins.existingSecret $plugins.type (eq .service "plugin-registry") }}
{{- if eq $plugins.type "signingKey" }}
- name: NATS_PLUGIN_SIGNING_KEY_FILE
  value: /var/run/secrets/svc/nats-plugin-auth/plugin-signing.nk
- name: NATS_PLUGIN_ACCOUNT
  value: {{ required "nats.pluginAuth.account: the account's public key (account.pub)" $plugins.account | quote }}
- name: NATS_PLUGIN_CREDENTIAL_TTL_SECONDS
  value: {{ $plugins.credentialTtlSeconds | default 3600 | quote }}
{{- else if eq $plugins.type "nkey" }}
- name: NATS_PLUGIN_NKEY_SEED_FILE
  value: /var/run/secrets/svc/nats-plugin-auth/plugins.nk
{{- end }}
{{- if $plugins.clientCertificate }}
- name: NATS_PLUGIN_TLS_CERT_FILE
  value: /var/run/secrets/svc/nats-plugin-auth/plugin-tls.crt
- name: NATS_PLUGIN_TLS_KEY_FILE
  value: /var/run/secrets/svc/nats-plugin-auth/plugin-tls.key
{{- end }}
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
{{- if and .root.Values.nats.auth.existingSecret .root.Values.nats.auth.type (ne .service "migrate") }}
- { name: nats-auth-secret, mountPath: /var/run/secrets/svc/nats-auth, readOnly: true }
{{- end }}
{{- if .root.Values.nats.tls.existingSecret }}
- { name: nats-tls-secret, mountPath: /var/run/secrets/svc/nats-tls, readOnly: true }
{{- end }}
{{- with .root.Values.nats.pluginAuth }}
{{- if and .existingSecret .type (eq $.service "plugin-registry") }}
- { name: nats-plugin-auth-secret, mountPath: /var/run/secrets/svc/nats-plugin-auth, readOnly: true }
{{- end }}
{{- end }}
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
{{- $auth := .root.Values.nats.auth }}
{{- if and $auth.existingSecret $auth.type (ne .service "migrate") }}
{{- $file := dict "creds" (printf "%s.creds" .service) "nkey" (printf "%s.nk" .service) "userPassword" (printf "%s.password" .service) "token" "token" }}
- name: nats-auth-secret
  secret:
    secretName: {{ $auth.existingSecret }}
    defaultMode: 288 # 0440
    items:
      - { key: {{ get $file $auth.type }}, path: {{ get $file $auth.type }} }
{{- end }}
{{- with .root.Values.nats.pluginAuth }}
{{- if and .existingSecret .type (eq $.service "plugin-registry") }}
- name: nats-plugin-auth-secret
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288 # 0440
    items:
      - { key: {{ ternary "plugin-signing.nk" "plugins.nk" (eq .type "signingKey") }}, path: {{ ternary "plugin-signing.nk" "plugins.nk" (eq .type "signingKey") }} }
      {{- if .clientCertificate }}
      - { key: plugin-tls.crt, path: plugin-tls.crt }
      - { key: plugin-tls.key, path: plugin-tls.key }
      {{- end }}
{{- end }}
{{- end }}
{{- with .root.Values.nats.tls }}
{{- if .existingSecret }}
- name: nats-tls-secret
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288 # 0440
    items:
      - { key: ca.crt, path: ca.crt }
      {{- if .clientCertificate }}
      - { key: tls.crt, path: tls.crt }
      - { key: tls.key, path: tls.key }
      {{- end }}
{{- end }}
{{- end }}
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

{{/* Tracing: the standard OTEL_* variables, with the pod and namespace as resource attributes. */}}
{{- define "svc.tracingEnv" -}}
{{- $t := .Values.tracing | default dict -}}
{{- if $t.enabled }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ required "tracing.endpoint is required when tracing.enabled is true" $t.endpoint | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $t.sampler | default "parentbased_traceidratio" | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $t.samplerArg | default "0.1" | quote }}
- name: K8S_POD_NAME
  valueFrom: { fieldRef: { fieldPath: metadata.name } }
- name: K8S_NAMESPACE_NAME
  valueFrom: { fieldRef: { fieldPath: metadata.namespace } }
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE_NAME),service.namespace={{ .Release.Name }}"
{{- with $t.headersSecret }}
{{- if .name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom: { secretKeyRef: { name: {{ .name | quote }}, key: {{ .key | default "OTEL_EXPORTER_OTLP_HEADERS" | quote }} } }
{{- end }}
{{- end }}
{{- end }}
{{- end }}
