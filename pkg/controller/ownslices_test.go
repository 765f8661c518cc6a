package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// asCached lists ResourceSlices as the controller's cache holds them
// (TrimResourceSlices).
func asCached(driver string) interceptor.Funcs {
	trim := TrimResourceSlices(driver, nil)
	return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if l, ok := list.(*resourceapi.ResourceSliceList); ok {
			for i := range l.Items {
				if _, err := trim(&l.Items[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}}
}

// TestAutoPlansBesideWholeGPUFromTheCache is TestAutoPlansBesideWholeGPU
// with ResourceSlices read as the controller's cache holds them: the whole
// gpu-1 of miglayout's own slice is there (the cache once held other
// drivers' slices only, and a pod asking for a MIG device and a whole GPU
// was told nothing could serve it), the A100's MIG devices are not.
func TestAutoPlansBesideWholeGPUFromTheCache(t *testing.T) {
	for name, held := range map[string]bool{"gpu-1 free": false, "gpu-1 held": true} {
		t.Run(name, func(t *testing.T) {
			ml, slice, objs, wholeClaim := wholeGPUFixture()
			slice.Spec.Devices[0].Attributes[migslices.AttrProductName] = resourceapi.DeviceAttribute{StringValue: ptr.To("NVIDIA A100-SXM4-80GB")}
			if held {
				objs = append(objs, heldWholeGPU(wholeClaim))
			}
			h := newAutoClusterIntercepted(t, ml, asCached(migClassName), objs...)
			h.settle()
			if changed := strings.Contains(h.specOf("n1")[0], "3g.40gb"); changed == held {
				t.Errorf("n1/gpu-0 desired %q with gpu-1 held %t: want a 3g.40gb device made only while gpu-1 is free", h.specOf("n1")[0], held)
			}
		})
	}
}

// TestTrimResourceSlices: of the driver's own slices the cache keeps whole
// GPUs and the MIG devices of models the catalog lacks (which the planner
// does not plan, and reads from the slice); other drivers' slices whole.
func TestTrimResourceSlices(t *testing.T) {
	named := func(name, product string) resourceapi.Device {
		d := resourceapi.Device{Name: name}
		if product != "" {
			d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{migslices.AttrProductName: {StringValue: ptr.To(product)}}
		}
		return d
	}
	for name, tc := range map[string]struct {
		driver  string
		devices []resourceapi.Device
		want    []string
	}{
		"own: catalogued MIG devices dropped": {driver: migClassName,
			devices: []resourceapi.Device{named("gpu-0-mig-3g40gb-0-0", "NVIDIA A100-SXM4-80GB"), named("gpu-1", "NVIDIA A100-SXM4-80GB"), named("gpu-2-mig-1g10gb-0-0", "NVIDIA H100 80GB HBM3")},
			want:    []string{"gpu-1"}},
		"own: MIG devices of a model the catalog lacks kept": {driver: migClassName,
			devices: []resourceapi.Device{named("gpu-0-mig-1g12gb-0-0", "NVIDIA Future GPU"), named("gpu-1-mig-1g12gb-0-0", "")},
			want:    []string{"gpu-0-mig-1g12gb-0-0", "gpu-1-mig-1g12gb-0-0"}},
		"another driver's slice whole": {driver: "nic.example.com",
			devices: []resourceapi.Device{named("gpu-0-mig-3g40gb-0-0", "NVIDIA A100-SXM4-80GB"), named("nic-0", "")},
			want:    []string{"gpu-0-mig-3g40gb-0-0", "nic-0"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "agent"}}},
				Spec: resourceapi.ResourceSliceSpec{Driver: tc.driver, NodeName: ptr.To("n1"), Devices: tc.devices}}
			out, err := TrimResourceSlices(migClassName, nil)(s)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*resourceapi.ResourceSlice)
			var names []string
			for _, d := range got.Spec.Devices {
				names = append(names, d.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("devices kept (-want +got):\n%s", diff)
			}
			if got.ManagedFields != nil {
				t.Errorf("managed fields kept: %v", got.ManagedFields)
			}
		})
	}
}
