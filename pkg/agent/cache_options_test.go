package agent

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestCacheOptionsOfTheNode: the agent's cache holds only the node's own
// NodeMigLayout and its own ResourceSlices of the driver, reduces the ResourceClaims allocated on other nodes to
// their identity, and strips managed fields from every object.
func TestCacheOptionsOfTheNode(t *testing.T) {
	opts := CacheOptions("n1", testDriver)
	var sawNML, sawClaims, sawSlices bool
	for obj, by := range opts.ByObject {
		switch obj.(type) {
		case *v1alpha1.NodeMigLayout:
			sawNML = true
			if by.Field == nil || by.Field.String() != "metadata.name=n1" {
				t.Errorf("NodeMigLayout field selector %v, want metadata.name=n1", by.Field)
			}
		case *resourceapi.ResourceSlice:
			sawSlices = true
			if by.Field == nil {
				t.Fatal("ResourceSlices are cached cluster-wide")
			}
			for _, tc := range []struct {
				node, driver string
				want         bool
			}{{"n1", testDriver, true}, {"n2", testDriver, false}, {"n1", "gpu.example.com", false}} {
				set := fields.Set{"spec.nodeName": tc.node, "spec.driver": tc.driver}
				if got := by.Field.Matches(set); got != tc.want {
					t.Errorf("ResourceSlice field selector %v selects %v: %t, want %t", by.Field, set, got, tc.want)
				}
			}
		case *resourceapi.ResourceClaim:
			sawClaims = true
			if by.Transform == nil {
				t.Fatal("ResourceClaims are cached without a transform")
			}
			elsewhere := allocatedClaim("c").device(devA, false).obj()
			elsewhere.Status.Allocation.Devices.Results[0].Pool = "n2"
			got, err := by.Transform(elsewhere)
			if err != nil {
				t.Fatal(err)
			}
			if c := got.(*resourceapi.ResourceClaim); c.Status.Allocation != nil {
				t.Errorf("a claim allocated on node n2 cached with its allocation %+v, want its identity only", c.Status.Allocation)
			}
		}
	}
	if !sawNML || !sawClaims || !sawSlices {
		t.Errorf("cache options by object %v, want NodeMigLayouts, ResourceClaims and ResourceSlices", opts.ByObject)
	}
	if opts.DefaultTransform == nil {
		t.Fatal("no default transform: managed fields are cached")
	}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "miglayout-controller"}}}}
	got, err := opts.DefaultTransform(nml)
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.(*v1alpha1.NodeMigLayout).ManagedFields; len(mf) != 0 {
		t.Errorf("managed fields %+v kept by the default transform, want none", mf)
	}
}

// TestClaimTransformKeepsTheDeletionOfAClaimAllocatedElsewhere: a claim of
// no concern to the node, reduced to its identity, keeps its deletion
// timestamp with it.
func TestClaimTransformKeepsTheDeletionOfAClaimAllocatedElsewhere(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	elsewhere := allocatedClaim("c").device(devA, false).obj()
	elsewhere.Status.Allocation.Devices.Results[0].Pool = "n2"
	elsewhere.DeletionTimestamp = &deleted
	elsewhere.Finalizers = []string{"resource.kubernetes.io/delete-protection"}
	got, err := ClaimTransform(testDriver, "n1")(elsewhere.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	c := got.(*resourceapi.ResourceClaim)
	if c.Status.Allocation != nil {
		t.Fatalf("claim allocated on node n2 kept its allocation: %+v", c.Status.Allocation)
	}
	if c.DeletionTimestamp == nil || !c.DeletionTimestamp.Equal(&deleted) {
		t.Errorf("reduced claim's deletion timestamp %v, want %v", c.DeletionTimestamp, deleted)
	}
}
