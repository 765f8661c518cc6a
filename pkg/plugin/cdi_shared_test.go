package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	goslices "slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestVisibleDevicesOfRequestWhoseDevicesAllShared: a claim whose workload
// request "train" has two MIG devices, each of which one of two monitoring
// requests (admin access) shares. A container naming one request is told
// exactly that request's devices (README: NVIDIA_VISIBLE_DEVICES lists every
// device of the request a container names): "train" both devices,
// "watch-a" and "watch-b" their one device each.
func TestVisibleDevicesOfRequestWhoseDevicesAllShared(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const x, r = "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3"
	c := claim(uid1, "monitored",
		alloc{"train", slices.DefaultDriverName, node, x},
		alloc{"train", slices.DefaultDriverName, node, r},
		alloc{"watch-a", slices.DefaultDriverName, node, x},
		alloc{"watch-b", slices.DefaultDriverName, node, r},
	)
	withAdminAccess(c, 2, 3)
	res := e.prepare(p, c)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	migs, err := e.gpus.MIGDevices(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	uuid := map[string]string{}
	for _, m := range migs {
		uuid[m.Profile+"@"+itoa(m.Placement.Start)] = m.UUID
	}
	visible := func(request string) []string { return visibleTo(t, cache, res.Devices, request) }
	sorted := func(s ...string) []string { goslices.Sort(s); return s }
	tests := map[string][]string{
		"train":   sorted(uuid["1g.10gb@2"], uuid["1g.10gb@3"]),
		"watch-a": {uuid["1g.10gb@2"]},
		"watch-b": {uuid["1g.10gb@3"]},
	}
	for request, want := range tests {
		t.Run(request, func(t *testing.T) {
			if diff := cmp.Diff(want, visible(request)); diff != "" {
				t.Errorf("container naming request %s: %s (-want +got):\n%s", request, VisibleDevicesEnv, diff)
			}
		})
	}
}

// TestPrepareAgainRewritesSpecOfOlderNaming: a claim prepared by an older
// version, whose CDI spec names a device two requests share once (no
// per-request CDI devices), is answered, when the kubelet asks again after
// the agent's upgrade, with CDI device IDs its spec on disk resolves.
func TestPrepareAgainRewritesSpecOfOlderNaming(t *testing.T) {
	e := newEnv(t)
	const shared = sharedDevice
	c := claim(uid1, "monitor",
		alloc{"work", slices.DefaultDriverName, node, shared},
		alloc{"watch", slices.DefaultDriverName, node, shared},
	)
	withAdminAccess(c, 1)
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	writeOlderNamingSpec(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)), cdiDeviceName(uid1, shared))

	r := e.prepare(e.plugin(""), c) // the upgraded agent, asked again
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Devices {
		for _, id := range d.CDIDeviceIDs {
			if cache.GetDevice(id) == nil {
				t.Errorf("CDI device %s (requests %v) is in no spec on disk", id, d.Requests)
			}
		}
	}
}

// TestPrepareAgainLeavesAnUpToDateSpec: the kubelet asking again for a
// claim whose CDI spec on disk is what the plugin would write finds the
// file untouched (a prepare again does not depend on /var/run taking a
// write), while a spec gone is written again.
func TestPrepareAgainLeavesAnUpToDateSpec(t *testing.T) {
	e := newEnv(t)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	path := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(past) {
		t.Errorf("the up-to-date spec was written again (modified %v)", fi.ModTime())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the spec gone is not written again: %v", err)
	}
}

// TestOlderCDINameOfSharedDeviceStillResolves: a claim whose device two
// requests share, prepared by a version that answered the kubelet with one
// CDI device named after the device alone, is held by the kubelet under
// that ID for its running pod (the kubelet does not prepare it again). An
// upgraded agent that rewrites the spec (its first pass's refresh, or a
// spec removed from the CDI directory and restored) keeps that ID
// resolvable, telling the container the shared device.
func TestOlderCDINameOfSharedDeviceStillResolves(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"spec of the older naming": func(t *testing.T, path string) {
			writeOlderNamingSpec(t, path, cdiDeviceName(uid1, sharedDevice))
		},
		"spec removed": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			c := claim(uid1, "monitor",
				alloc{"work", slices.DefaultDriverName, node, sharedDevice},
				alloc{"watch", slices.DefaultDriverName, node, sharedDevice},
			)
			withAdminAccess(c, 1)
			if r := e.prepare(e.plugin(""), c); r.Err != nil {
				t.Fatal(r.Err)
			}
			damage(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))

			p := e.plugin("") // the upgraded agent starting
			if failed := p.RestoreSpecs(e.ctx); len(failed) > 0 {
				t.Fatal(failed)
			}
			if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
				t.Fatal(failed)
			}
			cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
			if err != nil {
				t.Fatal(err)
			}
			held := cdiDeviceID(slices.DefaultDriverName, uid1, sharedDevice)
			d := cache.GetDevice(held)
			if d == nil {
				t.Fatalf("CDI device %s, which the kubelet holds for the running pod, is in no spec on disk", held)
			}
			migs, err := e.gpus.MIGDevices(e.ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			var uuid string
			for _, m := range migs {
				if m.Profile == "1g.10gb" && m.Placement.Start == 3 {
					uuid = m.UUID
				}
			}
			if diff := cmp.Diff([]string{VisibleDevicesEnv + "=" + uuid}, d.ContainerEdits.Env); diff != "" {
				t.Errorf("environment of %s (-want +got):\n%s", held, diff)
			}
		})
	}
}

// sharedDevice is the MIG device two requests of a claim share in the tests
// of shared devices' CDI names.
const sharedDevice = "gpu-0-mig-1g10gb-19-3"

// writeOlderNamingSpec rewrites the CDI spec at path as a version before
// per-request CDI devices wrote it for a claim whose one device several
// requests share: one CDI device, named name (the device's own), with the
// first device's edits.
func writeOlderNamingSpec(t *testing.T, path, name string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	spec.Devices = []cdispec.Device{{Name: name, ContainerEdits: spec.Devices[0].ContainerEdits}}
	if data, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
