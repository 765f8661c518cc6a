package gpu

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestWatchXidsRescan: a GPU left out of a running watch (lost when it
// began) is registered once it is back, and its Xids are delivered.
func TestWatchXidsRescan(t *testing.T) {
	defer func(d time.Duration) { xidRescan = d }(xidRescan)
	xidRescan = 0
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewNVML(sim, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	if err := sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	got := make(chan Xid, 64)
	go func() { _ = m.WatchXids(t.Context(), nil, func(x Xid) { got <- x }) }()
	// until delivers Xid code on GPU idx again and again until it comes.
	until := func(idx int, code uint64) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			if err := sim.InjectXid(idx, code, -1, -1); err != nil {
				t.Fatal(err)
			}
			select {
			case x := <-got:
				if x.GPUIndex == idx && x.Code == code {
					return
				}
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("no Xid %d of GPU %d within 10s", code, idx)
			}
		}
	}
	until(0, 48) // the watch runs, GPU 1 left out
	if err := sim.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	until(1, 94)
}
