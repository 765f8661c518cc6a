package agent

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/pkg/slices"
)

func TestClaimTransform(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationApply}}
	// full is a claim with what the API server returns: managed fields,
	// an annotation, a request and an allocation of dev on pool by driver.
	full := func(driver, pool, dev string) *resourceapi.ResourceClaim {
		c := allocatedClaim("c").device(dev, true).condition(dev, slices.BindingConditionReady).obj()
		c.ManagedFields = managed
		c.Annotations = map[string]string{"note": "x"}
		c.Labels = map[string]string{"app": "train"}
		c.ResourceVersion = "42"
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.miglayout.io"}}}
		c.Status.Allocation.Devices.Results[0].Driver, c.Status.Allocation.Devices.Results[0].Pool = driver, pool
		c.Status.Devices[0].Driver, c.Status.Devices[0].Pool = driver, pool
		return c
	}
	// reduced is what the cache keeps of a claim of no concern to the node.
	reduced := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion}}
	}
	whole := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c = c.DeepCopy()
		c.ManagedFields = nil
		return c
	}
	here, elsewhere, nic := full(testDriver, "n1", devA), full(testDriver, "n2", devA), full("nic.example.com", "n1", devA)
	pending := full(testDriver, "n1", devA)
	pending.Status = resourceapi.ResourceClaimStatus{}
	tests := map[string]struct {
		in   any
		want any
	}{
		"allocated on this node's pool: whole, without managed fields": {
			in: here.DeepCopy(), want: whole(here),
		},
		"allocated on another node: metadata only": {
			in: elsewhere.DeepCopy(), want: reduced(elsewhere),
		},
		"another driver's pool of the same name: metadata only": {
			in: nic.DeepCopy(), want: reduced(nic),
		},
		"not allocated: metadata only": {
			in: pending.DeepCopy(), want: reduced(pending),
		},
		"a deletion's tombstone: unchanged": {
			in:   toolscache.DeletedFinalStateUnknown{Key: "default/c", Obj: elsewhere.DeepCopy()},
			want: toolscache.DeletedFinalStateUnknown{Key: "default/c", Obj: elsewhere},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ClaimTransform(testDriver, "n1")(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("transformed claim (-want +got):\n%s", diff)
			}
		})
	}
}

// A cached read through AllocatedPoolIndex lists the node's claims only and
// finds what a read of every claim finds: the devices of this driver's
// pool, none of another node's or another driver's pool of the node's name.
func TestClaimAllocationsIndexed(t *testing.T) {
	here := allocatedClaim("here").device(devA, false).obj()
	elsewhere := allocatedClaim("elsewhere").device(devB, false).obj()
	elsewhere.Status.Allocation.Devices.Results[0].Pool = "n2"
	nic := allocatedClaim("nic").device("nic-0", false).obj()
	nic.Status.Allocation.Devices.Results[0].Driver = "nic.example.com"
	pending := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending"}}
	objs := []client.Object{here, elsewhere, nic, pending}
	indexed := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithIndex(&resourceapi.ResourceClaim{}, AllocatedPoolIndex, AllocatedPools).Build()
	plain := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	for name, a := range map[string]*ClaimAllocations{
		"indexed":     {Cached: indexed, Live: plain, Driver: testDriver, Pool: "n1", Indexed: true},
		"every claim": {Cached: plain, Live: plain, Driver: testDriver, Pool: "n1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := a.AllocatedDevices(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			guarded, err := a.GuardedDevices(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{devA}, sets.List(got)); diff != "" {
				t.Errorf("cached allocations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{devA}, sets.List(guarded)); diff != "" {
				t.Errorf("guarded allocations (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]string{"mig.miglayout.io/n1"}, AllocatedPools(here)); diff != "" {
		t.Errorf("index keys of a claim (-want +got):\n%s", diff)
	}
	// The cache is asked for the node's claims, not every claim.
	rec := &listRecorder{Reader: indexed}
	a := &ClaimAllocations{Cached: rec, Live: plain, Driver: testDriver, Pool: "n1", Indexed: true}
	if _, err := a.AllocatedDevices(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	want := client.MatchingFields{AllocatedPoolIndex: "mig.miglayout.io/n1"}
	if len(rec.opts) != 1 || !reflect.DeepEqual(rec.opts[0], want) {
		t.Errorf("cached list options %v, want %v", rec.opts, want)
	}
}

// listRecorder records the options of the last List.
type listRecorder struct {
	client.Reader
	opts []client.ListOption
}

func (r *listRecorder) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.opts = opts
	return r.Reader.List(ctx, list, opts...)
}
