package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// autoCluster is a fake cluster with one Auto MigLayout for tests of the AutoPlanner reconciler.
type autoCluster struct {
	t   *testing.T
	c   client.Client
	a   *AutoPlanner
	rec *events.FakeRecorder
	now time.Time
	ml  *v1alpha1.MigLayout
}

const migClassName = "mig.miglayout.io"

func migDeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: migClassName},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig'"}}}}}
}

func autoMigLayout(name string, policy *v1alpha1.AutoPolicy) *v1alpha1.MigLayout {
	ml := migLayout(name).selects("pool", name).build()
	ml.UID, ml.Spec.Mode, ml.Spec.Policy, ml.Generation = types.UID("uid-"+name), v1alpha1.ModeAuto, policy, 1
	return &ml
}

// autoNML is node's NodeMigLayout, controlled by ml, with the GPUs' status.
func autoNML(node string, ml *v1alpha1.MigLayout, gpus ...*gpuBuilder) *v1alpha1.NodeMigLayout {
	return ownedBy(nodeMigLayout(node).status(gpus...).build(), ml)
}

func newAutoCluster(t *testing.T, ml *v1alpha1.MigLayout, objs ...client.Object) *autoCluster {
	return newAutoClusterIntercepted(t, ml, interceptor.Funcs{}, objs...)
}

// newAutoClusterIntercepted is newAutoCluster with the client's calls
// going through funcs.
func newAutoClusterIntercepted(t *testing.T, ml *v1alpha1.MigLayout, funcs interceptor.Funcs, objs ...client.Object) *autoCluster {
	objs = append(objs, ml, migDeviceClass())
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}, &corev1.Pod{}, &resourceapi.ResourceClaim{}).Build()
	h := &autoCluster{t: t, c: c, rec: events.NewFakeRecorder(1000), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ml: ml}
	h.a = &AutoPlanner{Client: c, Recorder: h.rec, Idle: time.Second, Max: 5 * time.Second, Now: func() time.Time { return h.now }}
	return h
}

// claimFor is a claim for one MIG device with the given CEL selector.
func autoClaim(name, expr string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: migClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}}}}}
}

func profileSelector(p string) string {
	return "device.attributes['mig.miglayout.io'].profile == '" + p + "'"
}

// autoPod is an unschedulable pod of claims (by name).
func autoPod(name string, created time.Time, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	for i, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: ptr.To(c)})
	}
	return p
}

// settle runs passes as the controller would, each when asked, until a
// pass plans (or nothing is left to wait for), and returns the last result's
// RequeueAfter.
func (h *autoCluster) settle() time.Duration {
	h.t.Helper()
	ctx := context.Background()
	for range 20 {
		res, err := h.a.Reconcile(ctx, autoKey)
		if err != nil {
			h.t.Fatal(err)
		}
		if res.RequeueAfter == 0 || res.RequeueAfter >= time.Hour {
			return res.RequeueAfter
		}
		// Was the pass a plan? The batcher's planned key says so.
		h.a.mu.Lock()
		planned := h.a.batch.planned == h.a.batch.key && h.a.batch.first.IsZero()
		h.a.mu.Unlock()
		if planned {
			return res.RequeueAfter
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
	h.t.Fatal("no plan after 20 passes")
	return 0
}

func (h *autoCluster) nml(node string) *v1alpha1.NodeMigLayout {
	h.t.Helper()
	var n v1alpha1.NodeMigLayout
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: node}, &n); err != nil {
		h.t.Fatal(err)
	}
	return &n
}

func (h *autoCluster) specOf(node string) map[int32]string {
	out := map[int32]string{}
	for _, g := range h.nml(node).Spec.GPUs {
		out[g.Index] = g.Layout
	}
	return out
}

// agent sets node's GPU idx status.
func (h *autoCluster) agent(node string, f func(st []v1alpha1.GPUStatus, spec []v1alpha1.GPUSpec) []v1alpha1.GPUStatus) {
	h.t.Helper()
	n := h.nml(node)
	n.Status.GPUs = f(n.Status.GPUs, n.Spec.GPUs)
	if err := h.c.Status().Update(context.Background(), n); err != nil {
		h.t.Fatal(err)
	}
}

// agentDone makes every GPU of node hold its desired layout, Ready.
func (h *autoCluster) agentDone(node string) {
	h.agent(node, func(st []v1alpha1.GPUStatus, spec []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		for _, s := range spec {
			for i := range st {
				if st[i].Index == s.Index {
					st[i].Layout, st[i].Phase, st[i].Reason, st[i].Message = s.Layout, v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, ""
				}
			}
		}
		return st
	})
}

func (h *autoCluster) events() []string { return recorded(h.rec) }

func (h *autoCluster) create(objs ...client.Object) {
	h.t.Helper()
	for _, o := range objs {
		if err := h.c.Create(context.Background(), o); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *autoCluster) autoStatus() *v1alpha1.AutoStatus {
	var ml v1alpha1.MigLayout
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: h.ml.Name}, &ml); err != nil {
		h.t.Fatal(err)
	}
	return ml.Status.Auto
}

func h0() time.Time { return time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC) }
