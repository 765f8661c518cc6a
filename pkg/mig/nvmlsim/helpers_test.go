package nvmlsim

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
)

// testCatalog returns mig.DefaultCatalog, failing the test if it does not
// load.
func testCatalog(t *testing.T) *mig.Catalog {
	t.Helper()
	c, err := defaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tightYAML is a synthetic model on which each of a profile's MaxCount (2g:
// 2), the compute slices (7) and MaxInstances (4) binds alone, with memory
// slices free, which no real model shows.
const tightYAML = `
placementSets:
  all: &all [{start: 0, size: 1}, {start: 1, size: 1}, {start: 2, size: 1}, {start: 3, size: 1}, {start: 4, size: 1}, {start: 5, size: 1}, {start: 6, size: 1}, {start: 7, size: 1}]
models:
- name: SIM-TIGHT
  productName: NVIDIA Sim Tight
  architecture: Ampere
  cudaComputeCapability: "8.0"
  memoryMiB: 8192
  multiprocessors: 28
  memorySlices: 8
  computeSlices: 7
  maxInstances: 4
  migModeNeedsReset: true
  source: test
  profiles:
  - {name: 1g.1gb, id: 19, nvmlProfile: 0, computeSlices: 1, memorySlices: 1, memoryMiB: 1024, maxCount: 4, multiprocessors: 4, copyEngines: 1, decoders: 0, encoders: 0, jpegEngines: 0, ofaEngines: 0, placements: *all}
  - {name: 2g.1gb, id: 14, nvmlProfile: 1, computeSlices: 2, memorySlices: 1, memoryMiB: 1024, maxCount: 2, multiprocessors: 8, copyEngines: 2, decoders: 0, encoders: 0, jpegEngines: 0, ofaEngines: 0, placements: *all}
  - {name: 4g.1gb, id: 5, nvmlProfile: 3, computeSlices: 4, memorySlices: 1, memoryMiB: 1024, maxCount: 1, multiprocessors: 16, copyEngines: 4, decoders: 0, encoders: 0, jpegEngines: 0, ofaEngines: 0, placements: *all}
`

func tightCatalog(t *testing.T) *mig.Catalog {
	t.Helper()
	c, err := mig.LoadCatalog(fstest.MapFS{"models/tight.yaml": {Data: []byte(tightYAML)}})
	if err != nil {
		t.Fatalf("loading synthetic catalog: %v", err)
	}
	return c
}

// newSim returns an initialised simulator (shut down at cleanup).
func newTestSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	if cfg.Catalog == nil {
		cfg.Catalog = testCatalog(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	initSim(t, s)
	return s
}

func initSim(t *testing.T, s *Sim) {
	t.Helper()
	if ret := s.Init(); ret != nvml.SUCCESS {
		t.Fatalf("Init: %v", ret)
	}
	t.Cleanup(func() { s.Shutdown() })
}

func model(t *testing.T, c *mig.Catalog, name string) *mig.Model {
	t.Helper()
	m, err := c.Model(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nvmlProfile returns m's profile with the given NVML_GPU_INSTANCE_PROFILE_*
// index.
func nvmlProfile(t *testing.T, m *mig.Model, idx int) *mig.Profile {
	t.Helper()
	p := profileByNVML(m, idx)
	if p == nil {
		t.Fatalf("%s has no profile with NVML index %d", m.Name, idx)
	}
	return p
}

func must(t *testing.T, what string, ret nvml.Return) {
	t.Helper()
	if ret != nvml.SUCCESS {
		t.Fatalf("%s: %v", what, ret)
	}
}

func wantRet(t *testing.T, what string, got, want nvml.Return) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func handle(t *testing.T, s *Sim, index int) nvml.Device {
	t.Helper()
	d, ret := s.DeviceGetHandleByIndex(index)
	must(t, fmt.Sprintf("DeviceGetHandleByIndex(%d)", index), ret)
	return d
}

// migOn returns GPU index's handle with MIG mode enabled.
func migOn(t *testing.T, s *Sim, index int) nvml.Device {
	t.Helper()
	d := handle(t, s, index)
	act, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	must(t, "SetMigMode(ENABLE)", ret)
	must(t, "SetMigMode(ENABLE) activation", act)
	return d
}

// createGI creates a GI of the profile with NVML index idx at start.
func createGI(d nvml.Device, idx, start int) (nvml.GpuInstance, nvml.Return) {
	info, ret := d.GetGpuInstanceProfileInfo(idx)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	pl := nvml.GpuInstancePlacement{Start: uint32(start), Size: 0}
	possible, ret := d.GetGpuInstancePossiblePlacements(&info)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	pl.Size = possible[0].Size
	return d.CreateGpuInstanceWithPlacement(&info, &pl)
}

func mustGI(t *testing.T, d nvml.Device, idx, start int) nvml.GpuInstance {
	t.Helper()
	gi, ret := createGI(d, idx, start)
	must(t, fmt.Sprintf("creating GI profile %d at %d", idx, start), ret)
	return gi
}

// fullCI returns the full-size CI profile info of gi.
func fullCI(t *testing.T, gi nvml.GpuInstance) nvml.ComputeInstanceProfileInfo {
	t.Helper()
	gInfo, ret := gi.GetInfo()
	must(t, "GpuInstance.GetInfo", ret)
	var full nvml.ComputeInstanceProfileInfo
	for p := 0; p < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; p++ {
		info, ret := gi.GetComputeInstanceProfileInfo(p, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.SUCCESS && info.SliceCount > full.SliceCount {
			full = info
		}
	}
	if full.SliceCount == 0 {
		t.Fatalf("GI %d has no CI profile", gInfo.Id)
	}
	return full
}

// mustMIG creates a GI and its full-size CI and returns both.
func mustMIG(t *testing.T, d nvml.Device, idx, start int) (nvml.GpuInstance, nvml.ComputeInstance) {
	t.Helper()
	gi := mustGI(t, d, idx, start)
	info := fullCI(t, gi)
	ci, ret := gi.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	return gi, ci
}

// migUUIDOf returns the UUID of the MIG device made by ci.
func migUUIDOf(t *testing.T, s *Sim, gpu int, ci nvml.ComputeInstance) string {
	t.Helper()
	info, ret := ci.GetInfo()
	must(t, "ComputeInstance.GetInfo", ret)
	gInfo, ret := info.GpuInstance.GetInfo()
	must(t, "GpuInstance.GetInfo", ret)
	for _, gi := range s.Snapshot().GPUs[gpu].GPUInstances {
		if gi.ID == int(gInfo.Id) {
			for _, c := range gi.ComputeInstances {
				if c.ID == int(info.Id) {
					return c.UUID
				}
			}
		}
	}
	t.Fatalf("no MIG device for GI %d CI %d", gInfo.Id, info.Id)
	return ""
}

func layout(s *Sim, gpu int) string { return s.Snapshot().GPUs[gpu].Layout().String() }
