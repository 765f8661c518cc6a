package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestChangesInFlightThatMayBeCancelledAsUnneeded: a change in flight may be
// cancelled as unneeded only while it was made for pods (ServedPods), the
// agent has destroyed nothing yet (Draining, or Ready on the layout before
// it) and its list of pods is complete: a list at MaxItems (32) may have
// left pods out, so such a change is never judged unneeded.
func TestChangesInFlightThatMayBeCancelledAsUnneeded(t *testing.T) {
	pods := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("ns/p%d", i)
		}
		return out
	}
	tests := map[string]struct {
		phase  v1alpha1.GPUPhase
		served []string
		want   bool
	}{
		"draining, for one pod":              {phase: v1alpha1.PhaseDraining, served: pods(1), want: true},
		"ready on the layout before it":      {phase: v1alpha1.PhaseReady, served: pods(1), want: true},
		"for 31 pods":                        {phase: v1alpha1.PhaseDraining, served: pods(maxServedPods - 1), want: true},
		"for as many pods as the list holds": {phase: v1alpha1.PhaseDraining, served: pods(maxServedPods)},
		"for no pod (spares)":                {phase: v1alpha1.PhaseDraining},
		"repartitioning":                     {phase: v1alpha1.PhaseRepartitioning, served: pods(1)},
		"pending after a failed pass":        {phase: v1alpha1.PhasePending, served: pods(1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := specGPU(0, "3g.40gb@4", "serves")
			spec.ServedPods = tc.served
			nml := nodeMigLayout("n1").spec(spec).status(a100(0).layout("7g.80gb@0").phase(tc.phase, "", "")).build()
			c, got := undestroyed(nml, 0)
			if got != tc.want {
				t.Fatalf("cancellable %v, want %v", got, tc.want)
			}
			if !got {
				return
			}
			if diff := cmp.Diff("n1/0: 3g.40gb@4 -> 7g.80gb@0", fmt.Sprintf("%s/%d: %s -> %s", c.Node, c.GPU, c.From, c.To)); diff != "" {
				t.Errorf("cancel (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChangeInFlightIsUnneededWhenNoPodWaitsForItsNewDevices: a change in
// flight is cancelled as unneeded unless a pod of the plan waits for a
// device it brings (one not in the layout the agent reports now) or a claim
// holds one of them already, with admin access or not (the change was made:
// the status lags). A pod given, or a claim holding, a device of the GPU
// that exists already waits for nothing the change brings.
func TestChangeInFlightIsUnneededWhenNoPodWaitsForItsNewDevices(t *testing.T) {
	spec := specGPU(0, "1g.10gb@0,3g.40gb@4", "serves")
	spec.ServedPods = []string{"ns/gone"}
	in := AutoInputs{Driver: "mig.miglayout.io", NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
		"n1": nodeMigLayout("n1").spec(spec).status(a100(0).layout("1g.10gb@0").phase(v1alpha1.PhaseDraining, "", "")).build(),
	}}
	cancel, ok := undestroyed(in.NodeMigLayouts["n1"], 0)
	if !ok {
		t.Fatal("n1/gpu-0's change is no candidate")
	}
	tests := map[string]struct {
		served []string // devices of n1 the plan gives pod ns/p
		// claims are allocated claims (by name) and the devices of n1
		// they hold.
		claims map[string]resourceapi.DeviceRequestAllocationResult
		want   []string
	}{
		"no pod of the plan on the GPU":              {want: []string{"n1/0"}},
		"a pod given the device that exists already": {served: []string{"gpu-0-mig-1g10gb-19-0"}, want: []string{"n1/0"}},
		"a pod given the device the change brings":   {served: []string{"gpu-0-mig-3g40gb-9-4"}},
		"a claim holds a device the change brings (the status lags)": {claims: map[string]resourceapi.DeviceRequestAllocationResult{
			"c": {Request: "gpu", Driver: "mig.miglayout.io", Pool: "n1", Device: "gpu-0-mig-3g40gb-9-4"}}},
		"a claim holds a device the change brings with admin access": {claims: map[string]resourceapi.DeviceRequestAllocationResult{
			"c": {Request: "gpu", Driver: "mig.miglayout.io", Pool: "n1", Device: "gpu-0-mig-3g40gb-9-4", AdminAccess: ptr.To(true)}}},
		"a claim holds the device that exists already": {claims: map[string]resourceapi.DeviceRequestAllocationResult{
			"c": {Request: "gpu", Driver: "mig.miglayout.io", Pool: "n1", Device: "gpu-0-mig-1g10gb-19-0"}}, want: []string{"n1/0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := in
			in.Claims = map[types.NamespacedName]*resourceapi.ResourceClaim{}
			for name, r := range tc.claims {
				in.Claims[types.NamespacedName{Namespace: "ns", Name: name}] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
					Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
						Results: []resourceapi.DeviceRequestAllocationResult{r}}}}}
			}
			var res planner.Result
			if tc.served != nil {
				res.Served = []planner.Placement{{Pod: "ns/p", Node: "n1", Devices: tc.served}}
			}
			var got []string
			for _, c := range UnneededChanges(in, planner.Snapshot{}, []planner.Change{cancel}, res) {
				got = append(got, fmt.Sprintf("%s/%d", c.Node, c.GPU))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unneeded changes (-want +got):\n%s", diff)
			}
		})
	}
}
