package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestPrepareRefusesAnotherPhysicalGPUUnderThePreparedName: a whole GPU is
// prepared for a claim, the node reboots, and the name gpu-1 now belongs to
// another physical GPU (another UUID). A whole GPU's UUID is burnt into the
// board: it is never "created again" as MIG devices are, so the allocation
// (made on the GPU with the prepared UUID, whose attributes the claim's
// selectors matched) must not be handed the other GPU. The prepare fails and
// the preparation stays, as for a device that is gone.
func TestPrepareRefusesAnotherPhysicalGPUUnderThePreparedName(t *testing.T) {
	e := newEnv(t)
	c := claim(uid1, "whole", alloc{"g", slices.DefaultDriverName, node, "gpu-1"})
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	prepared := e.plugin("").claims[uid1].Devices[0].UUID
	const other = "GPU-00000000-0000-4000-8000-0000000000ff"

	// The reboot: /var/run/cdi is a tmpfs, the checkpoint survives, and
	// index 1 is another board.
	if err := os.RemoveAll(e.cdiDir); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{NodeName: node, GPUs: renumberedGPUs{Manager: e.gpus, index: 1, uuid: other}, Locks: e.locks,
		CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	r := e.prepare(p, c)
	if r.Err == nil {
		spec, _ := os.ReadFile(filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
		t.Errorf("claim prepared on GPU %s was handed another physical GPU, %s, under the same name:\n%s", prepared, other, spec)
	} else if !strings.Contains(r.Err.Error(), prepared) {
		t.Errorf("error %q does not name the prepared GPU %s", r.Err, prepared)
	}
	if got := p.claims[uid1].Devices; len(got) != 1 || got[0].UUID != prepared {
		t.Errorf("preparation after the failed prepare: %+v, want gpu-1 as %s", got, prepared)
	}
}
