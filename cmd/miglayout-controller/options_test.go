package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestManagerOptions(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []any
	}{
		"defaults": {
			want: []any{":8080", false, ":8081", true, "miglayout-controller.miglayout.io", "", 15 * time.Second, "mig.miglayout.io [gpu-1]; gpu.example.com [gpu-0-mig-7g80gb-0-0 gpu-1]", "spec.nodeName=", "not cached", true},
		},
		"flags": {
			args: []string{"--metrics-bind-address=0", "--metrics-secure", "--health-probe-bind-address=:9440", "--leader-elect=false",
				"--leader-election-id=x", "--leader-election-namespace=kube-system", "--leader-elect-lease-duration=30s", "--driver-name=gpu.example.com",
				"--agent-lease-namespace=miglayout-system"},
			want: []any{"0", true, ":9440", false, "x", "kube-system", 30 * time.Second, "mig.miglayout.io [gpu-0-mig-7g80gb-0-0 gpu-1]; gpu.example.com [gpu-1]", "spec.nodeName=", "[miglayout-system]", true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := parseFlags(t, tc.args)
			s, err := newScheme()
			if err != nil {
				t.Fatal(err)
			}
			m := o.managerOptions(s)
			// The cache holds ResourceSlices without the driver's own
			// catalogued MIG devices, pods not bound yet, and Leases of
			// the agents' namespace only.
			bySlices, byPods, leases := "not transformed", "", "not cached"
			for obj, by := range m.Cache.ByObject {
				switch obj.(type) {
				case *resourceapi.ResourceSlice:
					if by.Field != nil {
						bySlices = "selected by " + by.Field.String()
					} else if by.Transform != nil {
						bySlices = keptDevices(t, by.Transform, "mig.miglayout.io") + "; " + keptDevices(t, by.Transform, "gpu.example.com")
					}
				case *corev1.Pod:
					if by.Field != nil {
						byPods = by.Field.String()
					}
				case *coordinationv1.Lease:
					leases = fmt.Sprint(slices.Sorted(maps.Keys(by.Namespaces)))
				}
			}
			got := []any{m.Metrics.BindAddress, m.Metrics.SecureServing && m.Metrics.FilterProvider != nil, m.HealthProbeBindAddress, m.LeaderElection, m.LeaderElectionID, m.LeaderElectionNamespace, *m.LeaseDuration, bySlices, byPods, leases, m.Cache.DefaultTransform != nil}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("manager options (-want +got):\n%s", diff)
			}
			if !m.LeaderElectionReleaseOnCancel {
				t.Error("LeaderElectionReleaseOnCancel is off")
			}
		})
	}
}

// TestAutoPlannerOptions: the Auto planner's settings from the flags, 0
// turning a check off, and a malformed --scheduler-lease refused.
func TestAutoPlannerOptions(t *testing.T) {
	type settings struct {
		Idle, Max, Read, Aging, Unbound, Declined time.Duration
		Lease                                     string
		Schedulers                                []string
	}
	tests := map[string]struct {
		args []string
		want settings
		err  string
	}{
		"defaults": {want: settings{2 * time.Second, 10 * time.Second, 500 * time.Millisecond, time.Hour, time.Minute, 10 * time.Minute, "kube-system/kube-scheduler", []string{"default-scheduler"}}},
		"set": {args: []string{"--auto-batch-idle=1s", "--auto-batch-max=5s", "--auto-read-every=100ms", "--auto-aging-after=30m", "--auto-unbound-after=2m", "--auto-declined-for=1h", "--scheduler-lease=sched/my-scheduler", "--auto-scheduler-names=default-scheduler,gpu-scheduler"},
			want: settings{time.Second, 5 * time.Second, 100 * time.Millisecond, 30 * time.Minute, 2 * time.Minute, time.Hour, "sched/my-scheduler", []string{"default-scheduler", "gpu-scheduler"}}},
		"off": {args: []string{"--auto-read-every=0", "--auto-aging-after=0", "--auto-unbound-after=0", "--scheduler-lease="},
			want: settings{2 * time.Second, 10 * time.Second, -1, -1, -1, 10 * time.Minute, "/", []string{"default-scheduler"}}},
		"a lease without namespace":     {args: []string{"--scheduler-lease=kube-scheduler"}, err: `--scheduler-lease="kube-scheduler": want namespace/name`},
		"a lease of three parts":        {args: []string{"--scheduler-lease=a/b/c"}, err: "want namespace/name"},
		"no scheduler name":             {args: []string{"--auto-scheduler-names="}, err: `--auto-scheduler-names="": "" is no scheduler name`},
		"a scheduler name twice":        {args: []string{"--auto-scheduler-names=a,b,a"}, err: `"a" is given twice`},
		"a scheduler name with a space": {args: []string{"--auto-scheduler-names=default-scheduler, b"}, err: `" b" is no scheduler name`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := parseFlags(t, tc.args).autoPlanner(nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := settings{a.Idle, a.Max, a.ReadEvery, a.AgingAfter, a.UnboundAfter, a.DeclinedFor, a.SchedulerLease.String(), a.SchedulerNames}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Auto planner settings (-want +got):\n%s", diff)
			}
		})
	}
}

// parseFlags is the options args set.
func parseFlags(t *testing.T, args []string) *options {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o := bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestNodesTrimmedInCache: the cache holds Nodes without what nothing reads
// (images, volumes, system info, managed fields), with what the planner and
// the reconciler read (labels, taints, unschedulable, allocatable).
func TestNodesTrimmedInCache(t *testing.T) {
	o := parseFlags(t, nil)
	var transform func(any) (any, error)
	for k, v := range o.cacheByObject() {
		if _, isNode := k.(*corev1.Node); isNode {
			transform = v.Transform
		}
	}
	if transform == nil {
		t.Fatal("no transform of Nodes in the cache")
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "a"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Images:   []corev1.ContainerImage{{Names: []string{"registry.example.com/big:1"}, SizeBytes: 1 << 30}},
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: "6.8"}, VolumesInUse: []corev1.UniqueVolumeName{"v"}},
	}
	want := n.DeepCopy()
	want.ManagedFields, want.Status.Images, want.Status.NodeInfo, want.Status.VolumesInUse = nil, nil, corev1.NodeSystemInfo{}, nil
	got, err := transform(n)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached Node (-want +got):\n%s", diff)
	}
	// The reconciler's metadata-only informer of Nodes takes the same
	// transform (the cache's options are per GVK), in place of the
	// default one that drops managed fields.
	meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "a"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	wantMeta := meta.DeepCopy()
	wantMeta.ManagedFields = nil
	gotMeta, err := transform(meta)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
		t.Errorf("cached Node metadata (-want +got):\n%s", diff)
	}
}

// TestPendingPodsTrimmedInCache: the cache holds the pods not bound to a
// node without their bulk (controller.TrimPendingPod): a batch backlog of
// tens of thousands of pods would otherwise be held whole.
func TestPendingPodsTrimmedInCache(t *testing.T) {
	o := parseFlags(t, nil)
	var by cache.ByObject
	found := false
	for k, v := range o.cacheByObject() {
		if _, isPod := k.(*corev1.Pod); isPod {
			by, found = v, true
		}
	}
	if !found || by.Transform == nil || by.Field == nil || by.Field.String() != "spec.nodeName=" {
		t.Fatalf("pods in the cache: %+v, want those not bound to a node, trimmed", by)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "cuda", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}}}
	got, err := by.Transform(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached pod (-want +got):\n%s", diff)
	}
}

// keptDevices are the names of the devices transform keeps of a slice of
// driver with an A100's 7g.80gb MIG device and a whole GPU.
func keptDevices(t *testing.T, transform func(any) (any, error), driver string) string {
	t.Helper()
	a100 := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"productName": {StringValue: ptr.To("NVIDIA A100-SXM4-80GB")}}
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n1"),
		Devices: []resourceapi.Device{{Name: "gpu-0-mig-7g80gb-0-0", Attributes: a100}, {Name: "gpu-1", Attributes: a100}}}}
	out, err := transform(s)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range out.(*resourceapi.ResourceSlice).Spec.Devices {
		names = append(names, d.Name)
	}
	return fmt.Sprintf("%s %v", driver, names)
}
