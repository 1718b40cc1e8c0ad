{{/*
The config file the ConfigMap holds. Without cluster.enabled and
sealKeys.existingSecret it is configJson verbatim, else config as JSON,
as it always was. With either, the chart adds to the user's config what
only it knows: gateway.cluster's instance (the pod's UID), advertise
address (the pod's IP and port) and Redis (from environment variables the
Deployment sets from the values), and gateway.sealKeyFile (where the
Secret is mounted). What a gateway.cluster block written in config sets
is kept (heartbeat, sessionMaxAge; instance and advertise too, which
replace the chart's).
*/}}
{{- define "mcpgate.configJson" -}}
{{- if not (or .Values.cluster.enabled .Values.sealKeys.existingSecret) }}
{{- if .Values.configJson }}
{{- .Values.configJson }}
{{- else }}
{{- .Values.config | toPrettyJson }}
{{- end }}
{{- else }}
{{- $cfg := include "mcpgate.userConfig" . | fromJson }}
{{- $gw := get $cfg "gateway" | default (dict) }}
{{- if .Values.cluster.enabled }}
{{- $cl := get $gw "cluster" | default (dict) }}
{{- if not (hasKey $cl "instance") }}
{{- $_ := set $cl "instance" "${POD_UID}" }}
{{- end }}
{{- if not (hasKey $cl "advertise") }}
{{- /* An IPv6 pod writes "[${POD_IP}]:PORT" in config.gateway.cluster.advertise. */}}
{{- $_ := set $cl "advertise" (printf "${POD_IP}:%v" .Values.port) }}
{{- end }}
{{- if .Values.cluster.redis.existingSecret }}
{{- /* The Secret's "password" is optional: unset, it expands to "" and the URL's applies. */}}
{{- $_ := set $cl "redis" (dict "url" "${MCPGATE_REDIS_URL}" "password" "${MCPGATE_REDIS_PASSWORD:-}") }}
{{- else if .Values.cluster.redis.url }}
{{- $_ := set $cl "redis" (dict "url" "${MCPGATE_REDIS_URL}") }}
{{- end }}
{{- $_ := set $gw "cluster" $cl }}
{{- end }}
{{- if .Values.sealKeys.existingSecret }}
{{- $_ := set $gw "sealKeyFile" (include "mcpgate.sealKeyFile" .) }}
{{- end }}
{{- $_ := set $cfg "gateway" $gw }}
{{- $cfg | toPrettyJson }}
{{- end }}
{{- end }}

{{/*
The user's config as JSON, parsed again by the templates that read it
(fromJson gives a fresh copy to change): config, or configJson, which
must then be plain JSON.
*/}}
{{- define "mcpgate.userConfig" -}}
{{- if .Values.configJson }}
{{- $cfg := fromJson .Values.configJson }}
{{- if hasKey $cfg "Error" }}
{{- fail (printf "configJson: is not plain JSON (%s); the chart reads it to add gateway.cluster, gateway.sealKeyFile or to compute terminationGracePeriodSeconds" (get $cfg "Error")) }}
{{- end }}
{{- $cfg | toJson }}
{{- else }}
{{- .Values.config | toJson }}
{{- end }}
{{- end }}

{{/*
Where the key file of sealKeys.existingSecret is mounted: a directory of
its own beside the ConfigMap's, not inside it (a mount point inside a
read-only volume cannot be made).
*/}}
{{- define "mcpgate.sealKeyDir" -}}
/etc/mcpgate-keys
{{- end }}

{{- define "mcpgate.sealKeyFile" -}}
{{- include "mcpgate.sealKeyDir" . }}/seal.json
{{- end }}
