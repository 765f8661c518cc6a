package nvmlsim

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

const a100 = "A100-PCIE-80GB"

// TestMIGOperationsWithMIGModeOff: with MIG mode off the creates are
// refused and the lookups answer as on a GPU without instances, as driver
// 580 answers (package gpu's testdata/nvml-traces); with MIG on each works
// (or, for lookups of instances that do not exist, answers NOT_FOUND).
func TestMIGOperationsWithMIGModeOff(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := handle(t, s, 0)
	info := nvml.GpuInstanceProfileInfo{Id: 19, InstanceCount: 7} // 1g on A100, as GetGpuInstanceProfileInfo gives it
	pl := nvml.GpuInstancePlacement{Start: 0, Size: 1}
	ops := map[string]func() nvml.Return{
		"GetGpuInstanceProfileInfo": func() nvml.Return {
			_, r := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
			return r
		},
		"GetGpuInstanceRemainingCapacity": func() nvml.Return { _, r := d.GetGpuInstanceRemainingCapacity(&info); return r },
		"CreateGpuInstanceWithPlacement":  func() nvml.Return { _, r := d.CreateGpuInstanceWithPlacement(&info, &pl); return r },
		"CreateGpuInstance":               func() nvml.Return { _, r := d.CreateGpuInstance(&info); return r },
		"GetGpuInstances":                 func() nvml.Return { _, r := d.GetGpuInstances(&info); return r },
		"GetGpuInstanceById":              func() nvml.Return { _, r := d.GetGpuInstanceById(1); return r },
		"GetMigDeviceHandleByIndex":       func() nvml.Return { _, r := d.GetMigDeviceHandleByIndex(0); return r },
	}
	wantOff := map[string]nvml.Return{
		"GetGpuInstanceProfileInfo":       nvml.SUCCESS,
		"GetGpuInstanceRemainingCapacity": nvml.SUCCESS,
		"CreateGpuInstanceWithPlacement":  nvml.ERROR_NOT_SUPPORTED,
		"CreateGpuInstance":               nvml.ERROR_NOT_SUPPORTED,
		"GetGpuInstances":                 nvml.SUCCESS,
		"GetGpuInstanceById":              nvml.ERROR_NOT_FOUND,
		"GetMigDeviceHandleByIndex":       nvml.ERROR_NOT_FOUND,
	}
	wantOn := map[string]nvml.Return{"GetGpuInstanceById": nvml.ERROR_NOT_FOUND, "GetMigDeviceHandleByIndex": nvml.ERROR_NOT_FOUND}
	for name, op := range ops {
		wantRet(t, name+" with MIG off", op(), wantOff[name])
	}
	if n, ret := d.GetGpuInstanceRemainingCapacity(&info); ret != nvml.SUCCESS || n != 7 {
		t.Errorf("GetGpuInstanceRemainingCapacity(1g) with MIG off = %d, %v; want 7, SUCCESS", n, ret)
	}
	if gis, ret := d.GetGpuInstances(&info); ret != nvml.SUCCESS || len(gis) != 0 {
		t.Errorf("GetGpuInstances(1g) with MIG off = %d GIs, %v; want none, SUCCESS", len(gis), ret)
	}
	if n, ret := d.GetMaxMigDeviceCount(); ret != nvml.SUCCESS || n != 0 {
		t.Errorf("GetMaxMigDeviceCount with MIG off = %d, %v; want 0, SUCCESS", n, ret)
	}
	if l := layout(s, 0); l != "" {
		t.Fatalf("layout %q after refused creates", l)
	}
	migOn(t, s, 0)
	for _, name := range []string{"GetGpuInstanceProfileInfo", "GetGpuInstanceRemainingCapacity", "GetGpuInstances", "GetGpuInstanceById", "GetMigDeviceHandleByIndex", "CreateGpuInstanceWithPlacement"} {
		want := nvml.SUCCESS
		if w, ok := wantOn[name]; ok {
			want = w
		}
		wantRet(t, name+" with MIG on", ops[name](), want)
	}
	if n, ret := d.GetMaxMigDeviceCount(); ret != nvml.SUCCESS || n != 7 {
		t.Errorf("GetMaxMigDeviceCount with MIG on = %d, %v; want 7, SUCCESS", n, ret)
	}
}

func TestGetGpuInstanceProfileInfo(t *testing.T) {
	c := testCatalog(t)
	s := newTestSim(t, Config{Spec: "1x" + a100 + ",1xA30-24GB"})
	for i, name := range []string{a100, "A30-24GB"} {
		m := model(t, c, name)
		d := migOn(t, s, i)
		for idx := range nvml.GPU_INSTANCE_PROFILE_COUNT {
			info, ret := d.GetGpuInstanceProfileInfo(idx)
			p := profileByNVML(m, idx)
			if idx >= DriverGIProfileCount {
				wantRet(t, fmt.Sprintf("%s profile %d, past the driver's last", name, idx), ret, nvml.ERROR_INVALID_ARGUMENT)
				continue
			}
			if p == nil {
				wantRet(t, fmt.Sprintf("%s profile %d", name, idx), ret, nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			want := nvml.GpuInstanceProfileInfo{
				Id: uint32(p.ID), SliceCount: uint32(p.ComputeSlices), InstanceCount: uint32(p.MaxCount),
				MultiprocessorCount: uint32(p.Multiprocessors), CopyEngineCount: uint32(p.CopyEngines),
				DecoderCount: uint32(p.Decoders), EncoderCount: uint32(p.Encoders), JpegCount: uint32(p.JPEGEngines),
				OfaCount: uint32(p.OFAEngines), MemorySizeMB: uint64(p.MemoryMiB),
			}
			if ret != nvml.SUCCESS {
				t.Errorf("%s profile %d (%s): %v", name, idx, p.Name, ret)
			} else if diff := cmp.Diff(want, info); diff != "" {
				t.Errorf("%s profile %d (%s) (-want +got):\n%s", name, idx, p.Name, diff)
			}
		}
		for _, idx := range []int{-1, nvml.GPU_INSTANCE_PROFILE_COUNT} {
			_, ret := d.GetGpuInstanceProfileInfo(idx)
			wantRet(t, fmt.Sprintf("%s profile %d", name, idx), ret, nvml.ERROR_INVALID_ARGUMENT)
		}
	}
	// Known facts, independent of the catalog code: on A100 the 3-slice
	// profile is GI profile 9 with 2 instances; A30 has no 3-slice profile.
	d := handle(t, s, 0)
	info, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS || info.Id != 9 || info.SliceCount != 3 || info.InstanceCount != 2 {
		t.Errorf("A100 3_SLICE = %+v, %v; want Id 9, SliceCount 3, InstanceCount 2", info, ret)
	}
	info, ret = d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	if ret != nvml.SUCCESS || info.Id != 0 || info.SliceCount != 7 {
		t.Errorf("A100 7_SLICE = %+v, %v; want Id 0, SliceCount 7", info, ret)
	}
	_, ret = handle(t, s, 1).GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	wantRet(t, "A30 3_SLICE", ret, nvml.ERROR_NOT_SUPPORTED)
}

// gi is a GI to create: NVML profile index and placement start.
type gi struct{ idx, start int }

func TestCreateGpuInstanceRefusals(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		tight   bool // use the synthetic SIM-TIGHT catalog
		setup   []gi
		attempt gi
		size    int  // placement size to ask for; 0 = the profile's
		okAlone bool // the attempt succeeds on an empty GPU
		// invalid: the placement is not one the profile lists
		// (ERROR_INVALID_ARGUMENT, else ERROR_INSUFFICIENT_RESOURCES).
		invalid bool
	}{
		{name: "overlap", spec: a100, setup: []gi{{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0}}, attempt: gi{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2}, okAlone: true},
		{name: "overlap by the whole GPU", spec: a100, setup: []gi{{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 3}}, attempt: gi{nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0}, okAlone: true},
		{name: "same placement twice", spec: a100, setup: []gi{{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 5}}, attempt: gi{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 5}, okAlone: true},
		{name: "start not in placement list", spec: a100, attempt: gi{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 2}, invalid: true},
		{name: "4g only at 0", spec: a100, attempt: gi{nvml.GPU_INSTANCE_PROFILE_4_SLICE, 4}, invalid: true},
		{name: "1g not on slice 7", spec: a100, attempt: gi{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 7}, invalid: true},
		{name: "size not the profile's", spec: a100, attempt: gi{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0}, size: 2, invalid: true},
		{name: "max count of +me", spec: a100, setup: []gi{{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 0}}, attempt: gi{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1}, okAlone: true},
		// The A30 has one OFA and one NVJPG: two media-extension GIs
		// cannot coexist.
		{name: "media engines", spec: "A30-24GB", setup: []gi{{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 0}},
			attempt: gi{nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1, 2}, okAlone: true},
		{name: "max count", spec: "SIM-TIGHT", tight: true, setup: []gi{{1, 0}, {1, 1}}, attempt: gi{1, 2}, okAlone: true},
		{name: "compute slices", spec: "SIM-TIGHT", tight: true, setup: []gi{{3, 0}, {1, 1}}, attempt: gi{1, 2}, okAlone: true},
		{name: "max instances", spec: "SIM-TIGHT", tight: true, setup: []gi{{0, 0}, {0, 1}, {0, 2}, {1, 3}}, attempt: gi{0, 4}, okAlone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Spec: "2x" + tt.spec}
			if tt.tight {
				cfg.Catalog = tightCatalog(t)
			}
			s := newTestSim(t, cfg)
			d := migOn(t, s, 0)
			for _, g := range tt.setup {
				mustGI(t, d, g.idx, g.start)
			}
			before := s.Snapshot()
			info, ret := d.GetGpuInstanceProfileInfo(tt.attempt.idx)
			must(t, "GetGpuInstanceProfileInfo", ret)
			size := tt.size
			if size == 0 {
				pls, ret := d.GetGpuInstancePossiblePlacements(&info)
				must(t, "GetGpuInstancePossiblePlacements", ret)
				size = int(pls[0].Size)
			}
			pl := nvml.GpuInstancePlacement{Start: uint32(tt.attempt.start), Size: uint32(size)}
			code := nvml.ERROR_INSUFFICIENT_RESOURCES
			if tt.invalid {
				code = nvml.ERROR_INVALID_ARGUMENT
			}
			_, ret = d.CreateGpuInstanceWithPlacement(&info, &pl)
			wantRet(t, "CreateGpuInstanceWithPlacement", ret, code)
			if diff := cmp.Diff(before, s.Snapshot()); diff != "" {
				t.Errorf("a refused create changed the state (-before +after):\n%s", diff)
			}
			// The refusal is due to the setup: on the empty second GPU
			// the same create succeeds.
			d1 := migOn(t, s, 1)
			_, ret = d1.CreateGpuInstanceWithPlacement(&info, &pl)
			want := code
			if tt.okAlone {
				want = nvml.SUCCESS
			}
			wantRet(t, "the same create on an empty GPU", ret, want)
		})
	}
}

func TestCreateGpuInstanceFirstFreeAndCapacity(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	info := func(idx int) *nvml.GpuInstanceProfileInfo {
		i, ret := d.GetGpuInstanceProfileInfo(idx)
		must(t, "GetGpuInstanceProfileInfo", ret)
		return &i
	}
	pls, ret := d.GetGpuInstancePossiblePlacements(info(nvml.GPU_INSTANCE_PROFILE_3_SLICE))
	must(t, "GetGpuInstancePossiblePlacements", ret)
	if diff := cmp.Diff([]nvml.GpuInstancePlacement{{Start: 0, Size: 4}, {Start: 4, Size: 4}}, pls); diff != "" {
		t.Errorf("3g placements (-want +got):\n%s", diff)
	}
	capacity := func(idx int) int {
		n, ret := d.GetGpuInstanceRemainingCapacity(info(idx))
		must(t, "GetGpuInstanceRemainingCapacity", ret)
		return n
	}
	type caps struct{ G1, G2, G3, G4, G7 int }
	all := func() caps {
		return caps{capacity(nvml.GPU_INSTANCE_PROFILE_1_SLICE), capacity(nvml.GPU_INSTANCE_PROFILE_2_SLICE),
			capacity(nvml.GPU_INSTANCE_PROFILE_3_SLICE), capacity(nvml.GPU_INSTANCE_PROFILE_4_SLICE), capacity(nvml.GPU_INSTANCE_PROFILE_7_SLICE)}
	}
	if diff := cmp.Diff(caps{7, 3, 2, 1, 1}, all()); diff != "" {
		t.Errorf("capacity of an empty A100 (-want +got):\n%s", diff)
	}
	// 1g.10gb+me takes the GPU's one OFA engine: one instance, of seven
	// placements free.
	if n := capacity(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1); n != 1 {
		t.Errorf("capacity of an empty A100 for 1g.10gb+me: %d, want 1", n)
	}
	mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
	if diff := cmp.Diff(caps{3, 1, 1, 0, 0}, all()); diff != "" {
		t.Errorf("capacity next to 3g@0 (-want +got):\n%s", diff)
	}
	// CreateGpuInstance takes the first free placement: 1g at 4, 5, 6.
	var starts []uint32
	for {
		g, ret := d.CreateGpuInstance(info(nvml.GPU_INSTANCE_PROFILE_1_SLICE))
		if ret == nvml.ERROR_INSUFFICIENT_RESOURCES {
			break
		}
		must(t, "CreateGpuInstance", ret)
		gInfo, ret := g.GetInfo()
		must(t, "GetInfo", ret)
		starts = append(starts, gInfo.Placement.Start)
	}
	if diff := cmp.Diff([]uint32{4, 5, 6}, starts); diff != "" {
		t.Errorf("CreateGpuInstance placements (-want +got):\n%s", diff)
	}
	_, ret = d.CreateGpuInstance(&nvml.GpuInstanceProfileInfo{Id: 99})
	wantRet(t, "CreateGpuInstance of unknown profile ID", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = d.CreateGpuInstanceWithPlacement(nil, &nvml.GpuInstancePlacement{})
	wantRet(t, "CreateGpuInstanceWithPlacement(nil)", ret, nvml.ERROR_INVALID_ARGUMENT)
}

func TestComputeInstances(t *testing.T) {
	c := testCatalog(t)
	m := model(t, c, a100)
	const (
		c1 = nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE
		c2 = nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE
		c3 = nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE
		c4 = nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE
		c7 = nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE
	)
	// offered: the CI profiles of each GI with their InstanceCount, as
	// nvidia-smi mig -lcip lists them (1c.7g 7, 2c.7g 3, 3c.7g 2, 4c.7g 1,
	// 7g 1 on a 7g GI).
	tests := []struct {
		idx, start int
		ciProfile  int
		offered    map[int]int
	}{
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0, c7, map[int]int{c1: 7, c2: 3, c3: 2, c4: 1, c7: 1}},
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, 0, c4, map[int]int{c1: 4, c2: 2, c4: 1}},
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, c3, map[int]int{c1: 3, c2: 1, c3: 1}},
		{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, c2, map[int]int{c1: 2, c2: 1}},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6, c1, map[int]int{c1: 1}},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 6, c1, map[int]int{c1: 1}},
	}
	for _, tt := range tests {
		p := nvmlProfile(t, m, tt.idx)
		t.Run(p.Name, func(t *testing.T) {
			s := newTestSim(t, Config{Spec: "1x" + a100})
			d := migOn(t, s, 0)
			g := mustGI(t, d, tt.idx, tt.start)
			for ci := range nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
				info, ret := g.GetComputeInstanceProfileInfo(ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
				count, ok := tt.offered[ci]
				if !ok {
					wantRet(t, fmt.Sprintf("CI profile %d", ci), ret, nvml.ERROR_NOT_SUPPORTED)
					continue
				}
				must(t, fmt.Sprintf("CI profile %d", ci), ret)
				slices := map[int]int{c1: 1, c2: 2, c3: 3, c4: 4, c7: 7}[ci]
				want := nvml.ComputeInstanceProfileInfo{
					Id: uint32(ci), SliceCount: uint32(slices), InstanceCount: uint32(count),
					MultiprocessorCount: uint32(p.Multiprocessors * slices / p.ComputeSlices), SharedCopyEngineCount: uint32(p.CopyEngines),
					SharedDecoderCount: uint32(p.Decoders), SharedEncoderCount: uint32(p.Encoders),
					SharedJpegCount: uint32(p.JPEGEngines), SharedOfaCount: uint32(p.OFAEngines),
				}
				if diff := cmp.Diff(want, info); diff != "" {
					t.Errorf("CI profile info (-want +got):\n%s", diff)
				}
			}
			_, ret := g.GetComputeInstanceProfileInfo(tt.ciProfile, 1)
			wantRet(t, "engine profile 1", ret, nvml.ERROR_INVALID_ARGUMENT)
			_, ret = g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_COUNT, 0)
			wantRet(t, "CI profile COUNT", ret, nvml.ERROR_INVALID_ARGUMENT)

			info := fullCI(t, g)
			ci, ret := g.CreateComputeInstance(&info)
			must(t, "CreateComputeInstance", ret)
			ciInfo, ret := ci.GetInfo()
			must(t, "ComputeInstance.GetInfo", ret)
			if ciInfo.Id != 0 || ciInfo.ProfileId != uint32(tt.ciProfile) || ciInfo.Placement.Size != uint32(p.ComputeSlices) ||
				ciInfo.Device != handle(t, s, 0) || ciInfo.GpuInstance != g {
				t.Errorf("CI info %+v: want ID 0, profile %d, size %d, the GPU and GI handles", ciInfo, tt.ciProfile, p.ComputeSlices)
			}
			// The full-size CI holds every compute slice: no other fits.
			for other := range tt.offered {
				oInfo, _ := g.GetComputeInstanceProfileInfo(other, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
				_, ret = g.CreateComputeInstance(&oInfo)
				wantRet(t, fmt.Sprintf("CreateComputeInstance(CI profile %d) beside the full-size CI", other), ret, nvml.ERROR_INSUFFICIENT_RESOURCES)
				if n, ret := g.GetComputeInstanceRemainingCapacity(&oInfo); ret != nvml.SUCCESS || n != 0 {
					t.Errorf("GetComputeInstanceRemainingCapacity(CI profile %d) = %d, %v; want 0", other, n, ret)
				}
			}
			cis, ret := g.GetComputeInstances(&info)
			must(t, "GetComputeInstances", ret)
			if len(cis) != 1 || cis[0] != ci {
				t.Errorf("GetComputeInstances = %v, want [the CI]", cis)
			}
			if got, ret := g.GetComputeInstanceById(0); ret != nvml.SUCCESS || got != ci {
				t.Errorf("GetComputeInstanceById(0) = %v, %v", got, ret)
			}
			_, ret = g.GetComputeInstanceById(1)
			wantRet(t, "GetComputeInstanceById(1)", ret, nvml.ERROR_NOT_FOUND)
		})
	}
}

func TestDestroyInUse(t *testing.T) {
	t.Run("GI with CI", func(t *testing.T) {
		s := newTestSim(t, Config{Spec: "1x" + a100})
		d := migOn(t, s, 0)
		g, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
		wantRet(t, "GpuInstance.Destroy with a CI", g.Destroy(), nvml.ERROR_IN_USE)
		wantRet(t, "GpuInstanceDestroy with a CI", s.GpuInstanceDestroy(g), nvml.ERROR_IN_USE)
		if n := len(s.Snapshot().GPUs[0].GPUInstances); n != 1 {
			t.Fatalf("%d GIs after refused destroy", n)
		}
		must(t, "ComputeInstance.Destroy", ci.Destroy())
		must(t, "GpuInstance.Destroy", g.Destroy())
		if l := layout(s, 0); l != "" {
			t.Errorf("layout %q after destroy", l)
		}
	})
	t.Run("CI with process", func(t *testing.T) {
		s := newTestSim(t, Config{Spec: "1x" + a100})
		d := migOn(t, s, 0)
		_, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0)
		pid, err := s.StartProcess(migUUIDOf(t, s, 0, ci), 512)
		if err != nil {
			t.Fatal(err)
		}
		wantRet(t, "ComputeInstance.Destroy with a process", ci.Destroy(), nvml.ERROR_IN_USE)
		wantRet(t, "ComputeInstanceDestroy with a process", s.ComputeInstanceDestroy(ci), nvml.ERROR_IN_USE)
		if err := s.StopProcess(pid); err != nil {
			t.Fatal(err)
		}
		must(t, "ComputeInstance.Destroy after the process ended", ci.Destroy())
	})
	t.Run("GI with process", func(t *testing.T) {
		s := newTestSim(t, Config{Spec: "1x" + a100})
		d := migOn(t, s, 0)
		g, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 3)
		pid, err := s.StartProcess(migUUIDOf(t, s, 0, ci), 1)
		if err != nil {
			t.Fatal(err)
		}
		wantRet(t, "GpuInstance.Destroy with a process", g.Destroy(), nvml.ERROR_IN_USE)
		if err := s.StopProcess(pid); err != nil {
			t.Fatal(err)
		}
		wantRet(t, "GpuInstance.Destroy with its CI left", g.Destroy(), nvml.ERROR_IN_USE)
		must(t, "ComputeInstance.Destroy", ci.Destroy())
		must(t, "GpuInstance.Destroy", g.Destroy())
		wantRet(t, "GpuInstance.Destroy again", g.Destroy(), nvml.ERROR_INVALID_ARGUMENT)
	})
}

func TestDisableMIGWithGIs(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	act, ret := d.SetMigMode(nvml.DEVICE_MIG_DISABLE)
	wantRet(t, "SetMigMode(DISABLE) with a GI", ret, nvml.ERROR_IN_USE)
	wantRet(t, "its activation status", act, nvml.ERROR_IN_USE)
	if cur, pend, _ := d.GetMigMode(); cur != 1 || pend != 1 {
		t.Errorf("mode %d/%d after refused disable, want 1/1", cur, pend)
	}
	must(t, "GpuInstance.Destroy", g.Destroy())
	act, ret = d.SetMigMode(nvml.DEVICE_MIG_DISABLE)
	must(t, "SetMigMode(DISABLE) without GIs", ret)
	must(t, "its activation status", act)
	if cur, pend, _ := d.GetMigMode(); cur != 0 || pend != 0 {
		t.Errorf("mode %d/%d after disable, want 0/0", cur, pend)
	}
	_, ret = d.SetMigMode(2)
	wantRet(t, "SetMigMode(2)", ret, nvml.ERROR_INVALID_ARGUMENT)
}

type modeStep struct {
	Activation, Ret  nvml.Return
	Current, Pending int
}

func setMode(t *testing.T, d nvml.Device, mode int) modeStep {
	t.Helper()
	act, ret := d.SetMigMode(mode)
	cur, pend, r := d.GetMigMode()
	must(t, "GetMigMode", r)
	return modeStep{act, ret, cur, pend}
}

func TestAmperePendingModeUntilReset(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := handle(t, s, 0)
	uuid := s.Snapshot().GPUs[0].UUID
	pid, err := s.StartProcess(uuid, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Enabling while a process holds the GPU: accepted, pending.
	if diff := cmp.Diff(modeStep{nvml.ERROR_IN_USE, nvml.SUCCESS, 0, 1}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("SetMigMode(ENABLE) with a process (-want +got):\n%s", diff)
	}
	info, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	must(t, "GetGpuInstanceProfileInfo while enable is pending", ret)
	_, ret = d.CreateGpuInstance(&info)
	wantRet(t, "CreateGpuInstance while enable is pending", ret, nvml.ERROR_NOT_SUPPORTED)
	// Reset is refused while the process runs.
	err = s.ResetGPU(0)
	if !errors.Is(err, nvml.ERROR_IN_USE) {
		t.Errorf("ResetGPU with a process: %v, want ERROR_IN_USE", err)
	}
	if cur, pend, _ := d.GetMigMode(); cur != 0 || pend != 1 {
		t.Errorf("mode %d/%d after refused reset, want 0/1", cur, pend)
	}
	if err := s.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	// The pending mode stays pending without a reset...
	if cur, pend, _ := d.GetMigMode(); cur != 0 || pend != 1 {
		t.Errorf("mode %d/%d after the process ended, want 0/1 until reset", cur, pend)
	}
	// ...and the reset applies it.
	if err := s.ResetGPU(0); err != nil {
		t.Fatalf("ResetGPU: %v", err)
	}
	if cur, pend, _ := d.GetMigMode(); cur != 1 || pend != 1 {
		t.Errorf("mode %d/%d after reset, want 1/1", cur, pend)
	}
	_, ret = d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	must(t, "GetGpuInstanceProfileInfo after reset", ret)

	// A pending change can be cancelled by asking for the current mode.
	// (With MIG on no process runs on the whole GPU: CUDA runs only in
	// MIG devices; MIG goes off first.)
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 0, 0}, setMode(t, d, nvml.DEVICE_MIG_DISABLE)); diff != "" {
		t.Errorf("SetMigMode(DISABLE) without a process (-want +got):\n%s", diff)
	}
	if _, err := s.StartProcess(uuid, 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(modeStep{nvml.ERROR_IN_USE, nvml.SUCCESS, 0, 1}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("SetMigMode(ENABLE) with a process (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 0, 0}, setMode(t, d, nvml.DEVICE_MIG_DISABLE)); diff != "" {
		t.Errorf("SetMigMode(DISABLE) cancelling the pending enable (-want +got):\n%s", diff)
	}
}

func TestAmpereModeAppliesWithoutProcess(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := handle(t, s, 0)
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 1, 1}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("SetMigMode(ENABLE) (-want +got):\n%s", diff)
	}
}

func TestHopperModeImmediateOrRefused(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xH100-SXM5-80GB"})
	d := handle(t, s, 0)
	pid, err := s.StartProcess(s.Snapshot().GPUs[0].UUID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(modeStep{nvml.ERROR_IN_USE, nvml.SUCCESS, 0, 0}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("SetMigMode(ENABLE) with a process (-want +got):\n%s", diff)
	}
	if err := s.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 1, 1}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("SetMigMode(ENABLE) without a process (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 0, 0}, setMode(t, d, nvml.DEVICE_MIG_DISABLE)); diff != "" {
		t.Errorf("SetMigMode(DISABLE) (-want +got):\n%s", diff)
	}
}

func TestResetGPUDestroysInstances(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	d := migOn(t, s, 0)
	g, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_4_SLICE, 0)
	mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	mdev, ret := d.GetMigDeviceHandleByIndex(0)
	must(t, "GetMigDeviceHandleByIndex", ret)
	pid, err := s.StartProcess(migUUIDOf(t, s, 0, ci), 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ResetGPU(0); !errors.Is(err, nvml.ERROR_IN_USE) {
		t.Fatalf("ResetGPU with a process on a MIG device: %v, want ERROR_IN_USE", err)
	}
	if err := s.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if len(snap.GPUs[0].GPUInstances) != 0 || len(snap.Processes) != 0 || !snap.GPUs[0].MIGCurrent {
		t.Errorf("after reset: %+v, want MIG on, no GI, no process", snap.GPUs[0])
	}
	_, ret = g.GetInfo()
	wantRet(t, "GI handle after reset", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = ci.GetInfo()
	wantRet(t, "CI handle after reset", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = mdev.GetUUID()
	wantRet(t, "MIG device handle after reset", ret, nvml.ERROR_INVALID_ARGUMENT)
	if err := s.ResetGPU(5); !errors.Is(err, nvml.ERROR_INVALID_ARGUMENT) {
		t.Errorf("ResetGPU(5): %v, want ERROR_INVALID_ARGUMENT", err)
	}
}

func TestInstanceIDs(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	ids := func(gs ...nvml.GpuInstance) []uint32 {
		var out []uint32
		for _, g := range gs {
			info, ret := g.GetInfo()
			must(t, "GetInfo", ret)
			out = append(out, info.Id)
		}
		return out
	}
	g1 := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	g2 := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1)
	g3 := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2)
	// GI IDs follow the placement: single slices are GIs 7 to 14.
	if diff := cmp.Diff([]uint32{7, 8, 9}, ids(g1, g2, g3)); diff != "" {
		t.Errorf("GI IDs (-want +got):\n%s", diff)
	}
	half := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	if diff := cmp.Diff([]uint32{2}, ids(half)); diff != "" {
		t.Errorf("GI ID of the right half (-want +got):\n%s", diff)
	}
	must(t, "Destroy GI 8", g2.Destroy())
	g4 := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1)
	if diff := cmp.Diff([]uint32{8}, ids(g4)); diff != "" {
		t.Errorf("GI ID at the same placement again (-want +got):\n%s", diff)
	}
	// The old handle to GI 8 is stale although the ID lives again.
	_, ret := g2.GetInfo()
	wantRet(t, "stale handle to reused GI ID", ret, nvml.ERROR_INVALID_ARGUMENT)
	byID, ret := d.GetGpuInstanceById(8)
	must(t, "GetGpuInstanceById(8)", ret)
	if byID != g4 {
		t.Errorf("GetGpuInstanceById(8) is not the new GI's handle")
	}
	_, ret = d.GetGpuInstanceById(10)
	wantRet(t, "GetGpuInstanceById(10)", ret, nvml.ERROR_NOT_FOUND)

	// CI IDs restart at 0 in each GI; a recreated CI gets a new MIG UUID.
	info := fullCI(t, g1)
	ci, ret := g1.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	first := migUUIDOf(t, s, 0, ci)
	must(t, "ComputeInstance.Destroy", ci.Destroy())
	ci2, ret := g1.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance again", ret)
	ciInfo, _ := ci2.GetInfo()
	if ciInfo.Id != 0 {
		t.Errorf("recreated CI ID %d, want 0", ciInfo.Id)
	}
	if second := migUUIDOf(t, s, 0, ci2); second == first {
		t.Errorf("recreated CI kept MIG UUID %s", first)
	}
	_, ret = ci.GetInfo()
	wantRet(t, "stale CI handle", ret, nvml.ERROR_INVALID_ARGUMENT)
}

// TestInstanceIDsSwapped: the simulator's odd-indexed GPUs number their GIs
// from the other half, as one GPU of a published nvidia-smi mig -lgi listing
// does (3g at 4, 2g at 0, 1g at 2 and 3: GIs 1, 5, 13, 14, where the
// even-indexed GPU has 2, 3, 9, 10), and MIG devices follow the GI IDs, not
// the placements.
func TestInstanceIDsSwapped(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2xH100-SXM5-80GB"})
	for index, want := range map[int][]int{0: {2, 3, 9, 10}, 1: {1, 5, 13, 14}} {
		d := migOn(t, s, index)
		var got []int
		for _, gi := range []struct{ profile, start int }{
			{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4}, {nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2}, {nvml.GPU_INSTANCE_PROFILE_1_SLICE, 3},
		} {
			g, _ := mustMIG(t, d, gi.profile, gi.start)
			info, ret := g.GetInfo()
			must(t, "GetInfo", ret)
			got = append(got, int(info.Id))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GPU %d: GI IDs (-want +got):\n%s", index, diff)
		}
		// MIG device 0 is the GI of the lowest ID: the 3g at 4 on GPU
		// 1, the 2g at 0 on GPU 0.
		md, ret := d.GetMigDeviceHandleByIndex(0)
		must(t, "GetMigDeviceHandleByIndex(0)", ret)
		giID, ret := md.GetGpuInstanceId()
		must(t, "GetGpuInstanceId", ret)
		if giID != slices.Min(want) {
			t.Errorf("GPU %d: MIG device 0 is GI %d, want %d", index, giID, slices.Min(want))
		}
	}
	// The whole GPU is GI 0 on either.
	d := handle(t, s, 1)
	for _, g := range s.Snapshot().GPUs[1].GPUInstances {
		gi, ret := d.GetGpuInstanceById(g.ID)
		must(t, "GetGpuInstanceById", ret)
		// Its full-size CI (1g, 2g or 3g), then the GI.
		for _, p := range []int{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE} {
			info, r := gi.GetComputeInstanceProfileInfo(p, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
			if r != nvml.SUCCESS {
				continue
			}
			cis, ret := gi.GetComputeInstances(&info)
			must(t, "GetComputeInstances", ret)
			for _, ci := range cis {
				must(t, "ComputeInstance.Destroy", ci.Destroy())
			}
		}
		must(t, "GpuInstance.Destroy", gi.Destroy())
	}
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	if info, _ := g.GetInfo(); info.Id != 0 {
		t.Errorf("7g on GPU 1 is GI %d, want 0", info.Id)
	}
}

func TestMIGDevices(t *testing.T) {
	c := testCatalog(t)
	m := model(t, c, a100)
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	// Created out of order; one GI without CI.
	mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0)
	mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 3)
	mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2)

	type migFacts struct {
		Name          string
		GIID, CIID    int
		Start         int
		TotalBytes    uint64
		IsMIG, Parent bool
	}
	uuidRE := regexp.MustCompile(`^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	snap := s.Snapshot()
	giByID := map[int]GPUInstance{}
	for _, g := range snap.GPUs[0].GPUInstances {
		giByID[g.ID] = g
	}
	var got []migFacts
	var devs []nvml.Device
	for i := 0; ; i++ {
		md, ret := d.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			break
		}
		must(t, "GetMigDeviceHandleByIndex", ret)
		devs = append(devs, md)
		var f migFacts
		f.Name, ret = md.GetName()
		must(t, "GetName", ret)
		uuid, ret := md.GetUUID()
		must(t, "GetUUID", ret)
		if !uuidRE.MatchString(uuid) {
			t.Errorf("MIG UUID %q does not look like MIG-xxxxxxxx-...", uuid)
		}
		if byUUID, ret := s.DeviceGetHandleByUUID(uuid); ret != nvml.SUCCESS || byUUID != md {
			t.Errorf("DeviceGetHandleByUUID(%s) = %v, %v; want the MIG device", uuid, byUUID, ret)
		}
		f.GIID, ret = md.GetGpuInstanceId()
		must(t, "GetGpuInstanceId", ret)
		f.CIID, ret = md.GetComputeInstanceId()
		must(t, "GetComputeInstanceId", ret)
		f.Start = giByID[f.GIID].Placement.Start
		mem, ret := md.GetMemoryInfo()
		must(t, "GetMemoryInfo", ret)
		f.TotalBytes = mem.Total
		f.IsMIG, ret = md.IsMigDeviceHandle()
		must(t, "IsMigDeviceHandle", ret)
		parent, ret := md.GetDeviceHandleFromMigDeviceHandle()
		must(t, "GetDeviceHandleFromMigDeviceHandle", ret)
		f.Parent = parent == d
		// nvml.h: GetIndex of a MIG device handle is the index
		// GetMigDeviceHandleByIndex takes to give it.
		if idx, ret := md.GetIndex(); ret != nvml.SUCCESS || idx != i {
			t.Errorf("MIG device %d: GetIndex = %d, %v; want %d", i, idx, ret, i)
		}
		got = append(got, f)
	}
	mib := func(idx int) uint64 { return uint64(nvmlProfile(t, m, idx).MemoryMiB) << 20 }
	name := func(idx int) string { return m.ProductName + " MIG " + nvmlProfile(t, m, idx).Name }
	// Numbered by GI ID, as real NVML numbers them.
	want := []migFacts{
		{Name: name(nvml.GPU_INSTANCE_PROFILE_3_SLICE), GIID: 2, Start: 4, TotalBytes: mib(nvml.GPU_INSTANCE_PROFILE_3_SLICE), IsMIG: true, Parent: true},
		{Name: name(nvml.GPU_INSTANCE_PROFILE_2_SLICE), GIID: 3, Start: 0, TotalBytes: mib(nvml.GPU_INSTANCE_PROFILE_2_SLICE), IsMIG: true, Parent: true},
		{Name: name(nvml.GPU_INSTANCE_PROFILE_1_SLICE), GIID: 9, Start: 2, TotalBytes: mib(nvml.GPU_INSTANCE_PROFILE_1_SLICE), IsMIG: true, Parent: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIG devices (-want +got):\n%s", diff)
	}
	_, ret := d.GetMigDeviceHandleByIndex(7)
	wantRet(t, "GetMigDeviceHandleByIndex(7)", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, _, ret = devs[0].GetMigMode()
	wantRet(t, "GetMigMode on a MIG device", ret, nvml.ERROR_NOT_SUPPORTED)
	if isMIG, _ := d.IsMigDeviceHandle(); isMIG {
		t.Errorf("the GPU handle says it is a MIG device")
	}

	// Processes: on MIG devices 0 and 2; none on the whole GPU, where
	// CUDA does not run with MIG mode on.
	uuid := func(md nvml.Device) string { u, _ := md.GetUUID(); return u }
	p1, err := s.StartProcess(uuid(devs[0]), 500)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.StartProcess(uuid(devs[2]), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartProcess(snap.GPUs[0].UUID, 10); !errors.Is(err, nvml.ERROR_NOT_FOUND) {
		t.Errorf("StartProcess on the whole GPU with MIG on: %v, want ERROR_NOT_FOUND", err)
	}
	procs, ret := devs[0].GetComputeRunningProcesses()
	must(t, "GetComputeRunningProcesses on MIG device 0", ret)
	if diff := cmp.Diff([]nvml.ProcessInfo{{Pid: p1, UsedGpuMemory: 500 << 20, GpuInstanceId: 2, ComputeInstanceId: 0}}, procs); diff != "" {
		t.Errorf("processes on MIG device 0 (-want +got):\n%s", diff)
	}
	procs, ret = s.DeviceGetComputeRunningProcesses(d)
	must(t, "GetComputeRunningProcesses on the GPU", ret)
	wantAll := []nvml.ProcessInfo{
		{Pid: p1, UsedGpuMemory: 500 << 20, GpuInstanceId: 2, ComputeInstanceId: 0},
		{Pid: p2, UsedGpuMemory: 100 << 20, GpuInstanceId: 9, ComputeInstanceId: 0},
	}
	if diff := cmp.Diff(wantAll, procs); diff != "" {
		t.Errorf("processes on the GPU (-want +got):\n%s", diff)
	}
	mem, _ := devs[0].GetMemoryInfo()
	if mem.Used != 500<<20 || mem.Free != mem.Total-500<<20 {
		t.Errorf("MIG device 0 memory %+v, want 500 MiB used", mem)
	}
	mem, _ = d.GetMemoryInfo()
	if mem.Used != 600<<20 {
		t.Errorf("GPU memory used %d, want 600 MiB", mem.Used)
	}

	// StartProcess and StopProcess refusals.
	if _, err := s.StartProcess(uuid(devs[1]), 1<<30); !errors.Is(err, nvml.ERROR_MEMORY) {
		t.Errorf("StartProcess beyond the memory: %v, want ERROR_MEMORY", err)
	}
	if _, err := s.StartProcess("MIG-nope", 1); !errors.Is(err, nvml.ERROR_NOT_FOUND) {
		t.Errorf("StartProcess on an unknown UUID: %v, want ERROR_NOT_FOUND", err)
	}
	if _, err := s.StartProcess(uuid(devs[1]), -1); !errors.Is(err, nvml.ERROR_INVALID_ARGUMENT) {
		t.Errorf("StartProcess with negative memory: %v, want ERROR_INVALID_ARGUMENT", err)
	}
	if err := s.StopProcess(4242); !errors.Is(err, nvml.ERROR_NOT_FOUND) {
		t.Errorf("StopProcess(4242): %v, want ERROR_NOT_FOUND", err)
	}
	if got := s.Snapshot().GPUs[0].Layout(); !got.Equal(mig.MustParseLayout(fmt.Sprintf("%s@0,%s@2,%s@3,%s@4",
		nvmlProfile(t, m, nvml.GPU_INSTANCE_PROFILE_2_SLICE).Name, nvmlProfile(t, m, nvml.GPU_INSTANCE_PROFILE_1_SLICE).Name,
		nvmlProfile(t, m, nvml.GPU_INSTANCE_PROFILE_1_SLICE).Name, nvmlProfile(t, m, nvml.GPU_INSTANCE_PROFILE_3_SLICE).Name))) {
		t.Errorf("layout %s", got)
	}
}

// TestLostGPU: a GPU fallen off the bus is still counted, but its handle,
// calls on handles taken before, its MIG devices by UUID and a reset all
// give ERROR_GPU_IS_LOST, and no process starts on it, until RecoverGPU.
func TestLostGPU(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	d := migOn(t, s, 0)
	g, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	uuid := migUUIDOf(t, s, 0, ci)
	if err := s.LoseGPU(0); err != nil {
		t.Fatal(err)
	}
	n, ret := s.DeviceGetCount()
	must(t, "DeviceGetCount", ret)
	if n != 2 {
		t.Errorf("DeviceGetCount = %d, want 2 (a lost GPU is still counted)", n)
	}
	_, ret = s.DeviceGetHandleByIndex(0)
	wantRet(t, "DeviceGetHandleByIndex of the lost GPU", ret, nvml.ERROR_GPU_IS_LOST)
	_, ret = d.GetUUID()
	wantRet(t, "GetUUID on a handle taken before", ret, nvml.ERROR_GPU_IS_LOST)
	_, ret = g.GetInfo()
	wantRet(t, "GI GetInfo", ret, nvml.ERROR_GPU_IS_LOST)
	_, ret = s.DeviceGetHandleByUUID(uuid)
	wantRet(t, "DeviceGetHandleByUUID of its MIG device", ret, nvml.ERROR_GPU_IS_LOST)
	if err := s.ResetGPU(0); !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Errorf("ResetGPU of the lost GPU: %v, want ERROR_GPU_IS_LOST", err)
	}
	if _, err := s.StartProcess(uuid, 10); err == nil {
		t.Error("a process started on the lost GPU")
	}
	_, ret = s.DeviceGetHandleByIndex(1)
	must(t, "DeviceGetHandleByIndex of the other GPU", ret)

	if err := s.RecoverGPU(0); err != nil {
		t.Fatal(err)
	}
	_, ret = g.GetInfo()
	must(t, "GI GetInfo after recovery", ret)
	if err := s.LoseGPU(2); !errors.Is(err, nvml.ERROR_INVALID_ARGUMENT) {
		t.Errorf("LoseGPU(2) of 2 GPUs: %v, want ERROR_INVALID_ARGUMENT", err)
	}
}

// TestSetMigModeWithoutGPUReset: where the driver cannot reset the GPU
// (Config.NoGPUReset: a GPU passed through to a virtual machine), an Ampere
// MIG mode change with nothing on the GPU is accepted, stays pending with
// activation status ERROR_RESET_REQUIRED (nvml.h: "VM reboot is
// required"), and applies at ResetGPU; a Hopper GPU, which needs no reset,
// changes at once.
func TestSetMigModeWithoutGPUReset(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100 + ",1xH100-SXM5-80GB", NoGPUReset: true})
	d := handle(t, s, 0)
	act, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	wantRet(t, "SetMigMode on the A100", ret, nvml.SUCCESS)
	wantRet(t, "SetMigMode activation on the A100", act, nvml.ERROR_RESET_REQUIRED)
	if g := s.Snapshot().GPUs[0]; g.MIGCurrent || !g.MIGPending {
		t.Fatalf("A100 MIG current %t pending %t, want off, pending on", g.MIGCurrent, g.MIGPending)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
	if g := s.Snapshot().GPUs[0]; !g.MIGCurrent {
		t.Error("A100 MIG mode not on after the reset")
	}
	act, ret = handle(t, s, 1).SetMigMode(nvml.DEVICE_MIG_ENABLE)
	wantRet(t, "SetMigMode on the H100", ret, nvml.SUCCESS)
	wantRet(t, "SetMigMode activation on the H100", act, nvml.SUCCESS)
}

// TestResetGPUMIGMode: a reset destroys every instance; the MIG mode is
// kept, a pending one applied, on Ampere, and turned off on Hopper, where
// it is the driver's state.
func TestResetGPUMIGMode(t *testing.T) {
	tests := map[string]struct {
		model string
		// pending: MIG mode disable asked while a client holds the GPU
		// (Ampere keeps it pending; Hopper changes nothing).
		pending  bool
		wantCur  int
		wantPend int
	}{
		"Ampere":                  {model: a100, wantCur: 1, wantPend: 1},
		"Ampere, disable pending": {model: a100, pending: true, wantCur: 0, wantPend: 0},
		"Hopper":                  {model: "H100-SXM5-80GB", wantCur: 0, wantPend: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newTestSim(t, Config{Spec: "1x" + tc.model})
			d := migOn(t, s, 0)
			g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
			if tc.pending {
				must(t, "GpuInstance.Destroy", g.Destroy())
				uuid, ret := d.GetUUID()
				must(t, "GetUUID", ret)
				id, err := s.OpenClient(uuid)
				if err != nil {
					t.Fatal(err)
				}
				if st := setMode(t, d, nvml.DEVICE_MIG_DISABLE); st.Current != 1 || st.Pending != 0 {
					t.Fatalf("disable with a client: %+v, want pending", st)
				}
				if err := s.CloseClient(id); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.ResetGPU(0); err != nil {
				t.Fatal(err)
			}
			cur, pend, ret := d.GetMigMode()
			must(t, "GetMigMode", ret)
			if cur != tc.wantCur || pend != tc.wantPend {
				t.Errorf("MIG mode %d/%d after the reset, want %d/%d", cur, pend, tc.wantCur, tc.wantPend)
			}
			if gis := s.Snapshot().GPUs[0].GPUInstances; len(gis) != 0 {
				t.Errorf("%d GPU instances after the reset, want none", len(gis))
			}
		})
	}
}

// TestHandleByUUIDWhileAnotherGPUIsLost: nvmlDeviceGetHandleByUUID searches
// every GPU, and answers ERROR_GPU_IS_LOST while any is off the bus, for the
// UUID of a sound GPU too.
func TestHandleByUUIDWhileAnotherGPUIsLost(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	d, ret := s.DeviceGetHandleByIndex(0)
	must(t, "DeviceGetHandleByIndex", ret)
	uuid, ret := d.GetUUID()
	must(t, "GetUUID", ret)
	if err := s.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	_, ret = s.DeviceGetHandleByUUID(uuid)
	wantRet(t, "DeviceGetHandleByUUID of GPU 0 while GPU 1 is lost", ret, nvml.ERROR_GPU_IS_LOST)
	if _, ret := s.DeviceGetHandleByIndex(0); ret != nvml.SUCCESS {
		t.Errorf("DeviceGetHandleByIndex(0) while GPU 1 is lost: %v, want SUCCESS", ret)
	}
	if err := s.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	_, ret = s.DeviceGetHandleByUUID(uuid)
	must(t, "DeviceGetHandleByUUID once GPU 1 is back", ret)
}
