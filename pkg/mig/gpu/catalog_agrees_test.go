package gpu_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestCatalogAgreesWithSimulatedNVML: the planner and the agent judge a
// layout with mig.Model.Validate, and NVML judges each GPU instance as it
// is created. Where the two disagree, a planned layout fails half applied
// (Validate accepts what NVML refuses) or a layout NVML would take is never
// planned. For every catalogued model, every maximal layout is created in
// Diff's order through the manager, and a seeded random walk of creates
// (at valid and invalid starts) and destroys checks that each create
// succeeds exactly where Validate accepts the layout with the new device,
// and that a refused create leaves the GPU as it was. The simulator places
// instances by the same catalog data (placements, counts, engines), so this
// finds where the two judge the data differently, never a wrong figure in
// the data itself: TestCatalogModels and the published profile listings
// (TestProfileInfoMatchesPublishedLGIP) pin those.
func TestCatalogAgreesWithSimulatedNVML(t *testing.T) {
	gputest.EveryModel(t, func(t *testing.T, model *mig.Model, sim *nvmlsim.Sim, m *gpu.NVMLManager) {
		ctx := t.Context()
		enableMIG(t, ctx, sim, m, 0)

		for _, l := range model.MaximalLayouts() {
			for _, d := range model.Diff(nil, l).Create {
				if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
					t.Fatalf("maximal layout %s: %v", l, err)
				}
			}
			if got := heldLayout(t, ctx, m); !got.Equal(l) {
				t.Fatalf("maximal layout %s: GPU holds %s", l, got)
			}
			clear0(t, ctx, m, l)
		}

		rng := rand.New(rand.NewPCG(uint64(len(model.Profiles)), 7))
		var cur mig.Layout
		accepted, refused := 0, 0
		for step := range 2000 {
			if len(cur) > 0 && rng.IntN(4) == 0 {
				i := rng.IntN(len(cur))
				if err := m.DestroyMIGDevice(ctx, 0, cur[i]); err != nil {
					t.Fatalf("step %d: destroying %s of %s: %v", step, cur[i], cur, err)
				}
				cur = append(cur[:i:i], cur[i+1:]...)
				continue
			}
			p := model.Profiles[rng.IntN(len(model.Profiles))]
			start := rng.IntN(model.MemorySlices)
			if rng.IntN(3) > 0 {
				start = p.Placements[rng.IntN(len(p.Placements))].Start
			}
			d := mig.Device{Profile: p.Name, Start: start}
			want := model.Validate(append(cur[:len(cur):len(cur)], d))
			_, err := m.CreateMIGDevice(ctx, 0, d)
			switch {
			case want == nil && err != nil:
				t.Fatalf("step %d: Validate accepts %s beside %s, NVML refuses it: %v", step, d, cur, err)
			case want != nil && err == nil:
				t.Fatalf("step %d: NVML creates %s beside %s, Validate refuses it: %v", step, d, cur, want)
			case err != nil && !errors.Is(err, gpu.ErrInsufficientResources):
				t.Fatalf("step %d: refusing %s beside %s: got %v, want an error wrapping ErrInsufficientResources", step, d, cur, err)
			case err == nil:
				cur = append(cur, d)
				accepted++
			default:
				refused++
			}
			if got := heldLayout(t, ctx, m); !got.Equal(cur) {
				t.Fatalf("step %d: after creating %s (err %v) the GPU holds %s, want %s", step, d, err, got, cur)
			}
		}
		// A walk that never (or always) creates compares nothing.
		if accepted < 200 || refused < 200 {
			t.Fatalf("the walk created %d devices and was refused %d times; want at least 200 of each", accepted, refused)
		}
	})
}

// heldLayout is the layout of GPU 0's MIG devices as the manager lists them.
func heldLayout(t *testing.T, ctx context.Context, m *gpu.NVMLManager) mig.Layout {
	t.Helper()
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var l mig.Layout
	for _, d := range devs {
		l = append(l, mig.Device{Profile: d.Profile, Start: d.Placement.Start})
	}
	return l
}

// clear0 destroys the devices of l on GPU 0.
func clear0(t *testing.T, ctx context.Context, m *gpu.NVMLManager, l mig.Layout) {
	t.Helper()
	for _, d := range l {
		if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
			t.Fatalf("destroying %s of %s: %v", d, l, err)
		}
	}
}
