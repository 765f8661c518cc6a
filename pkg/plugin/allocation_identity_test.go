package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareReallocatedToOtherRequests: a claim of two requests is
// prepared, then deallocated and allocated again under the same UID with
// the same two devices, but each now for the other request (its unprepare
// never reached the plugin). The kubelet hands each container the CDI
// devices of the requests it names, as the plugin reports them: the
// plugin must report the requests of the allocation it is asked to
// prepare, not those of the stale preparation, or the container naming
// request "a" gets the device the scheduler allocated to "b".
func TestPrepareReallocatedToOtherRequests(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	const two, three = "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3"
	first := claim(uid1, "pair", alloc{"a", driver, node, two}, alloc{"b", driver, node, three})
	if r := e.prepare(p, first); r.Err != nil {
		t.Fatal(r.Err)
	}
	again := claim(uid1, "pair", alloc{"a", driver, node, three}, alloc{"b", driver, node, two})
	r := e.prepare(p, again)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	got := map[string][]string{}
	for _, d := range r.Devices {
		got[d.DeviceName] = d.Requests
	}
	want := map[string][]string{three: {"a"}, two: {"b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests of the prepared devices after the reallocation (-want: the allocation, +got):\n%s", diff)
	}
	// What a restarted plugin reads back from the checkpoint follows the
	// allocation too.
	cp := map[string][]string{}
	for _, d := range e.plugin("").claims[uid1].Devices {
		cp[d.Device] = d.Requests
	}
	if diff := cmp.Diff(want, cp); diff != "" {
		t.Errorf("checkpoint after the reallocation (-want +got):\n%s", diff)
	}
}

// renumberedGPUs reports, at NVML index index, a GPU with another UUID:
// after a reboot in which a GPU was taken out (or is no longer enumerated),
// NVML numbers the remaining GPUs anew and another physical GPU answers to
// the index, and so to the published name gpu-<index>.
type renumberedGPUs struct {
	gpu.Manager
	index int
	uuid  string
}

func (r renumberedGPUs) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	gs, err := r.Manager.GPUs(ctx)
	for i := range gs {
		if gs[i].Index == r.index {
			gs[i].UUID = r.uuid
		}
	}
	return gs, err
}

// TestPrepareRefusesAnotherPhysicalGPUUnderThePreparedName: a whole GPU, or
// a MIG device, is prepared for a claim; the node reboots, and NVML numbers
// the GPUs anew so that the index belongs to another physical GPU (another
// UUID), on which the agent makes the MIG layout again. A GPU's UUID is
// burnt into the board: the allocation (made on the prepared GPU, whose
// attributes, parentUUID, PCI bus ID and PCIe root the claim's selectors
// and constraints matched) must not be handed the other board's device of
// the same name. A MIG device's own UUID is new after any reboot, so for it
// the checkpoint's gpuUUID tells. The prepare fails as for a device that is
// gone, and the preparation stays.
func TestPrepareRefusesAnotherPhysicalGPUUnderThePreparedName(t *testing.T) {
	tests := map[string]struct {
		device string
		gpu    int
		// mig is made again on the other board after the reboot.
		mig *mig.Device
	}{
		"whole GPU":  {device: "gpu-1", gpu: 1},
		"MIG device": {device: "gpu-0-mig-1g10gb-19-2", gpu: 0, mig: &mig.Device{Profile: "1g.10gb", Start: 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			c := claim(uid1, "infer", alloc{"g", slices.DefaultDriverName, node, tc.device})
			if r := e.prepare(e.plugin(""), c); r.Err != nil {
				t.Fatal(r.Err)
			}
			recorded := e.plugin("").claims[uid1].Devices[0]
			board := recorded.GPUUUID // a MIG device's GPU
			if board == "" {
				board = recorded.UUID // a whole GPU
			}
			const other = "GPU-00000000-0000-4000-8000-0000000000ff"

			// The reboot: MIG devices and /var/run/cdi (a tmpfs) are gone,
			// the checkpoint survives.
			if tc.mig != nil {
				if err := e.gpus.DestroyMIGDevice(e.ctx, tc.gpu, *tc.mig); err != nil {
					t.Fatal(err)
				}
				e.createMIG(*tc.mig)
			}
			if err := os.RemoveAll(e.cdiDir); err != nil {
				t.Fatal(err)
			}
			p, err := New(Config{NodeName: node, GPUs: renumberedGPUs{Manager: e.gpus, index: tc.gpu, uuid: other}, Locks: e.locks,
				CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
			if err != nil {
				t.Fatal(err)
			}
			r := e.prepare(p, c)
			if r.Err == nil {
				spec, _ := os.ReadFile(filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
				t.Errorf("claim prepared on GPU %s was handed %s of another physical GPU, %s:\n%s", board, tc.device, other, spec)
			} else if !errors.Is(r.Err, ErrDeviceGone) || !strings.Contains(r.Err.Error(), board) {
				t.Errorf("prepare = %v, want ErrDeviceGone naming the prepared GPU %s", r.Err, board)
			}
			if got := p.claims[uid1].Devices; len(got) != 1 || got[0].UUID != recorded.UUID {
				t.Errorf("preparation after the failed prepare: %+v, want %s as %s", got, tc.device, recorded.UUID)
			}
		})
	}
}
