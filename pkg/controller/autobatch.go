package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// inputKey fingerprints what a plan depends on: the pending pods and their
// claims, the devices claims hold, the nodes' reported and desired state
// and the MigLayouts' specs and modes
// (which decide the Auto nodes and whose status.auto the plan fills).
func inputKey(in AutoInputs, snap planner.Snapshot) string {
	h := sha256.New()
	// The cache lists in no fixed order: lines are sorted.
	var lines []string
	for _, ml := range in.MigLayouts {
		lines = append(lines, fmt.Sprintf("ml %s %s %d %s\n", ml.Name, ml.UID, ml.Generation, ml.Spec.Mode))
	}
	aged := func(p *corev1.Pod) bool {
		return snap.AgingAfter > 0 && !snap.Now.IsZero() && snap.Now.Sub(p.CreationTimestamp.Time) >= snap.AgingAfter
	}
	if len(snap.Pending) > 0 && !snap.Now.IsZero() {
		// While pods wait, they are planned again every eventRepeat
		// though nothing changed, so that their events stand.
		lines = append(lines, fmt.Sprintf("refresh %d\n", snap.Now.Truncate(eventRepeat).Unix()))
	}
	for _, p := range snap.Pending {
		// A pod that starts to be planned by age changes the plan though
		// the pod itself does not change.
		// So does a node declined for it, or no longer
		// (declineTracker).
		lines = append(lines, fmt.Sprintf("pod %s/%s %s %t %v\n", p.Pod.Namespace, p.Pod.Name, p.Pod.ResourceVersion, aged(p.Pod), p.Declined))
		// A claim deleted and created again under the same name changes
		// the demand though the pod does not change.
		for _, c := range p.Claims {
			lines = append(lines, fmt.Sprintf("claim %s/%s %s %s\n", c.Namespace, c.Name, c.UID, c.ResourceVersion))
		}
	}
	// The pods of changes in flight that wait outside the demand keep
	// those changes (UnneededChanges): one deleted, bound or found
	// unschedulable again changes what the plan cancels.
	unplanned := waitsUnplanned(in.Pods, in.Claims)
	for _, nml := range in.NodeMigLayouts {
		for _, g := range nml.Spec.GPUs {
			for _, pod := range g.ServedPods {
				if unplanned.Has(pod) {
					lines = append(lines, fmt.Sprintf("waits %s %s/%d\n", pod, nml.Name, g.Index))
				}
			}
		}
	}
	// Devices claims hold: other drivers' (a NIC released, or a share of
	// one, makes a pod that needs one servable) and miglayout's (pinned
	// before the agent reports them in use).
	for _, id := range snap.OtherHeld.Devices {
		lines = append(lines, fmt.Sprintf("allocated %s\n", id.String()))
	}
	for _, id := range snap.OtherHeld.Shares {
		lines = append(lines, fmt.Sprintf("shared %s\n", id.String()))
	}
	// What decides whether a node is feasible for a pod: its taints and
	// the labels pods or other drivers' slices select on (not the others,
	// which agents such as GPU feature discovery may rewrite every minute).
	keys := feasibilityLabelKeys(in, snap)
	// Each node's allocatable of every resource a pending pod requests
	// (requested) goes in too: whether the node lists it at all
	// (fitsAllocatable) and whether a device plugin serves it
	// (devicePluginServes) decide feasibility, which roomBits misses.
	shapes, requested := pendingShapes(snap)
	for _, n := range snap.Nodes {
		labels := map[string]string{}
		for k := range keys {
			if v, ok := n.Node.Labels[k]; ok {
				labels[k] = v
			}
		}
		alloc := map[corev1.ResourceName]string{}
		for name := range requested {
			if q, ok := n.Node.Status.Allocatable[name]; ok {
				alloc[name] = q.String()
			}
		}
		lines = append(lines, fmt.Sprintf("node %s %v %v %t frozen %t %t room %s alloc %v\n", n.Node.Name, labels, n.Node.Spec.Taints, n.Node.Spec.Unschedulable, n.Frozen, n.CarriesOn, roomBits(n, shapes), alloc))
		for _, g := range n.GPUs {
			lines = append(lines, fmt.Sprintf("gpu %s %d %s pinned %s releasing %s shared %s reclaim %t\n", n.Node.Name, g.Info.Index, g.Layout, g.Pinned, g.Releasing, g.Shared, reclaimDue(snap, n, g)))
		}
		for _, s := range n.OtherSlices {
			if s.Spec.Driver != snap.Driver {
				lines = append(lines, fmt.Sprintf("slice %s %s %d\n", n.Node.Name, s.Name, s.Generation))
				continue
			}
			// miglayout's devices the plan does not change
			// (unplannedDevices), in a slice made for the plan: its
			// devices and their taints.
			for _, d := range s.Spec.Devices {
				lines = append(lines, fmt.Sprintf("unplanned %s %s %v\n", n.Node.Name, d.Name, d.Taints))
			}
		}
	}
	for _, c := range in.Classes {
		lines = append(lines, fmt.Sprintf("class %s %s %d\n", c.Name, c.UID, c.Generation))
	}
	// A rule's taints on other drivers' devices change no slice.
	for _, r := range in.TaintRules {
		lines = append(lines, fmt.Sprintf("taintrule %s %s %d\n", r.Name, r.UID, r.Generation))
	}
	slices.Sort(lines)
	for _, l := range lines {
		h.Write([]byte(l))
	}
	for _, n := range sortedKeys(in.NodeMigLayouts) {
		fmt.Fprintf(h, "nml %s %s\n", n, in.NodeMigLayouts[n].ResourceVersion)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// nodeChangeMatters reports whether a node's update may change a plan: its
// taints or unschedulable changed, it started being deleted, its
// allocatable resources changed (the room pods' requests take, Room, and
// the extended resources a device plugin serves, ServedByDevicePlugin: a
// kubelet that restarts with other reservations, a device plugin that
// registers), or a label the last snapshot's pods select on. Status
// updates that change none of them (conditions, images) do not.
func (a *AutoPlanner) nodeChangeMatters(o, n *corev1.Node) bool {
	if !equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
		o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reading {
		// A pass between its read and its update of labelKeys: any
		// label may be one the pods it reads select on.
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels)
	}
	return labelsChanged(o.Labels, n.Labels, a.labelKeys)
}

// labelsChanged reports whether any of keys differs between the label sets
// o and n: its value, or whether it is there at all (a key an Exists or
// DoesNotExist requirement reads may come with an empty value).
func labelsChanged(o, n map[string]string, keys map[string]bool) bool {
	for k := range keys {
		ov, had := o[k]
		nv, has := n[k]
		if ov != nv || had != has {
			return true
		}
	}
	return false
}

// selectorLabelKeys are the node label keys the MigLayouts' node selectors
// read.
func selectorLabelKeys(mls []v1alpha1.MigLayout) map[string]bool {
	keys := map[string]bool{}
	for _, ml := range mls {
		for k := range ml.Spec.NodeSelector.MatchLabels {
			keys[k] = true
		}
		for _, e := range ml.Spec.NodeSelector.MatchExpressions {
			keys[e.Key] = true
		}
	}
	return keys
}

// feasibilityLabelKeys are the node label keys the pending pods' node
// selectors and required node affinity, and other drivers' slices' node
// selectors, read.
func feasibilityLabelKeys(in AutoInputs, snap planner.Snapshot) map[string]bool {
	keys := map[string]bool{}
	selector := func(sel *corev1.NodeSelector) {
		if sel == nil {
			return
		}
		for _, t := range sel.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				keys[r.Key] = true
			}
		}
	}
	for _, p := range snap.Pending {
		for k := range p.Pod.Spec.NodeSelector {
			keys[k] = true
		}
		if a := p.Pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			selector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		}
		for _, sel := range p.AllocatedOn {
			selector(sel)
		}
	}
	// Every other driver's slice, not only those an Auto node can use now:
	// a relabelled node may come to match one.
	for _, s := range in.Slices {
		if s.Spec.Driver == in.Driver {
			continue
		}
		selector(s.Spec.NodeSelector)
		for _, d := range s.Spec.Devices {
			selector(d.NodeSelector)
		}
	}
	return keys
}

// forget makes the batcher plan the current inputs again: what was done
// with them failed and the retry must not be taken for "nothing new".
func (a *AutoPlanner) forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batch.planned = ""
}

// batcher decides when a batch of input changes is ready to plan.
type batcher struct {
	key         string
	first, last time.Time
	planned     string
}

// plannedNow records that the inputs of fingerprint key are planned now,
// before their window closes: later inputs open a new window.
func (b *batcher) plannedNow(key string) {
	b.key, b.planned, b.first = key, key, time.Time{}
}

// observe records the inputs' fingerprint at now and returns how long to
// wait before planning (≤ 0: plan now). The same inputs are planned once.
func (b *batcher) observe(key string, now time.Time, idle, max time.Duration) time.Duration {
	if key == b.planned {
		// Nothing new (or back to what was planned): any change enqueues
		// again and opens a new window.
		b.key, b.first = key, time.Time{}
		return time.Hour
	}
	if key != b.key {
		if b.first.IsZero() {
			b.first = now
		}
		b.key, b.last = key, now
	}
	wait := min(b.last.Add(idle).Sub(now), b.first.Add(max).Sub(now))
	if wait <= 0 {
		b.planned, b.first = key, time.Time{}
	}
	return wait
}
