{{/*
terminationGracePeriodSeconds: the time between the kubelet's preStop and
its SIGKILL must hold the preStop sleep, the gateway's drain
(gateway.drainTimeout) and the stop of its servers (stdin closed, then
SIGTERM and SIGKILL to each process group, 2 s apart; in parallel), with
spare. Computed when the value is empty; a smaller number is refused,
since the kubelet would kill the gateway mid-drain and cut the replies
it was still sending.
*/}}
{{- define "mcpgate.terminationGrace" -}}
{{- $pre := int .Values.preStopSleepSeconds }}
{{- if lt $pre 0 }}
{{- fail (printf "preStopSleepSeconds: %v must be 0 or more" .Values.preStopSleepSeconds) }}
{{- end }}
{{- $drainText := dig "gateway" "drainTimeout" "10s" (include "mcpgate.userConfig" . | fromJson) }}
{{- $drain := include "mcpgate.seconds" (dict "key" "gateway.drainTimeout" "value" $drainText) | int }}
{{- $need := add $pre $drain 15 }}
{{- $set := .Values.terminationGracePeriodSeconds }}
{{- if or (kindIs "invalid" $set) (eq (toString $set) "") }}
{{- $need }}
{{- else if lt (int $set) (int $need) }}
{{- fail (printf "terminationGracePeriodSeconds: %v is below %v: preStopSleepSeconds (%v) + gateway.drainTimeout (%s) + 15 s for the servers to stop. Leave it empty to have it computed, or raise it." $set $need $pre $drainText) }}
{{- else }}
{{- int $set }}
{{- end }}
{{- end }}

{{/*
mcpgate.seconds: a Go duration given as (dict "key" KEY "value" TEXT), as
whole seconds rounded up. The chart reads whole numbers of h, m, s and ms
("90s", "1m30s", "1500ms"), which is what durations are written in; any
other form is refused naming the key.
*/}}
{{- define "mcpgate.seconds" -}}
{{- $v := toString .value }}
{{- if not (regexMatch "^(0|([0-9]+(ms|h|m|s))+)$" $v) }}
{{- fail (printf "%s: %q: the chart reads durations written in whole h, m, s or ms (such as \"10s\" or \"1m30s\")" .key $v) }}
{{- end }}
{{- $ms := 0 }}
{{- range regexFindAll "[0-9]+(ms|h|m|s)" $v -1 }}
{{- $n := regexFind "^[0-9]+" . }}
{{- $unit := trimPrefix $n . }}
{{- $scale := get (dict "h" 3600000 "m" 60000 "s" 1000 "ms" 1) $unit }}
{{- $ms = add $ms (mul (atoi $n) $scale) }}
{{- end }}
{{- div (add $ms 999) 1000 }}
{{- end }}
