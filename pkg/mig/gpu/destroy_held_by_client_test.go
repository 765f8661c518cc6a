package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestDestroyHeldByAnotherClient: a destroy NVML refuses as in use while no
// compute process runs on the device says that another NVML client (a
// monitoring agent) holds it, names no process, and still wraps ErrInUse;
// once the client lets go the device is destroyed. Both a client of the
// MIG device (its compute instance's destroy refused) and one of the GPU
// instance alone (the GPU instance's destroy refused) are told so.
func TestDestroyHeldByAnotherClient(t *testing.T) {
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	for name, open := range map[string]func(sim *nvmlsim.Sim, md gpu.MIGDevice) (uint64, error){
		"MIG device":   func(sim *nvmlsim.Sim, md gpu.MIGDevice) (uint64, error) { return sim.OpenClient(md.UUID) },
		"GPU instance": func(sim *nvmlsim.Sim, md gpu.MIGDevice) (uint64, error) { return sim.OpenGPUInstanceClient(0, md.GIID) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			sim, m, md := h100With(t, d)
			id, err := open(sim, md)
			if err != nil {
				t.Fatal(err)
			}
			err = m.DestroyMIGDevice(ctx, 0, d)
			if !errors.Is(err, gpu.ErrInUse) {
				t.Fatalf("DestroyMIGDevice while a client holds the device = %v; want an error wrapping ErrInUse", err)
			}
			if !strings.Contains(err.Error(), "no compute process is listed on it, so another NVML client holds it") {
				t.Errorf("error %q does not say another NVML client holds the device", err)
			}
			if strings.Contains(err.Error(), "process(es)") || strings.Contains(err.Error(), "PIDs") {
				t.Errorf("error %q names processes; want none named, as none runs", err)
			}
			if got := simLayout(sim, 0).String(); got != "3g.40gb@4" {
				t.Errorf("simulator layout after the refused destroy = %q, want 3g.40gb@4", got)
			}
			// Whichever destroy the client refused, the device is left
			// with its compute instance: usable, and published.
			devs, err := m.MIGDevices(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != 1 || devs[0].CIID < 0 || devs[0].UUID == "" {
				t.Errorf("MIG devices after the refused destroy = %+v, want %s with a compute instance", devs, d)
			}
			if err := sim.CloseClient(id); err != nil {
				t.Fatal(err)
			}
			if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
				t.Fatalf("DestroyMIGDevice once the client let go: %v", err)
			}
			if got := simLayout(sim, 0); len(got) != 0 {
				t.Errorf("simulator layout %s, want the device destroyed", got)
			}
		})
	}
}
