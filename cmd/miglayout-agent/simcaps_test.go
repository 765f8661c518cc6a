package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/plugin"
)

// openSimulated is openGPUs of a simulated node, shut down when the test
// ends.
func openSimulated(t *testing.T, ctx context.Context, o options) gpu.Manager {
	t.Helper()
	o.simulate = "2xA100-SXM4-80GB"
	m, _, err := openGPUs(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// createMIG makes a MIG device of layout entry spec on GPU gpuIndex, MIG
// mode on.
func createMIG(t *testing.T, ctx context.Context, m gpu.Manager, gpuIndex int, spec string) gpu.MIGDevice {
	t.Helper()
	if _, err := m.SetMIGMode(ctx, gpuIndex, true); err != nil {
		t.Fatal(err)
	}
	d, err := m.CreateMIGDevice(ctx, gpuIndex, mig.MustParseLayout(spec)[0])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// capabilityMinor is the DeviceFileMinor of a capability access file under
// hostRoot: the GPU instance's (ciID -1) or the compute instance's.
func capabilityMinor(t *testing.T, hostRoot string, gpuMinor, giID, ciID int) string {
	t.Helper()
	dir := filepath.Join(hostRoot, "proc/driver/nvidia/capabilities", fmt.Sprintf("gpu%d", gpuMinor), "mig", fmt.Sprintf("gi%d", giID))
	if ciID >= 0 {
		dir = filepath.Join(dir, fmt.Sprintf("ci%d", ciID))
	}
	data, err := os.ReadFile(filepath.Join(dir, "access"))
	if err != nil {
		return err.Error()
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return first
}

// TestSimulatedNodeWritesCapabilityFiles: on a simulated node the listed
// MIG devices get the capability files the driver would have, under
// --host-root, which the kubelet plugin reads to prepare them.
func TestSimulatedNodeWritesCapabilityFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	hostRoot := t.TempDir()
	m := openSimulated(t, ctx, options{nodeName: "n1", stateDir: t.TempDir(), hostRoot: hostRoot})
	d := createMIG(t, ctx, m, 1, "3g.40gb@4")
	devs, err := m.MIGDevices(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].Device() != d.Device() {
		t.Fatalf("MIG devices of GPU 1: %v, want %v", devs, d.Device())
	}
	giMinor, ciMinor := plugin.MIGCapabilityMinors(1, d.GIID, d.CIID)
	for name, got := range map[string]string{
		"GPU instance":     capabilityMinor(t, hostRoot, 1, d.GIID, -1),
		"compute instance": capabilityMinor(t, hostRoot, 1, d.GIID, d.CIID),
	} {
		want := fmt.Sprintf("DeviceFileMinor: %d", ciMinor)
		if name == "GPU instance" {
			want = fmt.Sprintf("DeviceFileMinor: %d", giMinor)
		}
		if got != want {
			t.Errorf("%s capability: %q, want %q", name, got, want)
		}
	}
}

// TestSimulatedNodeKeepsItsState: the simulator's state file keeps the MIG
// devices across a restart of the agent, the GPUs' profile tables are kept
// in the state directory, and two simulated nodes have GPUs of distinct
// UUIDs.
func TestSimulatedNodeKeepsItsState(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	stateDir := t.TempDir()
	o := options{nodeName: "n1", stateDir: stateDir, hostRoot: t.TempDir(), simulatorState: filepath.Join(stateDir, "nvmlsim.json")}
	first := openSimulated(t, ctx, o)
	d := createMIG(t, ctx, first, 0, "1g.10gb@6")
	if err := first.Shutdown(); err != nil {
		t.Fatal(err)
	}
	again := openSimulated(t, ctx, o)
	devs, err := again.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, profileTablesFile)); err != nil {
		t.Errorf("profile tables not kept in the state directory: %v", err)
	}
	if len(devs) != 1 || devs[0].Device() != d.Device() {
		t.Errorf("after a restart, MIG devices of GPU 0: %v, want %v", devs, d.Device())
	}
	other := openSimulated(t, ctx, options{nodeName: "n2", stateDir: t.TempDir(), hostRoot: t.TempDir()})
	a, errA := again.GPUs(ctx)
	b, errB := other.GPUs(ctx)
	if err := errors.Join(errA, errB); err != nil {
		t.Fatal(err)
	}
	if a[0].UUID == b[0].UUID {
		t.Errorf("GPU 0 of nodes n1 and n2 share UUID %s", a[0].UUID)
	}
}

// gpuListing is a GPU manager whose GPU listing is given: gpus with err,
// counted in calls; migErr, if set, fails the listing of MIG devices.
type gpuListing struct {
	gpu.Manager
	gpus   func([]gpu.GPU) []gpu.GPU
	err    error
	migErr error
	calls  int
}

func (l *gpuListing) MIGDevices(ctx context.Context, gpuIndex int) ([]gpu.MIGDevice, error) {
	if l.migErr != nil {
		return nil, l.migErr
	}
	return l.Manager.MIGDevices(ctx, gpuIndex)
}

func (l *gpuListing) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	l.calls++
	gpus, err := l.Manager.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	if l.gpus != nil {
		gpus = l.gpus(gpus)
	}
	return gpus, l.err
}

// TestSimulatedCapabilitiesMinors: the capability files go under the GPU's
// device minor, read once per GPU; a GPU the listing cannot read, does not
// list, or a listing that fails as a whole fails the MIG device listing,
// as does the listing of the MIG devices itself.
func TestSimulatedCapabilitiesMinors(t *testing.T) {
	offset := func(gpus []gpu.GPU) []gpu.GPU {
		for i := range gpus {
			gpus[i].Minor += 10
		}
		return gpus
	}
	tests := map[string]struct {
		listing gpuListing
		err     error  // wrapped by the error, if set
		errText string // in the error, if set
	}{
		"minor other than index": {listing: gpuListing{gpus: offset}},
		"GPU unreadable": {listing: gpuListing{gpus: func(gpus []gpu.GPU) []gpu.GPU { return gpus[1:] },
			err: &gpu.UnreadableGPUsError{Errors: map[int]error{0: errors.New("fallen off the bus")}}}, errText: "fallen off the bus"},
		"another GPU unreadable": {listing: gpuListing{gpus: offset, err: &gpu.UnreadableGPUsError{Errors: map[int]error{1: errors.New("fallen off the bus")}}}},
		"GPU not listed":         {listing: gpuListing{gpus: func(gpus []gpu.GPU) []gpu.GPU { return gpus[1:] }}, err: gpu.ErrNotFound},
		"listing failed":         {listing: gpuListing{err: errors.New("driver version not readable")}, errText: "driver version not readable"},
		"MIG devices not listed": {listing: gpuListing{migErr: errors.New("NVML busy")}, errText: "NVML busy"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			hostRoot := t.TempDir()
			sim := openSimulated(t, ctx, options{nodeName: "n1", stateDir: t.TempDir(), hostRoot: hostRoot})
			d := createMIG(t, ctx, sim, 0, "7g.80gb@0")
			listing := tc.listing
			listing.Manager = sim.(*simulatedCapabilities).Manager
			caps := &simulatedCapabilities{Manager: &listing, hostRoot: hostRoot}
			for range 2 {
				_, err := caps.MIGDevices(ctx, 0)
				if tc.err == nil && tc.errText == "" {
					if err != nil {
						t.Fatalf("MIGDevices: %v", err)
					}
					continue
				}
				if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("MIGDevices: %v, want an error wrapping %v saying %q", err, tc.err, tc.errText)
				}
			}
			if tc.err != nil || tc.errText != "" {
				if _, err := os.Stat(filepath.Join(hostRoot, "proc")); !os.IsNotExist(err) {
					t.Errorf("capability files written although the listing failed (%v)", err)
				}
				return
			}
			if listing.calls != 1 {
				t.Errorf("GPUs listed %d times for two listings of GPU 0's MIG devices, want once", listing.calls)
			}
			_, ciMinor := plugin.MIGCapabilityMinors(10, d.GIID, d.CIID)
			if got, want := capabilityMinor(t, hostRoot, 10, d.GIID, d.CIID), fmt.Sprintf("DeviceFileMinor: %d", ciMinor); got != want {
				t.Errorf("capability of minor 10: %q, want %q", got, want)
			}
		})
	}
}

// TestSimulatedCapabilitiesNotWritten: MIG devices whose capability files
// cannot be written under --host-root (a file in the way) are not listed:
// the kubelet plugin could not prepare them.
func TestSimulatedCapabilitiesNotWritten(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	hostRoot := filepath.Join(t.TempDir(), "host")
	if err := os.WriteFile(hostRoot, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := openSimulated(t, ctx, options{nodeName: "n1", stateDir: t.TempDir(), hostRoot: hostRoot})
	createMIG(t, ctx, m, 0, "7g.80gb@0")
	if devs, err := m.MIGDevices(ctx, 0); err == nil || !strings.Contains(err.Error(), "writing simulated capabilities") {
		t.Errorf("MIGDevices: %v, %v; want the capabilities' error", devs, err)
	}
}
