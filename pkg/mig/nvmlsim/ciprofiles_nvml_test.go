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
