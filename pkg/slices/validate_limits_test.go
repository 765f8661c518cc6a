package slices

import (
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
)

// validDevice is a whole planned GPU, valid as it is.
func validDevice(t *testing.T) resourceapi.Device {
	t.Helper()
	d := GPUDevice(PlannedGPU(mig.DefaultCatalog().Models()[0], 0))
	if err := ValidateDevice(d); err != nil {
		t.Fatalf("base device invalid: %v", err)
	}
	return d
}

// Values at the API's limits are accepted: a driver name of 63 characters,
// a version of 64, 16 taints, a domain of 63 characters and an identifier
// of 32; and every taint effect the API knows.
func TestValidateAcceptsTheLimits(t *testing.T) {
	name := strings.Repeat("a", resourceapi.DriverNameMaxLength)
	if err := ValidateDriverName(name); err != nil {
		t.Errorf("ValidateDriverName(%d characters) = %v, want nil", len(name), err)
	}
	tests := map[string]func(*resourceapi.Device){
		"version of 64 characters": func(d *resourceapi.Device) {
			d.Attributes["v"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("1.2.3+" + strings.Repeat("a", resourceapi.DeviceAttributeMaxValueLength-6))}
		},
		"16 taints": func(d *resourceapi.Device) {
			for range resourceapi.DeviceTaintsMaxLength {
				d.Taints = append(d.Taints, DrainTaint())
			}
		},
		"domain of 63 characters": func(d *resourceapi.Device) {
			d.Attributes[resourceapi.QualifiedName(strings.Repeat("a", resourceapi.DeviceMaxDomainLength)+"/x")] = integer(1)
		},
		"identifier of 32 characters": func(d *resourceapi.Device) {
			d.Attributes[resourceapi.QualifiedName(strings.Repeat("a", resourceapi.DeviceMaxIDLength))] = integer(1)
		},
		"qualified capacity name": func(d *resourceapi.Device) {
			d.Capacity["example.com/slots"] = count(1)
		},
		"NoExecute taint": func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoExecute}}
		},
		"None taint": func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "example.com/note", Effect: resourceapi.DeviceTaintEffectNone}}
		},
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			d := validDevice(t)
			mutate(&d)
			if err := ValidateDevice(d); err != nil {
				t.Errorf("ValidateDevice = %v, want nil", err)
			}
		})
	}
}

// Capacity names and taint keys are checked as attribute names are, taint
// values as label values (the API server's rule), and every problem of a
// device is an ErrInvalid.
func TestValidateDeviceRejectsCapacityNamesAndTaintKeys(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.Device)
		want   string
	}{
		"capacity name not a C identifier": {func(d *resourceapi.Device) {
			d.Capacity["copy-engines"] = resourceapi.DeviceCapacity{Value: resource.MustParse("1")}
		}, `capacity "copy-engines"`},
		"taint key not a qualified name": {func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "miglayout.io/draining now", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}, `taint key "miglayout.io/draining now"`},
		"taint value not a label value": {func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "miglayout.io/xid", Value: "48 (GPU fell off the bus)", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}, `taint "miglayout.io/xid": value "48 (GPU fell off the bus)"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := validDevice(t)
			tc.mutate(&d)
			err := ValidateDevice(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidateDevice = %v, want an error containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ValidateDevice = %v, want an error wrapping ErrInvalid", err)
			}
		})
	}
}

// A pool whose name is no node name (not a DNS subdomain) is refused, with
// an ErrInvalid naming the pool.
func TestValidatePoolRejectsBadPoolName(t *testing.T) {
	pool := resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: fakeDevices(1, 0)}}}
	if err := ValidatePool("node-a", pool); err != nil {
		t.Fatalf("ValidatePool(node-a) = %v, want nil", err)
	}
	err := ValidatePool("Node_A", pool)
	if err == nil || !strings.Contains(err.Error(), `pool "Node_A"`) {
		t.Fatalf("ValidatePool(Node_A) = %v, want an error naming the pool", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("ValidatePool(Node_A) = %v, want an error wrapping ErrInvalid", err)
	}
}
