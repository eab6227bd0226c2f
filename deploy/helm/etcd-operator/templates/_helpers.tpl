{{/* The labels of every object; the same as deploy/ so the default output matches it. */}}
{{- define "etcd-operator.labels" -}}
app.kubernetes.io/name: etcd-operator
{{- end }}

{{/* The operator image: repository:tag, the tag defaulting to v<appVersion>. */}}
{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}

{{/* Settings that cannot work together, refused before anything is applied. */}}
{{- define "etcd-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas is %d but leaderElection.enabled is false: replicas without leader election would all act on the same clusters; enable leader election or run one replica" (int .Values.replicas)) }}
{{- end }}
{{- with .Values.localStore }}
{{- if and .enabled (not .existingClaim) (not .volume) }}
{{- fail "localStore.enabled is true but neither localStore.existingClaim nor localStore.volume is set: name a PVC of the release's namespace, or give a volume source (nfs, hostPath...)" }}
{{- end }}
{{- if and .enabled .existingClaim .volume }}
{{- fail "localStore.existingClaim and localStore.volume are both set: give one of them" }}
{{- end }}
{{- end }}
{{- end }}
