package slices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestPublishedOrderKeepsToNVMLPlacements: on a GPU whose NVML offers
// other placements than the catalog, numbers a profile otherwise or
// describes it with other engines, the
// agent publishes its free MIG devices in the order the Auto planner
// orders them on the model it plans the GPU on (the placements NVML
// offers), so kube-scheduler gives a claim the device the plan meant.
func TestPublishedOrderKeepsToNVMLPlacements(t *testing.T) {
	model := func(name string) *mig.Model {
		m, err := mig.DefaultCatalog().Model(name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a100, h100 := model("A100-SXM4-80GB"), model("H100-SXM5-80GB")
	// NVML describes the H100's 2g.20gb with an OFA engine.
	ofa := func() []mig.NVMLProfileValues {
		p, err := h100.Profile("2g.20gb")
		if err != nil {
			t.Fatal(err)
		}
		v := p.NVMLValues()
		v.OFA = 1
		return []mig.NVMLProfileValues{v}
	}()
	ones := []mig.Device{{Profile: "1g.10gb", Start: 4}, {Profile: "1g.10gb", Start: 6}}
	tests := map[string]struct {
		// model is the GPU's; the A100-SXM4-80GB where nil.
		model      *mig.Model
		values     []mig.NVMLProfileValues
		placements map[string][]mig.Placement
		profileIDs map[string]int
		// planned are the placements the controller reads from the
		// status (those as wide as the catalog's); placements where nil.
		planned map[string][]mig.Placement
		devices []mig.Device
		// want is the publication order, by placement start.
		want []int
	}{
		"as the catalog": {devices: ones, want: []int{6, 4}},
		"NVML lacks 2g.20gb at 4": {
			placements: map[string][]mig.Placement{"2g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 2}}},
			devices:    ones, want: []int{4, 6}},
		"NVML numbers 2g.20gb otherwise": {profileIDs: map[string]int{"2g.20gb": 30}, devices: ones, want: []int{4, 6}},
		"NVML's placements of another width are no placements": {
			placements: map[string][]mig.Placement{"2g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 3}}},
			planned:    map[string][]mig.Placement{"2g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 2}}},
			devices:    ones, want: []int{4, 6}},
		"H100 as the catalog": {model: h100,
			devices: []mig.Device{{Profile: "1g.10gb", Start: 4}, {Profile: "1g.10gb+me", Start: 6}}, want: []int{6, 4}},
		"H100 whose NVML gives 2g.20gb an OFA engine": {model: h100, values: ofa,
			devices: []mig.Device{{Profile: "1g.10gb", Start: 4}, {Profile: "1g.10gb+me", Start: 6}}, want: []int{4, 6}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.model
			if m == nil {
				m = a100
			}
			g := gpu.GPU{Index: 0, UUID: "GPU-0", ProductName: m.ProductName, Model: m, MemoryMiB: m.MemoryMiB,
				MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: true},
				ProfileValues: tc.values, NVMLPlacements: tc.placements, NVMLProfileIDs: tc.profileIDs}
			var migs []gpu.MIGDevice
			for i, d := range tc.devices {
				md, err := PlannedMIG(g, d)
				if err != nil {
					t.Fatal(err)
				}
				md.GIID, md.CIID, md.UUID = i+1, 0, "MIG-"+d.String()
				migs = append(migs, md)
			}
			inv := Inventory{GPUs: []gpu.GPU{g}, MIGs: map[int][]gpu.MIGDevice{0: migs}}
			published := starts(inv.Devices(nil))
			if diff := cmp.Diff(tc.want, published); diff != "" {
				t.Errorf("publication order (-want +got):\n%s", diff)
			}

			// The planner's order: its hypothetical devices on the
			// variant the controller builds (WithNVMLPlacements), sorted
			// by that variant's room lost.
			read := tc.planned
			if read == nil {
				read = tc.placements
			}
			var refused []string
			for name := range tc.profileIDs {
				refused = append(refused, name)
			}
			variant, err := m.WithNVMLValues(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if variant, err = variant.WithNVMLPlacements(read, refused); err != nil {
				t.Fatal(err)
			}
			pg := PlannedGPU(variant, 0)
			pg.UUID = g.UUID
			var planned []resourceapi.Device
			roomLost := map[string][]int{}
			for _, d := range tc.devices {
				dev, err := PlannedMIGDevice(pg, d)
				if err != nil {
					t.Fatal(err)
				}
				planned = append(planned, dev)
				roomLost[dev.Name] = variant.RoomLost(d)
			}
			SortDevices(planned, roomLost)
			if diff := cmp.Diff(starts(planned), published); diff != "" {
				t.Errorf("publication order against the planner's (-planner +published):\n%s", diff)
			}
		})
	}
}

// starts are the placement starts of devices, in order.
func starts(devices []resourceapi.Device) []int {
	var out []int
	for _, d := range devices {
		out = append(out, int(intAttr(d, AttrPlacementStart)))
	}
	return out
}
