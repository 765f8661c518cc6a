package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// migListing is a GPU manager whose MIG devices are the ones given.
type migListing struct {
	gpu.Manager
	devs []gpu.MIGDevice
}

func (l *migListing) MIGDevices(context.Context, int) ([]gpu.MIGDevice, error) {
	return l.devs, nil
}

// TestSimulatedCapabilitiesSkipAGPUInstanceWithoutComputeInstance: a GPU
// instance left without its compute instance (a crash between the two
// creates) is listed, but gets no capability files: no container can be
// given it, so the kubelet plugin has nothing to read them for.
func TestSimulatedCapabilitiesSkipAGPUInstanceWithoutComputeInstance(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	hostRoot := t.TempDir()
	sim := openSimulated(t, ctx, options{nodeName: "n1", stateDir: t.TempDir(), hostRoot: hostRoot})
	halfMade := gpu.MIGDevice{GPUIndex: 0, Profile: "3g.40gb", GIID: 2, CIID: -1}
	caps := &simulatedCapabilities{Manager: &migListing{Manager: sim.(*simulatedCapabilities).Manager, devs: []gpu.MIGDevice{halfMade}}, hostRoot: hostRoot}
	devs, err := caps.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].GIID != 2 || devs[0].CIID != -1 {
		t.Errorf("MIG devices of GPU 0: %v, want the GPU instance without compute instance", devs)
	}
	if _, err := os.Stat(filepath.Join(hostRoot, "proc")); !os.IsNotExist(err) {
		t.Errorf("capability files written for a GPU instance without compute instance (%v)", err)
	}
}
