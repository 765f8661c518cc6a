package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/pkg/slices"
)

const (
	testDriver = "mig.miglayout.io"
	devA       = "gpu-0-mig-3g40gb-9-0"
	devB       = "gpu-0-mig-3g40gb-9-4"
)

func TestBindingGate(t *testing.T) {
	type step struct {
		op     string // publish, drain, withdraw, decide, written, refusable
		device string
		want   any
	}
	tests := map[string][]step{
		"nothing published yet: no answer": {
			{op: "decide", device: devA, want: BindingUnknown},
			{op: "refusable", device: devA, want: false},
		},
		"published and kept: confirmed": {
			{op: "publish"},
			{op: "decide", device: devA, want: BindingConfirm},
		},
		"draining: refused and refusable": {
			{op: "drain", device: devA},
			{op: "decide", device: devA, want: BindingRefuse},
			{op: "refusable", device: devA, want: true},
			{op: "decide", device: devB, want: BindingConfirm},
			{op: "refusable", device: devB, want: false},
		},
		"gone from the pool: refused": {
			{op: "publish"},
			{op: "decide", device: "gpu-0-mig-1g10gb-19-6", want: BindingRefuse},
		},
		"withdrawn after its drain: refused and still refusable, until published again": {
			{op: "drain", device: devA},
			{op: "withdraw", device: devA},
			{op: "decide", device: devA, want: BindingRefuse},
			{op: "refusable", device: devA, want: true},
			{op: "refusable", device: devB, want: false},
			{op: "publish"},
			{op: "refusable", device: devA, want: false},
			{op: "decide", device: devA, want: BindingConfirm},
		},
		"a confirmation being written keeps a device that starts draining": {
			{op: "publish"},
			{op: "decide", device: devA, want: BindingConfirm},
			{op: "drain", device: devA},
			{op: "refusable", device: devA, want: false},
			{op: "decide", device: devA, want: BindingRefuse},
			{op: "written", device: devA},
			{op: "refusable", device: devA, want: true},
		},
		"two confirmations of one device: kept until both are written": {
			{op: "publish"},
			{op: "decide", device: devA, want: BindingConfirm},
			{op: "decide", device: devA, want: BindingConfirm},
			{op: "drain", device: devA},
			{op: "written", device: devA},
			{op: "refusable", device: devA, want: false},
			{op: "written", device: devA},
			{op: "refusable", device: devA, want: true},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			var g BindingGate
			all := sets.New(devA, devB)
			for i, s := range steps {
				var got any
				switch s.op {
				case "publish":
					g.Publishing(all, nil)
				case "drain":
					g.Publishing(all, sets.New(s.device))
				case "withdraw":
					g.Publishing(all.Difference(sets.New(s.device)), nil)
				case "decide":
					got = g.Decide(s.device)
				case "written":
					g.Written(s.device)
				case "refusable":
					got = g.Refusable().Has(s.device)
				}
				if s.want != nil && got != s.want {
					t.Errorf("step %d (%s %s) = %v, want %v", i, s.op, s.device, got, s.want)
				}
			}
		})
	}
}

// claimB builds a ResourceClaim allocated devices of this node's pool.
type claimB struct{ c *resourceapi.ResourceClaim }

func allocatedClaim(name string) *claimB {
	return &claimB{c: &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}}
}

// device adds an allocation of dev; binding says whether it carries the
// binding conditions.
func (b *claimB) device(dev string, binding bool) *claimB {
	r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: testDriver, Pool: "n1", Device: dev}
	if binding {
		r.BindingConditions = []string{slices.BindingConditionReady}
		r.BindingFailureConditions = []string{slices.BindingConditionRemoved}
	}
	b.c.Status.Allocation.Devices.Results = append(b.c.Status.Allocation.Devices.Results, r)
	return b
}

// condition sets a binding condition True on dev in the claim's status.
func (b *claimB) condition(dev, typ string) *claimB {
	b.c.Status.Devices = append(b.c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: testDriver, Pool: "n1", Device: dev,
		Conditions: []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}})
	return b
}

func (b *claimB) obj() *resourceapi.ResourceClaim { return b.c }

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestClaimAllocationsLeaveOutRefusableDevices(t *testing.T) {
	tests := map[string]struct {
		claims []*resourceapi.ResourceClaim
		// writing: a confirmation of devA is being written.
		writing    bool
		live, want []string
	}{
		"waiting for binding on a draining device: left out of the live re-check": {
			claims: []*resourceapi.ResourceClaim{allocatedClaim("c").device(devA, true).obj()},
			live:   nil, want: []string{devA},
		},
		"refused already: left out": {
			claims: []*resourceapi.ResourceClaim{allocatedClaim("c").device(devA, true).condition(devA, slices.BindingConditionRemoved).obj()},
			live:   nil, want: []string{devA},
		},
		"confirmed: in use": {
			claims: []*resourceapi.ResourceClaim{allocatedClaim("c").device(devA, true).condition(devA, slices.BindingConditionReady).obj()},
			live:   []string{devA}, want: []string{devA},
		},
		"confirmation being written: in use": {
			claims:  []*resourceapi.ResourceClaim{allocatedClaim("c").device(devA, true).obj()},
			writing: true,
			live:    []string{devA}, want: []string{devA},
		},
		"allocated without binding conditions (an older slice): in use": {
			claims: []*resourceapi.ResourceClaim{allocatedClaim("c").device(devA, false).obj()},
			live:   []string{devA}, want: []string{devA},
		},
		"one claim waits, another is bound (admin access): in use": {
			claims: []*resourceapi.ResourceClaim{
				allocatedClaim("c").device(devA, true).obj(),
				allocatedClaim("d").device(devA, true).condition(devA, slices.BindingConditionReady).obj(),
			},
			live: []string{devA}, want: []string{devA},
		},
		"waiting on a device that is not draining: in use": {
			claims: []*resourceapi.ResourceClaim{allocatedClaim("c").device(devB, true).obj()},
			live:   []string{devB}, want: []string{devB},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			for _, c := range tc.claims {
				objs = append(objs, c)
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
			gate := &BindingGate{}
			gate.Publishing(sets.New(devA, devB), nil)
			if tc.writing {
				if d := gate.Decide(devA); d != BindingConfirm {
					t.Fatalf("Decide = %v before the drain", d)
				}
			}
			gate.Publishing(sets.New(devA, devB), sets.New(devA))
			a := &ClaimAllocations{Cached: c, Live: c, Driver: testDriver, Pool: "n1", Binding: gate}
			live, err := a.AllocatedDevices(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sets.List(sets.New(tc.live...)), sets.List(live)); diff != "" {
				t.Errorf("live allocated devices (-want +got):\n%s", diff)
			}
			cached, err := a.AllocatedDevices(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sets.List(cached)); diff != "" {
				t.Errorf("cached allocated devices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBinderAnswers(t *testing.T) {
	tests := map[string]struct {
		claim *resourceapi.ResourceClaim
		// published, draining: the gate's last publication (nil: none yet).
		published, draining []string
		// want: device -> condition type set True; requeue: asked again.
		want    map[string]string
		requeue bool
		events  int
	}{
		"a kept device is confirmed": {
			claim:     allocatedClaim("c").device(devA, true).obj(),
			published: []string{devA, devB},
			want:      map[string]string{devA: slices.BindingConditionReady},
		},
		"a draining device is refused, with an event on the claim": {
			claim:     allocatedClaim("c").device(devA, true).obj(),
			published: []string{devA, devB}, draining: []string{devA},
			want:   map[string]string{devA: slices.BindingConditionRemoved},
			events: 1,
		},
		"a device no longer published is refused": {
			claim:     allocatedClaim("c").device(devA, true).obj(),
			published: []string{devB},
			want:      map[string]string{devA: slices.BindingConditionRemoved},
			events:    1,
		},
		"an answer given before is kept beside a new one": {
			claim:     allocatedClaim("c").device(devA, true).device(devB, true).condition(devA, slices.BindingConditionReady).obj(),
			published: []string{devA, devB}, draining: []string{devB},
			want:   map[string]string{devA: slices.BindingConditionReady, devB: slices.BindingConditionRemoved},
			events: 1,
		},
		"before the first publication: asked again later": {
			claim:   allocatedClaim("c").device(devA, true).obj(),
			want:    map[string]string{},
			requeue: true,
		},
		// Two requests may get one device (admin access): it has one
		// entry in status.devices, and its confirmation is released once.
		"a device allocated to two requests is answered once": {
			claim:     allocatedClaim("c").device(devA, true).device(devA, true).obj(),
			published: []string{devA, devB},
			want:      map[string]string{devA: slices.BindingConditionReady},
		},
		"a device without binding conditions is left alone": {
			claim:     allocatedClaim("c").device(devA, false).obj(),
			published: []string{devA},
			want:      map[string]string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tc.claim).
				WithStatusSubresource(&resourceapi.ResourceClaim{}).Build()
			gate := &BindingGate{}
			if tc.published != nil {
				gate.Publishing(sets.New(tc.published...), sets.New(tc.draining...))
			}
			rec := events.NewFakeRecorder(10)
			b := &Binder{Client: c, Gate: gate, Driver: testDriver, NodeName: "n1", Recorder: rec}
			res, err := b.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.claim)})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.RequeueAfter > 0; got != tc.requeue {
				t.Errorf("requeue = %v, want %v", got, tc.requeue)
			}
			var got resourceapi.ResourceClaim
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.claim), &got); err != nil {
				t.Fatal(err)
			}
			answers := map[string]string{}
			for _, d := range got.Status.Devices {
				for _, typ := range []string{slices.BindingConditionReady, slices.BindingConditionRemoved} {
					if apimeta.IsStatusConditionTrue(d.Conditions, typ) {
						answers[d.Device] = typ
					}
				}
			}
			if diff := cmp.Diff(tc.want, answers); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			if len(rec.Events) != tc.events {
				t.Errorf("%d events, want %d", len(rec.Events), tc.events)
			}
			// Every confirmation written is released: with everything draining,
			// every device is refusable.
			all := sets.New(devA, devB)
			gate.Publishing(all, all)
			if got := gate.Refusable(); tc.published != nil && !got.Equal(all) {
				t.Errorf("refusable after Reconcile: %v, want %v (a confirmation still counted as being written)", sets.List(got), sets.List(all))
			}
		})
	}
}

// TestBinderKeepsItsEarlierAnswers: the Binder owns its entries of
// status.devices through server-side apply, so an apply that left out an
// earlier answer would remove it and the pod waiting on it would wait again.
func TestBinderKeepsItsEarlierAnswers(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(claim).
		WithStatusSubresource(&resourceapi.ResourceClaim{}).Build()
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), nil)
	b := &Binder{Client: c, Gate: gate, Driver: testDriver, NodeName: "n1", Recorder: events.NewFakeRecorder(10)}
	ctx, key := context.Background(), client.ObjectKeyFromObject(claim)
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	// A second device of the pool, draining, joins the allocation.
	var got resourceapi.ResourceClaim
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	got.Status.Allocation.Devices.Results = append(got.Status.Allocation.Devices.Results, allocatedClaim("x").device(devB, true).c.Status.Allocation.Devices.Results...)
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	gate.Publishing(sets.New(devA, devB), sets.New(devB))
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if !confirmed(&got, testDriver, "n1", devA) {
		t.Errorf("the earlier confirmation of %s is gone: %+v", devA, got.Status.Devices)
	}
	if !answered(&got, testDriver, "n1", devB) || confirmed(&got, testDriver, "n1", devB) {
		t.Errorf("%s is not refused: %+v", devB, got.Status.Devices)
	}
}

// TestBinderKeepsAFailedConfirmation: a confirmation whose write failed may
// still have been applied by the server, so its device stays in use for
// drains, and the retry writes the same answer even though the device has
// started draining meanwhile.
func TestBinderKeepsAFailedConfirmation(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	c, gate, b := failFirstWrite(t, claim)
	ctx, key := context.Background(), client.ObjectKeyFromObject(claim)
	gate.Publishing(sets.New(devA, devB), sets.New(devA))
	if gate.Refusable().Has(devA) {
		t.Fatalf("%s is refusable while its confirmation may have been applied", devA)
	}
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var got resourceapi.ResourceClaim
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if !confirmed(&got, testDriver, "n1", devA) {
		t.Errorf("the retry did not write the confirmation: %+v", got.Status.Devices)
	}
	if !gate.Refusable().Has(devA) {
		// Written: the re-check now sees the confirmation in the claim.
		t.Errorf("%s still held after its confirmation was written", devA)
	}
}

// TestBinderAppliesOnWhatItRead: an apply made on a stale read of the claim
// fails (resourceVersion precondition) instead of dropping an answer the read
// did not show.
func TestBinderAppliesOnWhatItRead(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).device(devB, true).obj()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(claim).
		WithStatusSubresource(&resourceapi.ResourceClaim{}).Build()
	ctx, key := context.Background(), client.ObjectKeyFromObject(claim)
	var stale resourceapi.ResourceClaim
	if err := c.Get(ctx, key, &stale); err != nil {
		t.Fatal(err)
	}
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), nil)
	b := &Binder{Client: c, Gate: gate, Driver: testDriver, NodeName: "n1", Recorder: events.NewFakeRecorder(10)}
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	// A second Binder pass reads the claim from a cache that has not seen the first answer.
	staleClient := interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		stale.DeepCopyInto(obj.(*resourceapi.ResourceClaim))
		return nil
	}})
	gate.Publishing(sets.New(devA, devB), sets.New(devA, devB))
	b2 := &Binder{Client: staleClient, Gate: gate, Driver: testDriver, NodeName: "n1", Recorder: events.NewFakeRecorder(10)}
	if _, err := b2.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err == nil {
		t.Error("an apply based on a stale read succeeded")
	}
	var got resourceapi.ResourceClaim
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{devA, devB} {
		if !confirmed(&got, testDriver, "n1", dev) {
			t.Errorf("the confirmation of %s was replaced: %+v", dev, got.Status.Devices)
		}
	}
}

// TestClaimAllocationsReadAfterTheGate: a confirmation whose write lands just
// after the re-check read the claims (so the read shows it unconfirmed) keeps
// its device in use: the gate is asked before the read.
func TestClaimAllocationsReadAfterTheGate(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), nil)
	if d := gate.Decide(devA); d != BindingConfirm {
		t.Fatalf("Decide = %v", d)
	}
	gate.Publishing(sets.New(devA, devB), sets.New(devA))
	base := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(claim).Build()
	live := interceptor.NewClient(base, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		err := c.List(ctx, list, opts...)
		gate.Written(devA) // the Binder's write returns right after this read
		return err
	}})
	a := &ClaimAllocations{Cached: base, Live: live, Driver: testDriver, Pool: "n1", Binding: gate}
	got, err := a.AllocatedDevices(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Has(devA) {
		t.Errorf("%s left out of the live re-check though its confirmation was being written", devA)
	}
}

// TestBinderPromiseAnswersOnlyItsAllocation: a confirmation promised for one
// allocation (its write failed) does not answer another: after the claim is
// made again under the same name and allocated a device the agent has
// destroyed meanwhile, the device is refused.
func TestBinderPromiseAnswersOnlyItsAllocation(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	first := metav1.Now()
	claim.Status.Allocation.AllocationTimestamp = &first
	c, gate, b := failFirstWrite(t, claim)
	ctx, key := context.Background(), client.ObjectKeyFromObject(claim)
	// The claim is made again and allocated devA, which a drain has destroyed since.
	if err := c.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	again := allocatedClaim("c").device(devA, true).obj()
	again.UID = "c-uid-2"
	later := metav1.NewTime(first.Add(time.Minute))
	again.Status.Allocation.AllocationTimestamp = &later
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	gate.Publishing(sets.New(devB), nil)
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var got resourceapi.ResourceClaim
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if confirmed(&got, testDriver, "n1", devA) || !answered(&got, testDriver, "n1", devA) {
		t.Errorf("the new allocation of destroyed %s is not refused: %+v", devA, got.Status.Devices)
	}
	gate.Publishing(sets.New(devA, devB), sets.New(devA))
	if !gate.Refusable().Has(devA) {
		t.Errorf("the promise of the old allocation still holds %s", devA)
	}
}

// failFirstWrite returns a Binder, its gate (devA and devB published) and its
// client holding claim, and runs one Reconcile of the claim whose status
// write fails (a connection reset: the server may or may not have applied
// it); later writes go through.
func failFirstWrite(t *testing.T, claim *resourceapi.ResourceClaim) (client.Client, *BindingGate, *Binder) {
	t.Helper()
	fail := true
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(claim).
		WithStatusSubresource(&resourceapi.ResourceClaim{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			if fail {
				fail = false
				return errors.New("connection reset")
			}
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		}}).Build()
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), nil)
	b := &Binder{Client: c, Gate: gate, Driver: testDriver, NodeName: "n1", Recorder: events.NewFakeRecorder(10)}
	if _, err := b.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)}); err == nil {
		t.Fatal("Reconcile succeeded through a failing write")
	}
	return c, gate, b
}
