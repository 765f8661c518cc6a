package gpu_test

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestSimulatorKeepsEnginesOfVariant: an H100 whose driver offers no
// 7g.80gb still has the GPU's seven NVJPG engines ("Supported MIG
// Profiles", H100 7g row), so seven 1g.10gb fit, as the variant model
// says. The simulator stores its models as JSON; before the engine totals
// were in it, the one read back took them from the largest profile left
// (4g.40gb: four NVJPG) and refused the fifth create.
func TestSimulatorKeepsEnginesOfVariant(t *testing.T) {
	ctx := t.Context()
	v, err := model(t, "H100-SXM5-80GB").WithNVMLPlacements(nil, []string{"7g.80gb"})
	if err != nil {
		t.Fatal(err)
	}
	seven := mig.MustParseLayout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")
	if err := v.Validate(seven); err != nil {
		t.Fatalf("the variant model refuses seven 1g.10gb: %v", err)
	}
	hardware, err := mig.DefaultCatalog().With(v)
	if err != nil {
		t.Fatal(err)
	}
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Catalog: hardware})
	enableMIG(t, ctx, sim, m, 0)
	for _, d := range seven {
		if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
			t.Errorf("creating %s: %v", d, err)
		}
	}
}
