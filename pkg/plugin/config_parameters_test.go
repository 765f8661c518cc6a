package plugin

import (
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareRefusesParametersThatAreNotAnObject: opaque parameters for
// this driver that are JSON but not an object (a list, a string, a number)
// set something the driver cannot honour: the prepare fails with
// ErrUnsupportedConfig, and its error names where the configuration came
// from (the claim or its DeviceClass), so the user knows what to edit.
func TestPrepareRefusesParametersThatAreNotAnObject(t *testing.T) {
	tests := map[string]struct {
		params string
		source resourceapi.AllocationConfigSource
		want   string
	}{
		"a list from the claim":         {`["TimeSlicing"]`, resourceapi.AllocationConfigSourceClaim, "from the claim"},
		"a string from the DeviceClass": {`"TimeSlicing"`, resourceapi.AllocationConfigSourceClass, "from the DeviceClass"},
		"a number from the claim":       {`4`, resourceapi.AllocationConfigSourceClaim, "from the claim"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin("")
			c := claim(uid1, "cfg", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})
			c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
				Source: tc.source,
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver: slices.DefaultDriverName, Parameters: runtime.RawExtension{Raw: []byte(tc.params)}}},
			}}
			r := e.prepare(p, c)
			if !errors.Is(r.Err, ErrUnsupportedConfig) {
				t.Fatalf("prepare: %v; want %v", r.Err, ErrUnsupportedConfig)
			}
			if !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("prepare: %v; want it to say %q", r.Err, tc.want)
			}
			if got := p.PreparedDevices(); len(got) != 0 {
				t.Errorf("devices prepared for a refused claim: %v", got)
			}
		})
	}
}
