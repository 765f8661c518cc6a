package controller

import (
	resourceapi "k8s.io/api/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TrimResourceSlices is the controller cache's transform of ResourceSlices
// (catalog nil: mig.DefaultCatalog()). The Auto planner reads other
// drivers' slices whole (a NIC beside a MIG device) and of driver's own
// only the devices it does not plan (unplannedDevices): whole GPUs (MIG
// mode off, or a change of it pending) and MIG devices of a model the
// catalog lacks. The MIG devices of catalogued models, most of a MIG node's
// slice, are dropped: the planner builds those GPUs' devices from the
// NodeMigLayout status. Managed fields are dropped from every slice.
func TrimResourceSlices(driver string, catalog *mig.Catalog) toolscache.TransformFunc {
	if catalog == nil {
		catalog = mig.DefaultCatalog()
	}
	return func(obj any) (any, error) {
		s, ok := obj.(*resourceapi.ResourceSlice)
		if !ok {
			return obj, nil
		}
		s.ManagedFields = nil
		if s.Spec.Driver != driver {
			return s, nil
		}
		var kept []resourceapi.Device // a new array: the dropped devices' room goes too
		for _, d := range s.Spec.Devices {
			if _, isMIG, ok := migslices.DeviceGPUIndex(d.Name); ok && isMIG && catalogued(catalog, d) {
				continue
			}
			kept = append(kept, d)
		}
		if len(kept) < len(s.Spec.Devices) {
			s.Spec.Devices = kept
		}
		return s, nil
	}
}

// catalogued reports whether the catalog knows the model of device d by its
// productName attribute.
func catalogued(catalog *mig.Catalog, d resourceapi.Device) bool {
	attr, ok := d.Attributes[migslices.AttrProductName]
	if !ok || attr.StringValue == nil {
		return false
	}
	_, err := catalog.Model(*attr.StringValue)
	return err == nil
}
