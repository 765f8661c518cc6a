package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LayoutMode says where a MigLayout's desired layouts come from.
// +kubebuilder:validation:Enum=Static;Auto
type LayoutMode string

const (
	// ModeStatic applies the rules of the MigLayout as written.
	ModeStatic LayoutMode = "Static"
	// ModeAuto lets the planner choose layouts from pending ResourceClaim
	// demand, within the MigLayout's policy.
	ModeAuto LayoutMode = "Auto"
)

// MigLayout declares the MIG layout wanted on the nodes its selector picks.
// Two MigLayouts must not select the same node: such a node is reported as a
// Conflict on both and left as it is.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ml
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.selectedNodes`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].reason`
// +kubebuilder:printcolumn:name="Conflict",type=string,JSONPath=`.status.conditions[?(@.type=="Conflict")].status`
// +kubebuilder:printcolumn:name="Paused",type=string,JSONPath=`.status.conditions[?(@.type=="Paused")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MigLayout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MigLayoutSpec `json:"spec"`
	// +optional
	Status MigLayoutStatus `json:"status,omitempty"`
}

// MigLayoutSpec is the desired state of a MigLayout.
//
// +kubebuilder:validation:XValidation:rule="self.mode != 'Static' || !has(self.policy)",message="policy is only allowed in Auto mode"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Static' || (has(self.rules) && size(self.rules) > 0)",message="Static mode needs at least one rule"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Auto' || !has(self.rules)",message="rules are only allowed in Static mode; Auto mode takes a policy"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Auto' || !has(self.maxNodesChanging)",message="maxNodesChanging is only allowed in Static mode; Auto mode bounds changes with policy.maxGPUs"
type MigLayoutSpec struct {
	// NodeSelector selects the nodes this MigLayout manages. An empty
	// selector selects every node, including nodes without a miglayout
	// agent (which then hold the MigLayout from Ready, reason
	// AgentNotReporting): select GPU nodes by label. An operator other than
	// In, NotIn, Exists and DoesNotExist, or values where none belong or
	// none where they do, is refused at admission. A malformed label key or
	// value is refused by the chart's admission policy
	// (migLayoutSelectorPolicy); without it, it is reported (Degraded,
	// InvalidSelector), and the nodes such a MigLayout holds are left as they
	// are, not taken by another MigLayout. A matchLabels key without a
	// value (null: a key left empty in YAML, an unset template value) is
	// refused at admission where the object is sent whole (create, replace,
	// server-side apply): the API server would drop it, and the selector
	// would select more nodes than written (every node, were it the only
	// term). An update sent as a merge patch (client-side kubectl apply,
	// kubectl edit) deletes such a key before the API server sees it;
	// `kubectl miglayout plan -f` refuses the file. An empty label value is
	// written as ''.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, type(self.matchLabels[k]) != null_type)",messageExpression="'matchLabels ' + self.matchLabels.filter(k, type(self.matchLabels[k]) == null_type)[0] + ' has no value (a key left empty in YAML is null, and dropping it would select more nodes); quote an empty label value'"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operators are In, NotIn, Exists and DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']) || (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions with In or NotIn need values; with Exists or DoesNotExist they take none"
	// +required
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`

	// Mode is Static (apply the rules) or Auto (plan from pending demand).
	// Switched to Auto, the changes of the rules that an agent has not
	// started are dropped (the GPU keeps its layout, and the planner plans
	// from it); those under way are finished.
	// +kubebuilder:default=Static
	// +optional
	Mode LayoutMode `json:"mode,omitempty"`

	// Rules say, in order, what layout each GPU of a selected node gets; the
	// first rule that matches a GPU applies to it. GPUs no rule matches are
	// left as they are. Names, where given, are distinct: status and events
	// tell rules apart by name. Static mode only.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.name) || r.name == '' || self.exists_one(s, has(s.name) && s.name == r.name))",message="rule names must be distinct (an unnamed rule is named by its position)"
	// +listType=atomic
	// +optional
	Rules []LayoutRule `json:"rules,omitempty"`

	// MaxNodesChanging is the most selected nodes whose GPUs change at
	// once in Static mode: a node gets a new layout only while fewer nodes
	// than this have not reached theirs (one Blocked, or whose agent is
	// lost once it was given its layout, counts until it gets there; one
	// whose agent is lost before waits and does not count), in node name
	// order; the others keep
	// their layout and wait (row Pending, "waits its turn"). Unset: every
	// node at once. At least 1, at most 10000. Static mode only.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxNodesChanging *int32 `json:"maxNodesChanging,omitempty"`

	// Policy bounds the planner in Auto mode.
	// +optional
	Policy *AutoPolicy `json:"policy,omitempty"`

	// Paused stops the MigLayout from starting any change on its nodes'
	// GPUs, in either mode, until it is set back to false: a change an
	// agent has not started (the GPU Ready on its old layout, or Draining:
	// nothing destroyed yet) is dropped, the GPU keeping its layout, and a
	// change under way (Repartitioning, Blocked, Failed, or Pending while
	// the agent retries a pass) is finished or reported as before, since
	// stopping it half done would leave the GPU with fewer devices than
	// either layout (a Blocked one goes on once its device is released). In Static mode a node whose
	// rules ask for another layout is Pending and not Ready (its row says
	// it is paused); in Auto mode the planner plans nothing on the nodes,
	// gives no idle GPU back and keeps no spares there, and tells the pods
	// that only those nodes could serve why. Nodes are still selected,
	// adopted and reported, the agents still prepare allocated devices, and
	// status says Paused. Unset, the rules (or the planner) take over from
	// the layouts the GPUs have then.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// ProfileName is a MIG GPU-instance profile name as nvidia-smi prints it
// without the "MIG " prefix, e.g. "3g.40gb" or "1g.10gb+me".
// +kubebuilder:validation:MaxLength=16
// +kubebuilder:validation:XValidation:rule="self.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?$')",message="profile names look like 3g.40gb or 1g.10gb+me"
type ProfileName string

// LayoutRule is one entry of a Static MigLayout, in the spirit of
// mig-parted's mig-configs: which GPUs, MIG on or off, and which devices.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.profiles) && has(self.layout))",message="give either profiles (counts) or layout (explicit placements), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.migEnabled) || self.migEnabled || (!has(self.profiles) && !has(self.layout))",message="profiles and layout need migEnabled: true"
// +kubebuilder:validation:XValidation:rule="(has(self.migEnabled) && !self.migEnabled) || has(self.profiles) || has(self.layout)",message="a rule with MIG enabled needs profiles or layout"
type LayoutRule struct {
	// Name identifies the rule in status and events.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Name string `json:"name,omitempty"`

	// GPUIndices limits the rule to these NVML GPU indices. Empty means every
	// GPU of the node (every GPU that supports MIG where productName is empty
	// too).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=63
	// +listType=set
	// +optional
	GPUIndices []int32 `json:"gpuIndices,omitempty"`

	// ProductName limits the rule to GPUs whose product name (as NVML reports
	// it, e.g. "NVIDIA A100-SXM4-80GB") or catalog model name (e.g.
	// "A100-SXM4-80GB") equals this value, ignoring case. A rule with
	// neither productName nor gpuIndices matches every GPU that supports MIG
	// (NodeMigLayout status migCapable).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ProductName string `json:"productName,omitempty"`

	// MIGEnabled turns MIG mode on (the default) or off. With MIG off the GPU
	// is published as one whole device and profiles/layout must be empty.
	// +optional
	MIGEnabled *bool `json:"migEnabled,omitempty"`

	// Profiles asks for devices by count, e.g. {"3g.40gb": 1, "1g.10gb": 4};
	// the controller chooses placements, keeping devices that are in use and
	// moving as few as possible. An empty map ({}) asks for MIG mode on with
	// no device: every free device of the GPU is destroyed (devices in use
	// are kept until released). A profile without a count (null: a key left
	// empty in YAML) is refused at admission, as the API server would drop
	// it and destroy that profile's free devices (as for nodeSelector, an
	// update sent as a merge patch deletes the key instead). Also refused at
	// admission: counts that need more than 7 compute slices (each count
	// times the number before g of its profile; no GPU has more) and more
	// than one device with media extensions (+me: a profile counted more
	// than once, or two such profiles), as for Layout; counts that fit no
	// model otherwise (memory slices, placements, media engines) get
	// Degraded/InvalidLayout.
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?$'))",messageExpression=`'profile names look like 3g.40gb or 1g.10gb+me (digits, lowercase letters, ".", "+" and "-" only), not "' + self.filter(k, !k.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?$'))[0] + '"'`
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) != null_type)",messageExpression="'profile ' + self.filter(k, type(self[k]) == null_type)[0] + ' has no count (a key left empty in YAML is null)'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == null_type || (self[k] > 0 && self[k] <= 7))",messageExpression="'profile counts must be between 1 and 7 (' + self.filter(k, type(self[k]) != null_type && (self[k] <= 0 || self[k] > 7))[0] + ')'"
	// +kubebuilder:validation:XValidation:rule="!self.all(k, k.matches('^[1-8]g[.]') && type(self[k]) != null_type) || self.map(k, self[k] * int(k.substring(0, 1))).sum() <= 7",message="these counts need more than 7 compute slices (each count times the number before g of its profile); no GPU has more"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.contains('+me') || type(self[k]) == null_type || self[k] <= 1)",message="a GPU holds at most one device of a profile with media extensions (+me)"
	// +kubebuilder:validation:XValidation:rule="size(self.filter(k, k.contains('+me'))) <= 1",message="a GPU holds at most one device with media extensions (+me): these counts ask for devices of two such profiles"
	// +optional
	Profiles map[string]int32 `json:"profiles,omitzero"` // omitzero, not omitempty: an empty non-nil map is sent as {}, nil not at all

	// Layout asks for devices at explicit placements in the canonical text
	// form "<profile>@<placement start>,...", e.g. "3g.40gb@0,2g.20gb@4,1g.10gb@6".
	// Refused at admission as for Profiles: devices that need more than 7
	// compute slices, and more than one device with media extensions (+me);
	// placements that fit no model otherwise get Degraded/InvalidLayout.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?@([0-9]|[1-5][0-9]|6[0-3])(,[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?@([0-9]|[1-5][0-9]|6[0-3]))*$')",message="layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6: each device's profile and placement start (memory slice), comma-separated, no spaces (for MIG on with no device, write profiles: {})"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[1-8]g[.][^,]*(,[1-8]g[.][^,]*)*$') || self.split(',').map(e, int(e.substring(0, 1))).sum() <= 7",message="these devices need more than 7 compute slices (the number before g of each profile); no GPU has more"
	// +kubebuilder:validation:XValidation:rule="size(self.split('+me')) <= 2",message="a GPU holds at most one device with media extensions (+me)"
	// +optional
	Layout *string `json:"layout,omitempty"`
}

// AutoPolicy bounds what the planner may do in Auto mode.
// +kubebuilder:validation:XValidation:rule="!has(self.allowedProfiles) || size(self.allowedProfiles) == 0 || !has(self.spares) || self.spares.all(k, type(self.spares[k]) == null_type || self.spares[k] == 0 || k in self.allowedProfiles)",messageExpression="'spares must name profiles in allowedProfiles; ' + self.spares.filter(k, type(self.spares[k]) != null_type && self.spares[k] != 0 && !(k in self.allowedProfiles))[0] + ' is not there'"
type AutoPolicy struct {
	// AllowedProfiles limits the profiles the planner may create. Empty means
	// every profile of each GPU model. At most 64: profile names carry the
	// memory size, so a fleet of several models names each model's own
	// (every profile but the whole GPU of an A100-80GB, an H200 and a B200
	// is 18 names).
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	AllowedProfiles []ProfileName `json:"allowedProfiles,omitempty"`

	// Spares are free devices to keep per profile on each node (counted over
	// all of the node's GPUs), so that a claim of that profile is served
	// without waiting for a repartition. A count of 0 keeps none, as if the
	// profile were not named. At most 112 per profile (16 GPUs of 7
	// devices); a node that cannot hold the counts reports
	// SparesNotHoldable. A profile without a count (null: a key left empty
	// in YAML) is refused at admission (as for nodeSelector, an update sent
	// as a merge patch deletes the key instead).
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?$'))",messageExpression=`'profile names look like 3g.40gb or 1g.10gb+me (digits, lowercase letters, ".", "+" and "-" only), not "' + self.filter(k, !k.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?$'))[0] + '"'`
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) != null_type)",messageExpression="'spares: profile ' + self.filter(k, type(self[k]) == null_type)[0] + ' has no count (a key left empty in YAML is null)'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == null_type || (self[k] >= 0 && self[k] <= 112))",messageExpression="'spare counts must be between 0 and 112, per node over all its GPUs (' + self.filter(k, type(self[k]) != null_type && (self[k] < 0 || self[k] > 112))[0] + ')'"
	// +optional
	Spares map[string]int32 `json:"spares,omitempty"`

	// MaxGPUsPerNode is the most GPUs of one node reconfigured at once. A
	// GPU counts from when its change is written until the agent reports
	// it Ready, except while the change is retried after an NVML error, or
	// is blocked by a device in use (the planner cancels it, unless it
	// turns MIG off: that one waits for the device and goes ahead once it
	// is released, maybe beside a change planned meanwhile; on a node it
	// leaves alone, its agent lost, another MigLayout selecting it too or a
	// DeviceTaintRule taking all its devices, it still counts), or is a MIG
	// mode change (written in Static mode) waiting for a GPU reset: each of
	// these may last for ever, and would hold the slot as long. Default 1,
	// at most 16.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +kubebuilder:default=1
	// +optional
	MaxGPUsPerNode int32 `json:"maxGPUsPerNode,omitempty"`

	// MaxGPUs is the most GPUs reconfigured at once across the MigLayout's
	// nodes (each Auto MigLayout has its own), counted as for
	// MaxGPUsPerNode. Default 8, at most 10000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=8
	// +optional
	MaxGPUs int32 `json:"maxGPUs,omitempty"`

	// ReclaimIdleGPUsAfterSeconds is how long a GPU stays idle (no device
	// allocated, prepared or running a process, none kept or planned for a
	// pending pod) before the planner gives it back as one device of its
	// model's largest profile (7g.80gb on an A100-SXM4-80GB). The free
	// devices a finished workload leaves would otherwise draw new small
	// claims (kube-scheduler gives a free device to the first pod it fits)
	// onto a GPU a large claim could have whole. 0 keeps idle GPUs as they
	// are. Not done where allowedProfiles leaves the largest profile out,
	// nor, on a node that keeps spares, to a GPU whose free devices are
	// spares the node's other GPUs do not hold (a spare of a profile the
	// GPU holds no free device of, or that it becomes once whole, is no
	// reason to keep it). The idle time is counted by
	// the running controller; a restarted one starts from the count of each
	// GPU's agent (NodeMigLayout status.gpus[].idleSince). In seconds:
	// default 300 (5 minutes), at most 86400 (a day).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=300
	// +optional
	ReclaimIdleGPUsAfterSeconds *int32 `json:"reclaimIdleGPUsAfterSeconds,omitempty"`
}

// MigLayoutStatus is the observed state of a MigLayout, aggregated from the
// NodeMigLayouts of its nodes.
type MigLayoutStatus struct {
	// Conditions: Ready, Progressing, Degraded, Conflict, Paused. See the
	// Reason* constants for their reasons.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// SelectedNodes counts the nodes the selector picks; ReadyNodes those
	// whose GPUs all match the desired layout; ProgressingNodes those with a
	// change not done that is neither Blocked nor Failed (draining,
	// repartitioning, pending: retrying a failed pass, or waiting for their
	// turn under maxNodesChanging); FailedNodes those Blocked or Failed.
	// A node counts in at most one of the three, and in none while it is
	// in conflict (another MigLayout selects it too), its agent is lost,
	// it is paused with a change not started, or its agent has not
	// reported yet: the Ready condition's message counts those.
	// +optional
	SelectedNodes int32 `json:"selectedNodes"`
	// ReadyNodes counts the selected nodes whose GPUs all match the desired
	// layout.
	// +optional
	ReadyNodes int32 `json:"readyNodes"`
	// ProgressingNodes counts the selected nodes with a change not done that
	// is neither Blocked nor Failed.
	// +optional
	ProgressingNodes int32 `json:"progressingNodes"`
	// FailedNodes counts the selected nodes with a GPU Blocked or Failed.
	// +optional
	FailedNodes int32 `json:"failedNodes"`

	// Nodes has one row per selected node, at most 64, in this order, each
	// by name: nodes whose agent is lost; nodes failed (a GPU Blocked or
	// Failed, a NodeMigLayout not written) or in conflict; nodes changing;
	// the others not Ready (paused, waiting for their turn, not reported);
	// then the Ready ones. The counts above cover every node.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Nodes []NodeRow `json:"nodes,omitempty"`

	// Auto counts what the Auto-mode planner last decided (Auto mode
	// only). The planner writes it; the other status fields come from the
	// NodeMigLayouts.
	// +optional
	Auto *AutoStatus `json:"auto,omitempty"`
}

// AutoStatus counts the pending pods of the Auto-mode planner's last plan.
// Pods are counted, not listed: each pod's events say where it stands
// (WaitingForRepartition, WaitingForCapacity, NotServableByAutoMode), and
// `kubectl miglayout plan` lists them. Counts said to be cluster-wide are
// the same on every Auto-mode MigLayout (a pod no GPU can take now belongs
// to no node yet), so they do not add up across MigLayouts.
type AutoStatus struct {
	// LastChangeTime is when the planner last wrote different counts.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// PendingPods counts the pods, cluster-wide, that wait for their
	// ResourceClaims to be allocated.
	// +kubebuilder:validation:Minimum=0
	// +required
	PendingPods int32 `json:"pendingPods"`
	// WaitingForRepartitionPods counts the pods that wait for a GPU of
	// this MigLayout's nodes to be repartitioned for them (event
	// WaitingForRepartition); pods the plan gives a device that is free
	// already are not counted.
	// +kubebuilder:validation:Minimum=0
	// +required
	WaitingForRepartitionPods int32 `json:"waitingForRepartitionPods"`
	// ChangedGPUs counts the GPUs of this MigLayout's nodes being
	// repartitioned for Auto mode: those the plan changes and those an
	// earlier plan changed that are not ready yet.
	// +kubebuilder:validation:Minimum=0
	// +required
	ChangedGPUs int32 `json:"changedGPUs"`
	// WaitingForCapacityPods counts the pods that wait for devices in use
	// to end with a placement kept for them on this MigLayout's nodes
	// (event WaitingForCapacity).
	// +kubebuilder:validation:Minimum=0
	// +required
	WaitingForCapacityPods int32 `json:"waitingForCapacityPods"`
	// WaitingForRoomPods counts the pods, cluster-wide, that an Auto-mode
	// node could serve but none can now (devices in use, another driver's
	// device taken, the limits on GPUs changed at once, the CPU, memory or
	// other resources the pods bound to the nodes take, or only nodes
	// whose agent is lost could), with no placement kept for them; their
	// event is WaitingForCapacity too.
	// +kubebuilder:validation:Minimum=0
	// +required
	WaitingForRoomPods int32 `json:"waitingForRoomPods"`
	// NotServablePods counts the pods, cluster-wide, that no Auto-mode
	// node can serve even with its GPUs free, or that kube-scheduler did
	// not bind to any Auto-mode node they may run on where free devices
	// for them waited (events SchedulerDeclinedNode, then
	// NotServableByAutoMode).
	// +kubebuilder:validation:Minimum=0
	// +required
	NotServablePods int32 `json:"notServablePods"`
	// MissingSpares counts the spare devices policy.spares asks for that
	// this MigLayout's nodes lack and the plan does not make: making them
	// would destroy a device (spares never do, free ones included) or pass
	// the limits on GPUs changed at once. Frozen nodes (agent lost, in
	// conflict) are not counted.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MissingSpares int32 `json:"missingSpares"`
}

// NodeRow is the state of one node in a MigLayout's status.
type NodeRow struct {
	// Node is the node name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Node string `json:"node"`
	// Phase is the least advanced phase of the node's GPUs; Pending where
	// the agent has not reported them yet or maxNodesChanging holds the
	// node back, Unknown where its agent is lost.
	// +optional
	Phase GPUPhase `json:"phase,omitempty"`
	// Message explains a phase other than Ready.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// GPUs has one row per GPU of the node.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	GPUs []GPURow `json:"gpus,omitempty"`
}

// GPURow is one GPU in a MigLayout's status.
type GPURow struct {
	// Index is the NVML GPU index.
	// +required
	Index int32 `json:"index"`
	// Product is the GPU's product name.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Product string `json:"product,omitempty"`
	// Desired and Actual are layouts in canonical text form (empty, and so
	// left out = MIG on, no device; "-" = MIG off; "?" = not known: NVML
	// cannot read the GPU). A GPU the controller leaves as it is shows
	// Desired equal to Actual: no rule matches it (Static mode), no plan
	// has changed it (Auto mode), its rule was refused (phase Failed, the
	// reason in the Degraded condition) or NVML cannot read it.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Desired string `json:"desired,omitempty"`
	// Actual is the layout the GPU holds, as its agent last reported it
	// (same text form as Desired).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Actual string `json:"actual,omitempty"`
	// Phase of this GPU.
	// +optional
	Phase GPUPhase `json:"phase,omitempty"`
}

// +kubebuilder:object:root=true

// MigLayoutList is a list of MigLayouts.
type MigLayoutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MigLayout `json:"items"`
}
