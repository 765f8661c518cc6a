package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// simulatedRunOptions are the options of an agent on a simulated node that
// passes flag validation, with its state under the test's directories.
func simulatedRunOptions(t *testing.T) options {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	return options{nodeName: "n1", driverName: "mig.miglayout.io", simulate: "1xA100-SXM4-80GB", stateDir: filepath.Join(t.TempDir(), "state"),
		hostRoot: t.TempDir(), settle: 5 * time.Second, resync: time.Minute, maxPass: 10 * time.Minute, leaseDuration: 40 * time.Second,
		metricsAddr: ":8081", healthAddr: ":8082"}
}

// TestRunOnASimulatedNodeMakesNoMIGManagementNodes: a simulated node never
// makes the /dev/nvidia-caps nodes of the MIG config and monitor
// capabilities, even with --dev-root given and a host whose driver lists
// them: its GPUs are not the host's.
func TestRunOnASimulatedNodeMakesNoMIGManagementNodes(t *testing.T) {
	o := simulatedRunOptions(t)
	o.devRoot = t.TempDir()
	caps := filepath.Join(o.hostRoot, "proc/driver/nvidia/capabilities/mig")
	if err := os.MkdirAll(caps, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, minor := range map[string]string{"config": "1", "monitor": "2"} {
		if err := os.WriteFile(filepath.Join(caps, name), []byte("DeviceFileMinor: "+minor+"\nDeviceFileMode: 256\nDeviceFileModify: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(o.hostRoot, "proc/devices"), []byte("Character devices:\n195 nvidia\n508 nvidia-caps\n\nBlock devices:\n8 sd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "loading kubeconfig") {
		t.Fatalf("run: %v, want the flags accepted and the kubeconfig's error", err)
	}
	if _, err := os.Stat(filepath.Join(o.devRoot, "nvidia-caps")); !os.IsNotExist(err) {
		t.Errorf("a simulated node made %s (%v)", filepath.Join(o.devRoot, "nvidia-caps"), err)
	}
}

// TestRunFailsWhenTheStateDirectoryCannotBeMade: an agent whose state
// directory cannot be made (a file in the way) stops there, with the
// directory's error, before opening the GPUs.
func TestRunFailsWhenTheStateDirectoryCannotBeMade(t *testing.T) {
	o := simulatedRunOptions(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o.stateDir = filepath.Join(file, "state")
	if err := run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "creating the state directory") {
		t.Errorf("run: %v, want the state directory's error", err)
	}
}

// TestRunFailsOnASimulatorSpecItCannotBuild: --simulate naming hardware the
// simulator does not know fails the agent with the simulator's error, after
// the state lock was taken and before the kubeconfig is read.
func TestRunFailsOnASimulatorSpecItCannotBuild(t *testing.T) {
	o := simulatedRunOptions(t)
	o.simulate = "2xNoSuchGPU"
	if err := run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "starting NVML simulator") {
		t.Errorf("run: %v, want the simulator's error", err)
	}
}
