{{/* Names, labels and images shared by the templates. */}}

{{- define "miglayout.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* fullname: the release name, prefixed with the chart name unless it holds it already; at
most 44 characters, so that the longest name made from it, the Service
"<fullname>-controller-metrics", is a DNS label (63). */}}
{{- define "miglayout.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 44 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 44 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "miglayout.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "miglayout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: miglayout
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* podLabels: the labels of a pod template, call with (dict "root" $
"component" "agent" "extra" .Values.agent.podLabels). Neither the chart's
version (helm.sh/chart) nor commonLabels: a change of either alone would
restart every agent, node by node, and each node's devices go unpublished
while its agent is away. */}}
{{- define "miglayout.podLabels" -}}
{{ include "miglayout.selectorLabels" (dict "root" .root "component" .component) }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: miglayout
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* selectorLabels: call with (dict "root" $ "component" "controller"). */}}
{{- define "miglayout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "miglayout.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "miglayout.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- default (printf "%s-controller" (include "miglayout.fullname" .)) .Values.controller.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.controller.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "miglayout.agent.serviceAccountName" -}}
{{- if .Values.agent.serviceAccount.create -}}
{{- default (printf "%s-agent" (include "miglayout.fullname" .)) .Values.agent.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.agent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* image: call with (dict "root" $ "image" .Values.controller.image). */}}
{{- define "miglayout.image" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
rbacRules reads a ClusterRole that controller-gen generated from the code's
+kubebuilder:rbac markers (files/rbac/<component>.yaml, kept current by the
chart test) and returns its rules as {"cluster": [...], "namespaced": [...]}
in JSON: Leases (leader election, the agents' heartbeats), and the core/v1 Events leader election records
beside them, go to a Role in the release namespace instead of a ClusterRole (a
cluster-wide Lease grant would reach kube-node-lease).
Call with (dict "root" $ "component" "controller" "leaderLease" NAME): with
leaderLease, get and update of Leases are granted on that Lease only.
*/}}
{{- define "miglayout.rbacRules" -}}
{{- $file := printf "files/rbac/%s.yaml" .component -}}
{{- $role := .root.Files.Get $file | fromYaml -}}
{{- if or (not $role) (not $role.rules) -}}
{{- fail (printf "the chart is incomplete: %s is missing or has no rules (regenerate it: go test ./deploy/helm -update)" $file) -}}
{{- end -}}
{{- $cluster := list -}}
{{- $namespaced := list -}}
{{- range $role.rules -}}
{{- if and (has "coordination.k8s.io" .apiGroups) $.leaderLease (has "get" .verbs) (has "update" .verbs) -}}
{{- /* Leader election reads and renews one Lease: get and update are kept to
it, so that the controller cannot take over another component's leader-election
Lease of the namespace (kube-system's, where the chart is installed there). */ -}}
{{- $namespaced = append $namespaced (dict "apiGroups" .apiGroups "resources" .resources "verbs" (without .verbs "get" "update")) -}}
{{- $namespaced = append $namespaced (dict "apiGroups" .apiGroups "resources" .resources "resourceNames" (list $.leaderLease) "verbs" (list "get" "update")) -}}
{{- else if has "coordination.k8s.io" .apiGroups -}}
{{- $namespaced = append $namespaced . -}}
{{- else if and (has "" .apiGroups) (has "events" .resources) -}}
{{- /* controller-gen merges rules of equal verbs (core and events.k8s.io events,
other core resources): core events go to the Role, the rest stays cluster-wide. */ -}}
{{- $namespaced = append $namespaced (dict "apiGroups" (list "") "resources" (list "events") "verbs" .verbs) -}}
{{- $otherGroups := without .apiGroups "" -}}
{{- if $otherGroups -}}
{{- $cluster = append $cluster (dict "apiGroups" $otherGroups "resources" .resources "verbs" .verbs) -}}
{{- end -}}
{{- $otherResources := without .resources "events" -}}
{{- if $otherResources -}}
{{- $cluster = append $cluster (dict "apiGroups" (list "") "resources" $otherResources "verbs" .verbs) -}}
{{- end -}}
{{- else -}}
{{- $cluster = append $cluster . -}}
{{- end -}}
{{- end -}}
{{- dict "cluster" $cluster "namespaced" $namespaced | toJson -}}
{{- end -}}

{{/* metricsAnnotations: call with (dict "root" $ "port" 8080). */}}
{{- define "miglayout.metricsAnnotations" -}}
{{- /* Annotation-based scraping sends no token: none with secure metrics. */ -}}
{{- if and .root.Values.metrics.podAnnotations (not .root.Values.metrics.secure) -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}

{{/* The controller's leader-election Lease, in the release namespace. */}}
{{- define "miglayout.controller.leaderLease" -}}
{{ include "miglayout.fullname" . }}-controller.miglayout.io
{{- end -}}
