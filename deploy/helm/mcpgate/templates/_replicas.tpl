{{/*
The Deployment's replicas: replicaCount, above 1 only with cluster.enabled.
Without a cluster each pod knows only the sessions it opened, and the
Service spreads a session's requests over the pods: with two replicas,
half of them would reach a pod that never saw the session and get 404.
*/}}
{{- define "mcpgate.replicas" -}}
{{- $n := int .Values.replicaCount }}
{{- if lt $n 0 }}
{{- fail (printf "replicaCount: %v must be 0 or more" .Values.replicaCount) }}
{{- end }}
{{- if and (gt $n 1) (not .Values.cluster.enabled) }}
{{- fail (printf "replicaCount: %v needs cluster.enabled: true. Without a cluster each pod knows only the client sessions it opened, and the Service would send a session's requests to pods that answer 404 (session not found). Set cluster.enabled and sealKeys.existingSecret (docs/deployment.md, \"Running more than one replica\"), or run one replica." .Values.replicaCount) }}
{{- end }}
{{- $n }}
{{- end }}

{{/* mcpgate.multi: "true" when there may be more than one pod. */}}
{{- define "mcpgate.multi" -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}true{{ end }}
{{- end }}

{{/*
mcpgate.checkCluster refuses values that would make replicas that cannot
share sessions: a cluster without shared seal keys (each pod would seal
with a random key of its own and refuse the others' session ids), Redis
given twice, autoscaling without a cluster.
*/}}
{{- define "mcpgate.checkCluster" -}}
{{- $gw := dig "gateway" (dict) (include "mcpgate.userConfig" . | fromJson) }}
{{- $configKeys := or (hasKey $gw "sealKeys") (hasKey $gw "sealKeyFile") }}
{{- if and .Values.cluster.enabled (not .Values.sealKeys.existingSecret) (not $configKeys) }}
{{- fail "cluster.enabled needs sealKeys.existingSecret: every replica must seal and open session ids with the same keys (a Secret holding the JSON key file; docs/deployment.md, \"Running more than one replica\"), or gateway.sealKeys in config." }}
{{- end }}
{{- if and .Values.sealKeys.existingSecret $configKeys }}
{{- fail "sealKeys.existingSecret: config already sets gateway.sealKeys or gateway.sealKeyFile; keep one of them." }}
{{- end }}
{{- if and .Values.cluster.redis.existingSecret .Values.cluster.redis.url }}
{{- fail "cluster.redis.url: set it or cluster.redis.existingSecret, not both." }}
{{- end }}
{{- if .Values.autoscaling.enabled }}
{{- $min := int .Values.autoscaling.minReplicas }}
{{- $max := int .Values.autoscaling.maxReplicas }}
{{- if or (lt $min 1) (lt $max $min) }}
{{- fail (printf "autoscaling.maxReplicas: %v and minReplicas: %v: want 1 <= minReplicas <= maxReplicas" .Values.autoscaling.maxReplicas .Values.autoscaling.minReplicas) }}
{{- end }}
{{- if and (gt $max 1) (not .Values.cluster.enabled) }}
{{- fail (printf "autoscaling.enabled with maxReplicas: %v needs cluster.enabled: true (more than one replica; docs/deployment.md, \"Running more than one replica\")." .Values.autoscaling.maxReplicas) }}
{{- end }}
{{- if not (dig "requests" "cpu" "" .Values.resources) }}
{{- fail "autoscaling.enabled needs resources.requests.cpu: the autoscaler's target is a share of it." }}
{{- end }}
{{- end }}
{{- end }}
