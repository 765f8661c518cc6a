package plugin

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestReleaseOrphanGoneDeviceBeforeBusyOne: a claim's first device is
// gone (destroyed) and a process runs on its second: the claim is not
// released (the gone device does not end the look at the others), or the
// busy device could be prepared for a second claim.
func TestReleaseOrphanGoneDeviceBeforeBusyOne(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const gone, dev = "gpu-0-mig-2g20gb-14-0", "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"a", slices.DefaultDriverName, node, gone}, alloc{"b", slices.DefaultDriverName, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	uuid := preparedUUID(t, p, uid1, dev)
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "2g.20gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.StartProcess(uuid, 1024); err != nil {
		t.Fatal(err)
	}
	_, released, err := p.ReleaseOrphan(t.Context(), uid1, nil)
	if released || !errors.Is(err, ErrOrphanInUse) {
		t.Fatalf("released %v, err %v; want ErrOrphanInUse", released, err)
	}
}

// TestAdminAccessDeviceIsPrepared: a device a claim holds with admin
// access only (a monitoring claim) is among the prepared devices, by name
// and by UUID: the agent never destroys those.
func TestAdminAccessDeviceIsPrepared(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const dev = "gpu-0-mig-3g40gb-9-4"
	c := claim(uid1, "monitor", alloc{"r", slices.DefaultDriverName, node, dev})
	withAdminAccess(c, 0)
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("PreparedDevices %v lacks admin-access device %s", p.PreparedDevices(), dev)
	}
	if u := p.claims[uid1].Devices[0].UUID; !p.PreparedUUIDs().Has(u) {
		t.Errorf("PreparedUUIDs lacks %s", u)
	}
}

// TestLegacyNameOfTwoSharedDevices: the CDI name an older agent gave a
// device of several requests (kept for containers prepared then) makes
// visible the devices every one of those requests holds: both shared
// devices, not the first only, nor a device of one request only.
func TestLegacyNameOfTwoSharedDevices(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const a, b = "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3"
	const x = "gpu-0-mig-2g20gb-14-0"
	c := claim(uid1, "monitor",
		alloc{"work", slices.DefaultDriverName, node, a},
		alloc{"work", slices.DefaultDriverName, node, b},
		alloc{"watch", slices.DefaultDriverName, node, a},
		alloc{"watch", slices.DefaultDriverName, node, b},
		alloc{"watch", slices.DefaultDriverName, node, x},
	)
	withAdminAccess(c, 0, 1, 2, 3, 4)
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	d := cache.GetDevice(cdiDeviceID(slices.DefaultDriverName, uid1, a))
	if d == nil {
		t.Fatal("legacy name missing")
	}
	want := VisibleDevicesEnv + "=" + preparedUUID(t, p, uid1, a) + "," + preparedUUID(t, p, uid1, b)
	if got := strings.Join(d.ContainerEdits.Env, ";"); got != want {
		t.Errorf("legacy env %q, want %q", got, want)
	}
}

// preparedUUID is the NVML UUID device of claim uid was prepared with.
func preparedUUID(t *testing.T, p *Plugin, uid types.UID, device string) string {
	t.Helper()
	for _, d := range p.claims[uid].Devices {
		if d.Device == device {
			return d.UUID
		}
	}
	t.Fatalf("claim %s holds no device %s", uid, device)
	return ""
}
