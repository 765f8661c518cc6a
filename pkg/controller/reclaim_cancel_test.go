package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestReclaimInFlightGivesWayToPods: n1's only GPU, seven free 1g.10gb, has
// been idle for the policy's minute and is being given back as one
// 7g.80gb. A pod asking for a 1g.10gb arrives while the agent drains: as
// long as nothing is destroyed yet, the controller cancels the reclaim (the
// pod gets a free 1g.10gb as it is) or writes the pod's own change in its
// place, instead of making the 7g.80gb and splitting it again, also where
// the policy has stopped reclaiming since. Where the policy stops
// reclaiming (or no longer allows the whole profile), the reclaim is
// cancelled with no pod pending too. Otherwise, with no pod, or once the
// agent repartitions, the reclaim stays, written once.
func TestReclaimInFlightGivesWayToPods(t *testing.T) {
	const sevenSmall = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	for name, tc := range map[string]struct {
		phase   v1alpha1.GPUPhase // the agent's report once the reclaim is written
		profile string            // of the pod that arrives then; "" for none
		want    string            // GPU 0's desired layout after the next plan
		reason  string            // a part of its reason
		changed int32             // the MigLayout's count of GPUs changing
		restart bool              // the controller restarts (it counts idle time afresh)
		// policyOff: the MigLayout's policy stops reclaiming
		// (reclaimIdleGPUsAfterSeconds 0) once the reclaim is written;
		// allowOnly: its allowedProfiles become these then.
		policyOff bool
		allowOnly []v1alpha1.ProfileName
	}{
		"nothing pending, after a restart": {phase: v1alpha1.PhaseDraining, restart: true, want: "7g.80gb@0", reason: "back whole", changed: 1},
		"nothing pending":                  {phase: v1alpha1.PhaseDraining, want: "7g.80gb@0", reason: "back whole", changed: 1},
		"a 1g.10gb pod, while draining": {phase: v1alpha1.PhaseDraining, profile: "1g.10gb", want: sevenSmall,
			reason: "cancels giving the GPU back as 7g.80gb@0 before anything is destroyed: pending pods get its free devices as they are: ns/p1"},
		"a 1g.10gb pod, reclaim since turned off": {phase: v1alpha1.PhaseDraining, profile: "1g.10gb", policyOff: true, want: sevenSmall,
			reason: "cancels giving the GPU back as 7g.80gb@0 before anything is destroyed: pending pods get its free devices as they are: ns/p1"},
		"nothing pending, reclaim since turned off": {phase: v1alpha1.PhaseDraining, policyOff: true, want: sevenSmall,
			reason: "cancels giving the GPU back as 7g.80gb@0 before anything is destroyed: the policy no longer gives it back (reclaimIdleGPUsAfterSeconds is 0)"},
		"nothing pending, 7g.80gb since not allowed": {phase: v1alpha1.PhaseDraining, allowOnly: []v1alpha1.ProfileName{"1g.10gb"}, want: sevenSmall,
			reason: "cancels giving the GPU back as 7g.80gb@0 before anything is destroyed: the policy no longer gives it back (allowedProfiles leave out 7g.80gb)"},
		"a 1g.10gb pod, before the agent starts": {phase: v1alpha1.PhaseReady, profile: "1g.10gb", want: sevenSmall, reason: "cancels giving the GPU back"},
		"a 4g.40gb pod, while draining":          {phase: v1alpha1.PhaseDraining, profile: "4g.40gb", want: "4g.40gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6", reason: "serves 1 pending pod(s): ns/p1", changed: 1},
		"a 1g.10gb pod, while repartitioning":    {phase: v1alpha1.PhaseRepartitioning, profile: "1g.10gb", want: "7g.80gb@0", reason: "back whole", changed: 1},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](60)})
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(sevenSmall)))
			reclaimedBefore := testutil.ToFloat64(reclaimedMetric)
			h.settle()
			h.now = h.now.Add(2 * time.Minute)
			h.settle()
			if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
				t.Fatalf("GPU 0 idle for two minutes -> %q, want it given back as 7g.80gb@0", got)
			}
			h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
				st[0].Phase = tc.phase
				return st
			})
			if tc.restart {
				h.a.idleGPUs = nil
			}
			if tc.policyOff || tc.allowOnly != nil {
				var live v1alpha1.MigLayout
				if err := h.c.Get(context.Background(), types.NamespacedName{Name: "auto"}, &live); err != nil {
					t.Fatal(err)
				}
				if tc.policyOff {
					live.Spec.Policy.ReclaimIdleGPUsAfterSeconds = ptr.To[int32](0)
				}
				if tc.allowOnly != nil {
					live.Spec.Policy.AllowedProfiles = tc.allowOnly
				}
				live.Generation++
				if err := h.c.Update(context.Background(), &live); err != nil {
					t.Fatal(err)
				}
			}
			if tc.profile != "" {
				h.create(autoClaim("c1", profileSelector(tc.profile)), autoPod("p1", h.now, "c1"))
			}
			h.now = h.now.Add(h.a.max())
			h.settle()
			spec := h.nml("n1").Spec.GPUs[0]
			if diff := cmp.Diff(tc.want, spec.Layout); diff != "" {
				t.Errorf("GPU 0's desired layout (-want +got):\n%s", diff)
			}
			if !strings.Contains(spec.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", spec.Reason, tc.reason)
			}
			if st := h.autoStatus(); st == nil || st.ChangedGPUs != tc.changed {
				t.Errorf("Auto status %+v, want %d GPU(s) changing", st, tc.changed)
			}
			if got := testutil.ToFloat64(reclaimedMetric) - reclaimedBefore; got != 1 {
				t.Errorf("idle_gpus_reclaimed_total rose by %v, want 1: a reclaim in flight the plan makes again is not written again", got)
			}
		})
	}
}

// TestApplyReclaimReplacement: the plan read GPU 0 draining for a reclaim to
// 7g.80gb@0 and decided to cancel it, or to make a 4g.40gb for a pod in its
// place. Either is written only while the reclaim has destroyed nothing:
// once the agent reports Repartitioning (it read the spec a last time and
// calls NVML), neither is, and the next plan sees the 7g.80gb coming.
func TestApplyReclaimReplacement(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.UID, auto.Spec.Mode = "uid-auto", v1alpha1.ModeAuto
	const small = "1g.10gb@0,1g.10gb@1"
	reclaiming := func(phase v1alpha1.GPUPhase) *v1alpha1.NodeMigLayout {
		return ownedBy(&v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "gives the GPU, idle for 5m0s, back whole"}}},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
				{Index: 0, MIGEnabled: true, MIGPending: true, Layout: small, Phase: phase}}}}, &auto)
	}
	read := reclaiming(v1alpha1.PhaseDraining)
	cancel, ok := inFlightReclaim(read, 0)
	if !ok {
		t.Fatal("no reclaim in flight read on a GPU draining for 7g.80gb@0")
	}
	replace := planner.Change{Node: "n1", GPU: 0, From: mig.MustParseLayout(small), To: mig.MustParseLayout("4g.40gb@0"), Serves: []string{"ns/p1"}}
	for name, tc := range map[string]struct {
		phase            v1alpha1.GPUPhase
		changes, cancels []planner.Change
		want             string
	}{
		"cancel, still draining":          {phase: v1alpha1.PhaseDraining, cancels: []planner.Change{cancel}, want: small},
		"cancel, repartitioning now":      {phase: v1alpha1.PhaseRepartitioning, cancels: []planner.Change{cancel}, want: "7g.80gb@0"},
		"replacement, still draining":     {phase: v1alpha1.PhaseDraining, changes: []planner.Change{replace}, want: "4g.40gb@0"},
		"replacement, repartitioning now": {phase: v1alpha1.PhaseRepartitioning, changes: []planner.Change{replace}, want: "7g.80gb@0"},
	} {
		t.Run(name, func(t *testing.T) {
			got := applied(t, reclaiming(tc.phase), read, tc.changes, tc.cancels, &auto)
			if diff := cmp.Diff(tc.want, got[0]); diff != "" {
				t.Errorf("GPU 0's desired layout (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplyChangeInReclaimSlot: the plan read GPU 0 draining for a reclaim
// and gave its slot of the node's one GPU changing at once to a pod's change
// of GPU 1, cancelling the reclaim. The change is written only with the
// cancel: once the agent reports Repartitioning (the cancel no longer
// holds) neither is, or two GPUs of the node would change at once.
func TestApplyChangeInReclaimSlot(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.UID, auto.Spec.Mode = "uid-auto", v1alpha1.ModeAuto
	const small = "1g.10gb@0,1g.10gb@1"
	nml := func(phase v1alpha1.GPUPhase) *v1alpha1.NodeMigLayout {
		return ownedBy(&v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{
				{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "gives the GPU, idle for 5m0s, back whole"},
				{Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}}},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
				{Index: 0, MIGEnabled: true, MIGPending: true, Layout: small, Phase: phase},
				{Index: 1, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}, &auto)
	}
	read := nml(v1alpha1.PhaseDraining)
	cancel, ok := inFlightReclaim(read, 0)
	if !ok {
		t.Fatal("no reclaim in flight read on GPU 0")
	}
	change := planner.Change{Node: "n1", GPU: 1, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("4g.40gb@0,3g.40gb@4"), Serves: []string{"ns/p1"}}
	for name, tc := range map[string]struct {
		phase v1alpha1.GPUPhase
		want  []string
	}{
		"still draining":     {phase: v1alpha1.PhaseDraining, want: []string{small, "4g.40gb@0,3g.40gb@4"}},
		"repartitioning now": {phase: v1alpha1.PhaseRepartitioning, want: []string{"7g.80gb@0", "7g.80gb@0"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := applied(t, nml(tc.phase), read, []planner.Change{change}, []planner.Change{cancel}, &auto)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired layouts (-want +got):\n%s", diff)
			}
		})
	}
}

// applied runs AutoPlanner.apply of changes and cancels, planned on read, on
// a cluster where live (and objs) are, and returns live's desired layouts
// after, by GPU.
func applied(t *testing.T, live, read *v1alpha1.NodeMigLayout, changes, cancels []planner.Change, objs ...client.Object) []string {
	t.Helper()
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(objs, live)...).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	a := &AutoPlanner{Client: c}
	if _, err := a.apply(ctx, map[string]*v1alpha1.NodeMigLayout{live.Name: read}, liveGenerations(t, c), changes, cancels); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: live.Name}, &got); err != nil {
		t.Fatal(err)
	}
	var layouts []string
	for _, g := range got.Spec.GPUs {
		layouts = append(layouts, g.Layout)
	}
	return layouts
}
