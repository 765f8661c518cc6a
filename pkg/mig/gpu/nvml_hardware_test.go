package gpu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
)

// TestRealNVML runs on a machine with an NVIDIA GPU when
// gputest.HardwareEnv (MIGLAYOUT_NVML_HARDWARE) is 1 (skipped otherwise). It changes nothing: it
// probes every GPU (probe: reads, and GPU-instance creates only where MIG
// mode is off, which NVML refuses), compares each answer with the
// simulator's for the same model and MIG mode, and lists the GPUs with the
// agent's own inventory code (NVMLManager.GPUs), which must find each GPU's
// catalog model with the catalog's total memory and profile table (where
// NVML gives the table: with MIG mode on, or off on driver 580). With
// MIGLAYOUT_NVML_TRACE_DIR set, each trace is written there as
// <model>-<driver>-mig-<on|off>.json for testdata/nvml-traces;
// MIGLAYOUT_NVML_TRACE_NOTE is added to its "recorded" line (the machine's
// runtime, say). NVIDIA_DRIVER_ROOT is the agent's --nvidia-driver-root
// (empty: the library search path). With MIGLAYOUT_NVML_HOLDER_PID set to
// the PID of a process holding memory on every GPU (a CUDA program),
// GPUProcesses, which the agent reads before it changes MIG mode or
// destroys a device, must list it with its memory.
func TestRealNVML(t *testing.T) {
	root := gputest.Hardware(t)
	var opts []nvml.LibraryOption
	if root != "" {
		path, err := gpu.FindNVMLLibrary(root)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, nvml.WithLibraryPath(path))
	}
	lib := nvml.New(opts...)
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatalf("initialising NVML: %s", returnName(ret))
	}
	defer lib.Shutdown()
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		t.Fatalf("counting GPUs: %s", returnName(ret))
	}
	cat := mig.DefaultCatalog()
	for i := 0; i < count; i++ {
		rec, err := probe(lib, cat, i)
		if err != nil {
			t.Fatal(err)
		}
		if note := os.Getenv("MIGLAYOUT_NVML_TRACE_NOTE"); note != "" {
			rec.Recorded += ", " + note
		}
		t.Logf("GPU %d: %s, MIG mode current %t pending %t, %d calls", i, rec.Product, rec.MIGCurrent, rec.MIGPending, len(rec.Calls))
		// The trace is kept without the board's identity.
		kept := rec
		kept.Calls = slices.Clone(rec.Calls)
		for j, c := range kept.Calls {
			if c.Call == "GetUUID" || c.Call == "GetPciInfo" {
				kept.Calls[j].Value = ""
			}
		}
		b, err := json.MarshalIndent(kept, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		model, err := cat.Model(rec.Product)
		if err != nil {
			t.Errorf("GPU %d: %v", i, err)
			continue
		}
		if dir := os.Getenv("MIGLAYOUT_NVML_TRACE_DIR"); dir != "" {
			mode := "off"
			if rec.MIGCurrent {
				mode = "on"
			}
			driver, _ := lib.SystemGetDriverVersion()
			name := fmt.Sprintf("%s-%s-mig-%s.json", model.Name, strings.ReplaceAll(driver, " ", "_"), mode)
			if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if rec.MIGCurrent != rec.MIGPending {
			t.Logf("GPU %d: a MIG mode change is pending; not compared with the simulator", i)
			continue
		}
		if d := diffTraces(rec, simulatedTrace(t, rec)); d != "" {
			t.Errorf("GPU %d: the simulator answers otherwise than NVML (-NVML +simulated):\n%s", i, d)
		}
	}

	m, err := gpu.OpenAt(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	gpus, err := m.GPUs(context.Background())
	if err != nil {
		t.Fatalf("listing GPUs: %v", err)
	}
	for _, g := range gpus {
		t.Logf("GPU %d: %s %s, %d MiB, MIG capable %t, MIG mode %+v, PCI %s, brand %s, %s, CUDA %s, driver %s (CUDA %s), minor %d, catalog mismatches %v",
			g.Index, g.ProductName, g.UUID, g.MemoryMiB, g.MIGCapable, g.MIGMode, g.PCIBusID, g.Brand, g.Architecture,
			g.CUDAComputeCapability, g.DriverVersion, g.CUDADriverVersion, g.Minor, g.CatalogMismatches)
		if g.Model == nil {
			t.Errorf("GPU %d (%s): no catalog model", g.Index, g.ProductName)
			continue
		}
		if g.MemoryMiB != g.Model.MemoryMiB {
			t.Errorf("GPU %d (%s): NVML's total memory is %d MiB, catalog model %s's %d MiB", g.Index, g.ProductName, g.MemoryMiB, g.Model.Name, g.Model.MemoryMiB)
		}
		if len(g.CatalogMismatches) > 0 || len(g.ProfileValues) > 0 {
			t.Errorf("GPU %d (%s): NVML's profile table differs from catalog model %s's: %q, NVML's values %+v", g.Index, g.ProductName, g.Model.Name, g.CatalogMismatches, g.ProfileValues)
		}
		if pid := os.Getenv("MIGLAYOUT_NVML_HOLDER_PID"); pid != "" {
			procs, err := m.GPUProcesses(context.Background(), g.Index)
			if err != nil {
				t.Errorf("GPU %d: %v", g.Index, err)
			}
			found := slices.ContainsFunc(procs, func(p gpu.Process) bool { return fmt.Sprint(p.PID) == pid && p.UsedMemoryMiB != 0 })
			if !found {
				t.Errorf("GPU %d: processes %+v, want the one holding it, PID %s, with its memory", g.Index, procs, pid)
			}
			t.Logf("GPU %d: processes %+v", g.Index, procs)
		}
		if !g.MIGCapable {
			t.Errorf("GPU %d (%s): not MIG capable by NVML, though the catalog lists its profiles", g.Index, g.ProductName)
		}
	}
}
