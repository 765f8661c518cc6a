{{/*
miglayout.validate refuses values that would install something broken, with
a message that names the value and the fix. values.schema.json has already
checked the types; these are the rules between values.
*/}}
{{- define "miglayout.validate" -}}
{{- $v := .Values -}}
{{- $dns := "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" -}}

{{- if or (gt (len $v.driverName) 63) (not (regexMatch $dns $v.driverName)) -}}
{{- fail (printf "driverName %q is not a DRA driver name: it must be a lower-case DNS subdomain of at most 63 characters, e.g. mig.miglayout.io or gpu.nvidia.com" $v.driverName) -}}
{{- end -}}

{{- if $v.deviceClasses.create -}}
{{- range $key := list "migName" "gpuName" -}}
{{- $name := index $v.deviceClasses $key -}}
{{- if or (gt (len $name) 253) (not (regexMatch $dns $name)) -}}
{{- fail (printf "deviceClasses.%s %q is not a valid DeviceClass name (a lower-case DNS subdomain)" $key $name) -}}
{{- end -}}
{{- end -}}
{{- if eq $v.deviceClasses.migName $v.deviceClasses.gpuName -}}
{{- fail (printf "deviceClasses.migName and deviceClasses.gpuName are both %q: MIG devices and whole GPUs need two DeviceClasses" $v.deviceClasses.migName) -}}
{{- end -}}
{{- $profiles := dict -}}
{{- $resources := dict -}}
{{- $classes := dict -}}
{{- range $v.deviceClasses.extendedResources -}}
{{- if hasKey $profiles .profile -}}
{{- fail (printf "deviceClasses.extendedResources names profile %q twice: each profile gets one DeviceClass" .profile) -}}
{{- end -}}
{{- if hasKey $resources .resourceName -}}
{{- fail (printf "deviceClasses.extendedResources names resourceName %q twice: a pod's request for it would match two DeviceClasses" .resourceName) -}}
{{- end -}}
{{- /* The class name writes "+" as "-" (deviceclasses.yaml): 1g.10gb+me and 1g.10gb-me would make one name. */ -}}
{{- $class := printf "%s-%s" $v.deviceClasses.migName (.profile | replace "+" "-") -}}
{{- if hasKey $classes $class -}}
{{- fail (printf "deviceClasses.extendedResources: profiles %q and %q both make the DeviceClass %q (a class name writes + as -): list one of them" (get $classes $class) .profile $class) -}}
{{- end -}}
{{- $_ := set $profiles .profile true -}}
{{- $_ := set $resources .resourceName true -}}
{{- $_ := set $classes $class .profile -}}
{{- end -}}
{{- end -}}

{{- $own := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/part-of" "app.kubernetes.io/component" -}}
{{- range $where, $labels := dict "commonLabels" $v.commonLabels "controller.podLabels" $v.controller.podLabels "agent.podLabels" $v.agent.podLabels -}}
{{- range $key, $_ := $labels -}}
{{- if has $key $own -}}
{{- fail (printf "%s sets %q, a label the chart sets itself (and selects pods by): it would appear twice in the manifests; leave it out" $where $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- if and (gt (int $v.controller.replicas) 1) (not $v.controller.leaderElection.enabled) -}}
{{- fail (printf "controller.replicas is %d but controller.leaderElection.enabled is false: the replicas would all write NodeMigLayouts; enable leader election or run one replica" (int $v.controller.replicas)) -}}
{{- end -}}
{{- $durations := dict "controller.leaderElection.leaseDuration" $v.controller.leaderElection.leaseDuration "controller.leaderElection.renewDeadline" $v.controller.leaderElection.renewDeadline "controller.leaderElection.retryPeriod" $v.controller.leaderElection.retryPeriod "agent.settlePeriod" $v.agent.settlePeriod "agent.resyncPeriod" $v.agent.resyncPeriod "agent.deviceHealthInterval" $v.agent.deviceHealthInterval "agent.orphanedClaimGrace" $v.agent.orphanedClaimGrace -}}
{{- range $where, $d := $durations -}}
{{- /* rendered even where unused (leader election off): a flag the binary cannot parse stops it */ -}}
{{- if gt (float64 (include "miglayout.milliseconds" $d)) 9223372036854.775 -}}
{{- fail (printf "%s %s is longer than a Go duration holds (about 2562047h): the binary refuses the flag and every replica would exit at start" $where $d) -}}
{{- end -}}
{{- end -}}
{{- if $v.controller.leaderElection.enabled -}}
{{- $le := $v.controller.leaderElection -}}
{{- $lease := float64 (include "miglayout.milliseconds" $le.leaseDuration) -}}
{{- $renew := float64 (include "miglayout.milliseconds" $le.renewDeadline) -}}
{{- $retry := float64 (include "miglayout.milliseconds" $le.retryPeriod) -}}
{{- if lt $retry 1.0 -}}
{{- fail (printf "controller.leaderElection.retryPeriod %s must be 1ms or more (the controller refuses 0, and every replica would exit at start)" $le.retryPeriod) -}}
{{- end -}}
{{- if lt $lease 1000.0 -}}
{{- fail (printf "controller.leaderElection.leaseDuration %s must be 1s or more (the Lease holds whole seconds, and the API server refuses 0: no replica would lead)" $le.leaseDuration) -}}
{{- end -}}
{{- if le $lease $renew -}}
{{- fail (printf "controller.leaderElection.leaseDuration %s must be longer than renewDeadline %s (client-go's leader election refuses it, and every replica would exit at start)" $le.leaseDuration $le.renewDeadline) -}}
{{- end -}}
{{- if le $renew (mulf $retry 1.2) -}}
{{- fail (printf "controller.leaderElection.renewDeadline %s must be longer than 1.2 × retryPeriod %s (client-go's leader election refuses it, and every replica would exit at start)" $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
{{- end -}}
{{- if ge (float64 (include "miglayout.milliseconds" $v.agent.settlePeriod)) 600000.0 -}}
{{- fail (printf "agent.settlePeriod %s must be shorter than 10m: every pass that drains waits the settle period, holding the GPUs it changes (the agent gives such a pass the settle period plus 5m before its liveness probe fails)" $v.agent.settlePeriod) -}}
{{- end -}}
{{- if le (float64 (include "miglayout.milliseconds" $v.agent.resyncPeriod)) 0.0 -}}
{{- fail (printf "agent.resyncPeriod %s must be longer than 0: the agent refuses to start otherwise" $v.agent.resyncPeriod) -}}
{{- end -}}
{{- if lt (float64 (include "miglayout.milliseconds" $v.agent.deviceHealthInterval)) 1000.0 -}}
{{- fail (printf "agent.deviceHealthInterval %s must be at least 1s: the agent refuses to start otherwise" $v.agent.deviceHealthInterval) -}}
{{- end -}}
{{- if lt (float64 (include "miglayout.milliseconds" $v.agent.orphanedClaimGrace)) 60000.0 -}}
{{- fail (printf "agent.orphanedClaimGrace %s must be at least 1m: the kubelet unprepares a deleted pod's claims itself once it has stopped its containers, and should have the time to" $v.agent.orphanedClaimGrace) -}}
{{- end -}}
{{- with $v.agent.updateStrategy.rollingUpdate -}}
{{- if and (hasKey . "maxSurge") (ne (toString .maxSurge) "0") (ne (toString .maxSurge) "0%") -}}
{{- fail (printf "agent.updateStrategy.rollingUpdate.maxSurge %v must be 0: a surge runs two agents on a node at once, both repartitioning its GPUs and serving one kubelet plugin socket" .maxSurge) -}}
{{- end -}}
{{- end -}}
{{- if eq (int $v.controller.metricsPort) (int $v.controller.healthPort) -}}
{{- fail (printf "controller.metricsPort and controller.healthPort are both %d: they must differ" (int $v.controller.metricsPort)) -}}
{{- end -}}
{{- if eq (int $v.agent.metricsPort) (int $v.agent.healthPort) -}}
{{- fail (printf "agent.metricsPort and agent.healthPort are both %d: they must differ" (int $v.agent.metricsPort)) -}}
{{- end -}}

{{- if and $v.agent.deviceBindingConditions (not (semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version)) -}}
{{- fail (printf "agent.deviceBindingConditions needs Kubernetes 1.36 or newer (DRA device binding conditions, and the granular status authorization that keeps each agent to the claims of its own node, are on by default from 1.36); this cluster is %s" .Capabilities.KubeVersion.Version) -}}
{{- end -}}

{{- if and (not $v.agent.privileged) (not $v.agent.simulate) -}}
{{- fail "agent.privileged=false needs agent.simulate: managing MIG through NVML (creating and destroying GPU instances, switching MIG mode) needs a privileged container; only the NVML simulator runs without" -}}
{{- end -}}
{{- if and $v.agent.simulate (not (regexMatch "^[1-9][0-9]*x[A-Za-z0-9-]+(,[1-9][0-9]*x[A-Za-z0-9-]+)*$" $v.agent.simulate)) -}}
{{- fail (printf "agent.simulate %q is not a hardware spec: write COUNTxMODEL[,COUNTxMODEL...], e.g. 4xA100-SXM4-80GB or 2xH100-SXM5-80GB,1xA30 (kubectl miglayout profiles lists the models)" $v.agent.simulate) -}}
{{- end -}}
{{- /* The schema admits whole h, m and s parts only; the agent needs 4 s at least. */ -}}
{{- $lease := toString $v.agent.heartbeatLeaseDuration -}}
{{- $seconds := 0 -}}
{{- range $unit, $mult := dict "h" 3600 "m" 60 "s" 1 -}}
{{- $part := regexFind (printf "[0-9]+%s" $unit) $lease | trimSuffix $unit -}}
{{- if $part -}}{{- $seconds = add $seconds (mul (atoi $part) $mult) -}}{{- end -}}
{{- end -}}
{{- if lt (int $seconds) 4 -}}
{{- fail (printf "agent.heartbeatLeaseDuration %q is under 4s: the agent renews its Lease every quarter of it and refuses a shorter one" $lease) -}}
{{- end -}}
{{- if gt (int64 $seconds) 2147483647 -}}
{{- fail (printf "agent.heartbeatLeaseDuration %q is over 2147483647s, the most a Lease's leaseDurationSeconds holds: the agent refuses it" $lease) -}}
{{- end -}}
{{- with $v.controller.schedulerLease -}}
{{- if gt (len (index (splitList "/" .) 1)) 253 -}}
{{- fail (printf "controller.schedulerLease %q: a Lease's name has at most 253 characters" .) -}}
{{- end -}}
{{- end -}}
{{- range $key, $path := $v.agent.hostPaths -}}
{{- if not (isAbs $path) -}}
{{- fail (printf "agent.hostPaths.%s %q must be an absolute path on the node" $key $path) -}}
{{- end -}}
{{- end -}}

{{- if and $v.rbac.create (not $v.controller.serviceAccount.create) (or (not $v.controller.serviceAccount.name) (eq $v.controller.serviceAccount.name "default")) -}}
{{- fail "controller.serviceAccount.create=false needs controller.serviceAccount.name (not \"default\"): the controller's rights (writing every node's NodeMigLayout) would be bound to the namespace's default ServiceAccount, which any pod there runs as" -}}
{{- end -}}

{{- if and (eq .Release.Namespace "kube-system") $v.rbac.create (not (and $v.agentNodePolicy.enabled (has "Deny" $v.agentNodePolicy.validationActions))) -}}
{{- fail "installing into kube-system needs agentNodePolicy.enabled with validationActions [Deny]: the agents may write Leases of the release namespace (their heartbeats), and only the policy keeps each agent to its own; in kube-system they could take over kube-scheduler's and kube-controller-manager's leader-election Leases. Install into a namespace of its own (e.g. miglayout-system) or keep the policy denying" -}}
{{- end -}}

{{- if and $v.migLayoutSelectorPolicy.enabled (has "Deny" $v.migLayoutSelectorPolicy.validationActions) (has "Warn" $v.migLayoutSelectorPolicy.validationActions) -}}
{{- fail "migLayoutSelectorPolicy.validationActions may not hold both Deny and Warn (the API server refuses that binding); use [Deny] or [Warn, Audit]" -}}
{{- end -}}

{{- if $v.agentNodePolicy.enabled -}}
{{- if and (not $v.agent.serviceAccount.create) (or (not $v.agent.serviceAccount.name) (eq $v.agent.serviceAccount.name "default")) -}}
{{- fail "agentNodePolicy.enabled needs the agent's own ServiceAccount: the policy singles the agent out by its ServiceAccount, and would restrict the namespace's default one; set agent.serviceAccount.create=true or agent.serviceAccount.name" -}}
{{- end -}}
{{- if and (has "Deny" $v.agentNodePolicy.validationActions) (has "Warn" $v.agentNodePolicy.validationActions) -}}
{{- fail "agentNodePolicy.validationActions may not hold both Deny and Warn (the API server refuses that binding); use [Deny] or [Warn, Audit]" -}}
{{- end -}}
{{- if not (semverCompare ">=1.32.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "agentNodePolicy.enabled needs Kubernetes 1.32 or newer (service-account tokens carry their node from 1.32); this cluster is %s: upgrade, or set agentNodePolicy.enabled=false and accept that any agent can write any node's ResourceSlices" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
miglayout.milliseconds is a Go duration string (values.schema.json's
pattern: e.g. 15s, 1m30s, 1.5s, 500ms) in milliseconds, as a number's text.
Each part is cut to whole nanoseconds, as time.ParseDuration does: 0.5ns is
0, which the checks on it then refuse as the agent would.
*/}}
{{- define "miglayout.milliseconds" -}}
{{- $ns := 0.0 -}}
{{- $units := dict "ns" 1.0 "us" 1000.0 "µs" 1000.0 "ms" 1000000.0 "s" 1000000000.0 "m" 60000000000.0 "h" 3600000000000.0 -}}
{{- range regexFindAll "[0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $num := regexFind "^[0-9]+([.][0-9]+)?" . -}}
{{- $ns = addf $ns (floor (mulf (float64 $num) (get $units (trimPrefix $num .)))) -}}
{{- end -}}
{{- divf $ns 1000000.0 -}}
{{- end -}}
