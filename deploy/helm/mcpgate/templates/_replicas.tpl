{{/*
The Deployment's replicas: replicaCount, refused above 1. Client sessions
live in the one gateway process that opened them (their stdio servers, SSE
streams and requests in flight), and the Service spreads requests over the
pods: with two replicas, half of a session's requests would reach a pod
that never saw it and get 404. Until replicas share sessions, grow the pod
(resources), not their number.
*/}}
{{- define "mcpgate.replicas" -}}
{{- $n := int .Values.replicaCount }}
{{- if or (gt $n 1) (lt $n 0) }}
{{- fail (printf "replicaCount: %v is not supported: must be 0 or 1. mcpgate keeps each client session (its stdio servers, streams and requests in flight) in the one pod that opened it, so a second replica would answer the first one's sessions with 404 (session not found). Run one replica and give it more resources." .Values.replicaCount) }}
{{- end }}
{{- $n }}
{{- end }}
