{{/* The chart's name, or nameOverride. */}}
{{- define "etcd-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The base name of the release's objects: fullnameOverride, else the release name when it holds
the chart's name (the default release "etcd-operator" gives the names of deploy/), else
"<release>-<name>".
*/}}
{{- define "etcd-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* "<chart>-<version>", the value of helm.sh/chart. */}}
{{- define "etcd-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels that select the operator's Pods. Only the name: a Deployment's selector cannot
change, and releases of chart 0.2 selected on this label alone.
*/}}
{{- define "etcd-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "etcd-operator.name" . }}
{{- end }}

{{/* The labels of every object of the release. */}}
{{- define "etcd-operator.labels" -}}
helm.sh/chart: {{ include "etcd-operator.chart" . }}
{{ include "etcd-operator.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: etcd-operator
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "etcd-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "etcd-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: name the ServiceAccount the operator runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Whether the API server serves ValidatingAdmissionPolicy (Kubernetes 1.30 and newer). */}}
{{- define "etcd-operator.admissionPolicyServed" -}}
{{- if and (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding") }}true{{ end }}
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
