package plugin

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
)

// A GPU that NVML answers with ERROR_UNKNOWN (wedged until a reset, and
// neither lost nor waiting for a reset) does not stop the claims of the
// node's other GPUs from being prepared: their pods would stay in
// ContainerCreating for as long as that one GPU is sick. Here GPU 1 fails
// one read (its GetPciInfo, the second of the listing); the claim has a
// device on GPU 0 only. A claim with a device on GPU 1 fails.
func TestPrepareIgnoresErrorOfAnotherGPU(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	// GPUs() reads GPU 0, then GPU 1: the second GetPciInfo is GPU 1's.
	if err := e.sim.InjectFault(nvmlsim.Fault{Op: "GetPciInfo", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Errorf("prepare of a device on GPU 0 failed because of GPU 1: %v", r.Err)
	}
	if _, ok := p.PreparedDevices()["gpu-0-mig-1g10gb-19-2"]; !ok {
		t.Error("the GPU 0 device was not prepared")
	}
	// The claim of GPU 1 itself fails while GPU 1 cannot be read.
	if err := e.sim.InjectFault(nvmlsim.Fault{Op: "GetPciInfo", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	whole := claim(uid2, "train", alloc{"whole", slices.DefaultDriverName, node, "gpu-1"})
	if r := e.prepare(p, whole); r.Err == nil || !strings.Contains(r.Err.Error(), "reading GPU 1") {
		t.Errorf("prepare of GPU 1 while NVML fails to read it: err = %v, want one reading GPU 1", r.Err)
	}
}
