package gpu

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestWatchXidsRescan: a GPU left out of the watch (lost when it began) is
// registered once it is back, and its Xids are delivered.
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
	w, err := m.newXidWatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w.registered[1] {
		t.Fatal("lost GPU 1 registered")
	}
	if err := sim.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	got := make(chan Xid, 16)
	go func() { _ = m.WatchXids(t.Context(), func(x Xid) { got <- x }) }()
	deadline := time.After(10 * time.Second)
	for {
		if err := sim.InjectXid(1, 48, -1, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case x := <-got:
			if x.GPUIndex != 1 || x.Code != 48 {
				t.Fatalf("delivered %+v, want Xid 48 on GPU 1", x)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no Xid of GPU 1 within 10s of its recovery")
		}
	}
}
