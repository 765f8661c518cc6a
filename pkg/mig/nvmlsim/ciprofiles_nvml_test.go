package nvmlsim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The compute instance profiles NVML offers on a GPU instance of N compute
// slices are the full-size one and those of at most half of N, rounded up
// (nvidia-smi mig -lcip on an A100: 1c.4g, 2c.4g and 4g on a 4g GPU
// instance; 1c.3g, 2c.3g and 3g on a 3g one).

// Test4gGIOffersNo3SliceCI: a 4g GPU instance offers no 3-slice compute
// instance (nvmlGpuInstanceGetComputeInstanceProfileInfo: NOT_SUPPORTED),
// so none can be created.
func Test4gGIOffersNo3SliceCI(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_4_SLICE, 0)
	info, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	wantRet(t, "GetComputeInstanceProfileInfo(3_SLICE) on a 4g GI", ret, nvml.ERROR_NOT_SUPPORTED)
	if ret == nvml.SUCCESS {
		if _, ret := g.CreateComputeInstance(&info); ret == nvml.SUCCESS {
			t.Errorf("CreateComputeInstance made a 3c.4g compute instance (%+v), which real NVML does not offer", info)
		}
	}
}

// Test3gGITakes1cThen2c: `nvidia-smi mig -cci 0,1` on a 3g GPU instance
// (a 1c.3g, then a 2c.3g compute instance, no placement given) succeeds:
// the 1c must not take compute slice 0, the only start of a 2c.
func Test3gGITakes1cThen2c(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	c1, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	must(t, "CI profile 1c.3g", ret)
	c2, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	must(t, "CI profile 2c.3g", ret)
	_, ret = g.CreateComputeInstance(&c1)
	must(t, "CreateComputeInstance(1c.3g)", ret)
	_, ret = g.CreateComputeInstance(&c2)
	wantRet(t, "CreateComputeInstance(2c.3g) beside a 1c.3g", ret, nvml.SUCCESS)
}

// Test1g20gbCIProfiles: an H100's 1g.20gb GPU instance (GPU instance
// profile 1_SLICE_REV2, 26 multiprocessors) offers two full-width compute
// instance profiles, as real NVML does: 1_SLICE with a 1g.10gb's 16
// multiprocessors (MIG device "1c.1g.20gb") and 1_SLICE_REV1 with all 26
// (MIG device "1g.20gb", what nvidia-smi mig -cgi 15 -C makes); one at a
// time. An A100's 1g.20gb has a 1g's multiprocessors: 1_SLICE is its full
// one and 1_SLICE_REV1 is not offered, nor is it in a plain 1g.
func Test1g20gbCIProfiles(t *testing.T) {
	const h100 = "H100-SXM5-80GB"
	s := newTestSim(t, Config{Spec: "1x" + h100 + ",1x" + a100})
	h := migOn(t, s, 0)
	ciInfo := func(gi nvml.GpuInstance, profile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		return gi.GetComputeInstanceProfileInfo(profile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	}
	big := mustGI(t, h, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 0)
	plain, ret := ciInfo(big, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	must(t, "1_SLICE in an H100 1g.20gb", ret)
	rev1, ret := ciInfo(big, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
	must(t, "1_SLICE_REV1 in an H100 1g.20gb", ret)
	if plain.MultiprocessorCount != 16 || rev1.MultiprocessorCount != 26 || plain.SliceCount != 1 || rev1.SliceCount != 1 {
		t.Errorf("H100 1g.20gb: 1_SLICE %d SMs over %d slices, 1_SLICE_REV1 %d SMs over %d; want 16 and 26, one slice each",
			plain.MultiprocessorCount, plain.SliceCount, rev1.MultiprocessorCount, rev1.SliceCount)
	}
	ci, ret := big.CreateComputeInstance(&rev1)
	must(t, "CreateComputeInstance(1_SLICE_REV1)", ret)
	_, ret = big.CreateComputeInstance(&plain)
	wantRet(t, "CreateComputeInstance(1_SLICE) beside a 1_SLICE_REV1 CI", ret, nvml.ERROR_INSUFFICIENT_RESOURCES)
	if name := migNameOf(t, s, 0, ci); name != "NVIDIA H100 80GB HBM3 MIG 1g.20gb" {
		t.Errorf("MIG device of the 1_SLICE_REV1 CI named %q, want ... MIG 1g.20gb", name)
	}
	must(t, "ComputeInstance.Destroy", ci.Destroy())
	ci, ret = big.CreateComputeInstance(&plain)
	must(t, "CreateComputeInstance(1_SLICE)", ret)
	if name := migNameOf(t, s, 0, ci); name != "NVIDIA H100 80GB HBM3 MIG 1c.1g.20gb" {
		t.Errorf("MIG device of the 1_SLICE CI named %q, want ... MIG 1c.1g.20gb", name)
	}

	small := mustGI(t, h, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 4)
	_, ret = ciInfo(small, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
	wantRet(t, "1_SLICE_REV1 in an H100 1g.10gb", ret, nvml.ERROR_NOT_SUPPORTED)

	a := migOn(t, s, 1)
	aBig := mustGI(t, a, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 0)
	_, ret = ciInfo(aBig, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
	wantRet(t, "1_SLICE_REV1 in an A100 1g.20gb", ret, nvml.ERROR_NOT_SUPPORTED)
	aPlain, ret := ciInfo(aBig, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	must(t, "1_SLICE in an A100 1g.20gb", ret)
	if aPlain.MultiprocessorCount != 14 {
		t.Errorf("A100 1g.20gb 1_SLICE CI: %d SMs, want the GI's 14", aPlain.MultiprocessorCount)
	}
}

// migNameOf is nvmlDeviceGetName of the MIG device of CI ci on GPU gpu.
func migNameOf(t *testing.T, s *Sim, gpu int, ci nvml.ComputeInstance) string {
	t.Helper()
	uuid := migUUIDOf(t, s, gpu, ci)
	d, ret := s.DeviceGetHandleByUUID(uuid)
	must(t, "DeviceGetHandleByUUID", ret)
	name, ret := d.GetName()
	must(t, "GetName", ret)
	return name
}

// TestRev1CIIn2gGI: an H100's 2g.20gb GPU instance offers 1_SLICE_REV1
// beside 1_SLICE, as nvidia-smi mig -lcip lists it (1c.2g.20gb, profile 7,
// 1/1, 26 SMs): one such compute instance, with no other beside it, named
// 1c.2g.20gb; while it exists the GPU instance cannot be destroyed
// (IN_USE). An A100's 2g.20gb does not offer it, nor does an H100's
// 3g.40gb (no listing says it does).
func TestRev1CIIn2gGI(t *testing.T) {
	const h100 = "H100-SXM5-80GB"
	s := newTestSim(t, Config{Spec: "1x" + h100 + ",1x" + a100})
	h := migOn(t, s, 0)
	ciInfo := func(gi nvml.GpuInstance, profile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		return gi.GetComputeInstanceProfileInfo(profile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	}
	gi := mustGI(t, h, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0)
	rev1, ret := ciInfo(gi, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
	must(t, "1_SLICE_REV1 in an H100 2g.20gb", ret)
	if rev1.SliceCount != 1 || rev1.InstanceCount != 1 || rev1.MultiprocessorCount != 26 {
		t.Errorf("1_SLICE_REV1 in an H100 2g.20gb: %d slice(s), %d instance(s), %d SMs; want 1, 1, 26", rev1.SliceCount, rev1.InstanceCount, rev1.MultiprocessorCount)
	}
	plain, ret := ciInfo(gi, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	must(t, "1_SLICE in an H100 2g.20gb", ret)
	if plain.InstanceCount != 2 || plain.MultiprocessorCount != 16 {
		t.Errorf("1_SLICE in an H100 2g.20gb: %d instance(s), %d SMs; want 2, 16", plain.InstanceCount, plain.MultiprocessorCount)
	}
	ci, ret := gi.CreateComputeInstance(&rev1)
	must(t, "CreateComputeInstance(1_SLICE_REV1) in a 2g.20gb", ret)
	if name := migNameOf(t, s, 0, ci); name != "NVIDIA H100 80GB HBM3 MIG 1c.2g.20gb" {
		t.Errorf("MIG device of the 1_SLICE_REV1 CI named %q, want ... MIG 1c.2g.20gb", name)
	}
	_, ret = gi.CreateComputeInstance(&plain)
	wantRet(t, "CreateComputeInstance(1_SLICE) beside a 1_SLICE_REV1 CI", ret, nvml.ERROR_INSUFFICIENT_RESOURCES)
	_, ret = gi.CreateComputeInstance(&rev1)
	wantRet(t, "a second CreateComputeInstance(1_SLICE_REV1)", ret, nvml.ERROR_INSUFFICIENT_RESOURCES)
	wantRet(t, "GpuInstance.Destroy with a 1_SLICE_REV1 CI", gi.Destroy(), nvml.ERROR_IN_USE)
	must(t, "ComputeInstance.Destroy", ci.Destroy())

	// A 1c first leaves no room for a 1_SLICE_REV1 one.
	_, ret = gi.CreateComputeInstance(&plain)
	must(t, "CreateComputeInstance(1_SLICE) in a 2g.20gb", ret)
	_, ret = gi.CreateComputeInstance(&rev1)
	wantRet(t, "CreateComputeInstance(1_SLICE_REV1) beside a 1_SLICE CI", ret, nvml.ERROR_INSUFFICIENT_RESOURCES)

	big := mustGI(t, h, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	_, ret = ciInfo(big, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
	wantRet(t, "1_SLICE_REV1 in an H100 3g.40gb", ret, nvml.ERROR_NOT_SUPPORTED)
	a := migOn(t, s, 1)
	_, ret = ciInfo(mustGI(t, a, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0), nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
	wantRet(t, "1_SLICE_REV1 in an A100 2g.20gb", ret, nvml.ERROR_NOT_SUPPORTED)
}
