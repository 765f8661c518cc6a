package plugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	goslices "slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestCDIVisibleDevices injects the CDI devices a container gets into an OCI
// spec, as a container runtime does, and reads NVIDIA_VISIBLE_DEVICES.
func TestCDIVisibleDevices(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	c := claim(uid1, "pair",
		alloc{"pair", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"},
		alloc{"pair", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"},
		alloc{"big/large", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"},
	)
	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	uuids := map[string]string{}
	migs, err := e.gpus.MIGDevices(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		uuids[m.Profile+"@"+itoa(m.Placement.Start)] = m.UUID
	}
	ids := map[string][]string{}
	for _, d := range r.Devices {
		ids[d.Requests[0]] = append(ids[d.Requests[0]], d.CDIDeviceIDs...)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	// The runtime applies each device's edits in turn (cache.InjectDevices
	// would also stat the device nodes, which this machine lacks).
	// The runtime applies each device's edits in turn (cache.InjectDevices
	// would also stat the device nodes, which this machine lacks); the
	// container's image sets NVIDIA_VISIBLE_DEVICES=all, as nvidia/cuda's
	// do.
	apply := func(devices ...string) *oci.Spec {
		t.Helper()
		spec := &oci.Spec{Process: &oci.Process{Env: []string{VisibleDevicesEnv + "=all"}}}
		for _, id := range devices {
			d := cache.GetDevice(id)
			if d == nil {
				t.Fatalf("CDI cache does not resolve %s", id)
			}
			edits := cdispec.ContainerEdits{Env: d.ContainerEdits.Env, Mounts: d.ContainerEdits.Mounts}
			if err := (&cdiapi.ContainerEdits{ContainerEdits: &edits}).Apply(spec); err != nil {
				t.Fatalf("applying %s: %v", id, err)
			}
		}
		return spec
	}
	pair := uuids["1g.10gb@2"] + "," + uuids["1g.10gb@3"]
	tests := map[string]struct {
		devices []string
		// env is NVIDIA_VISIBLE_DEVICES, mounts the device list the
		// toolkit reads from the mounts (DeviceListMountRoot).
		env, mounts string
	}{
		"request of count 2": {ids["pair"], pair, pair},
		"request of count 2, devices in the other order": {
			[]string{ids["pair"][1], ids["pair"][0]}, pair, uuids["1g.10gb@3"] + "," + uuids["1g.10gb@2"]},
		"subrequest": {ids["big/large"], uuids["3g.40gb@4"], uuids["3g.40gb@4"]},
		"one device": {ids["pair"][:1], pair, uuids["1g.10gb@2"]},
		"whole claim": {append(append([]string{}, ids["pair"]...), ids["big/large"]...),
			uuids["3g.40gb@4"], pair + "," + uuids["3g.40gb@4"]},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := apply(tc.devices...)
			var env []string
			for _, kv := range spec.Process.Env {
				if v, ok := strings.CutPrefix(kv, VisibleDevicesEnv+"="); ok {
					env = append(env, v)
				}
			}
			if diff := cmp.Diff(tc.env, strings.Join(env, ";")); diff != "" {
				t.Errorf("%s (-want +got):\n%s", VisibleDevicesEnv, diff)
			}
			if diff := cmp.Diff(tc.mounts, strings.Join(mountedDeviceList(spec), ",")); diff != "" {
				t.Errorf("device list mounts (-want +got):\n%s", diff)
			}
		})
	}
}

// mountedDeviceList is the device list the NVIDIA container toolkit reads
// from spec's mounts where it accepts them
// (accept-nvidia-visible-devices-as-volume-mounts): the names of the
// /dev/null mounts under DeviceListMountRoot, in mount order.
func mountedDeviceList(spec *oci.Spec) []string {
	var out []string
	for _, m := range spec.Mounts {
		if filepath.Clean(m.Source) != "/dev/null" {
			continue
		}
		if name, ok := strings.CutPrefix(filepath.Clean(m.Destination), DeviceListMountRoot+"/"); ok {
			out = append(out, name)
		}
	}
	return out
}

// TestPrepareDeviceOfTwoRequests: a device two requests of one claim share
// (admin access) is reported once per request, each with its own CDI
// device, and a container naming either request is told exactly that
// request's devices.
func TestPrepareDeviceOfTwoRequests(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const shared = "gpu-0-mig-1g10gb-19-3"
	c := claim(uid1, "monitor",
		alloc{"work", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"},
		alloc{"work", slices.DefaultDriverName, node, shared},
		alloc{"watch", slices.DefaultDriverName, node, shared},
		alloc{"watch", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"},
	)
	withAdminAccess(c, 2, 3)
	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	id := func(d string) []string { return []string{"k8s.mig.miglayout.io/claim=" + uid1 + "-" + d} }
	want := []kubeletplugin.Device{
		{Requests: []string{"work"}, PoolName: node, DeviceName: "gpu-0-mig-1g10gb-19-2", CDIDeviceIDs: id("gpu-0-mig-1g10gb-19-2")},
		{Requests: []string{"work"}, PoolName: node, DeviceName: shared, CDIDeviceIDs: id(shared + "_work")},
		{Requests: []string{"watch"}, PoolName: node, DeviceName: shared, CDIDeviceIDs: id(shared + "_watch")},
		{Requests: []string{"watch"}, PoolName: node, DeviceName: "gpu-0-mig-3g40gb-9-4", CDIDeviceIDs: id("gpu-0-mig-3g40gb-9-4")},
	}
	if diff := cmp.Diff(want, r.Devices); diff != "" {
		t.Errorf("prepared devices (-want +got):\n%s", diff)
	}
	cache, uuid := specsAndUUIDs(t, e)
	visible := func(request string) []string { return visibleTo(t, cache, r.Devices, request) }
	sorted := func(s ...string) []string { goslices.Sort(s); return s }
	for request, wantUUIDs := range map[string][]string{
		"work":  sorted(uuid["1g.10gb@2"], uuid["1g.10gb@3"]),
		"watch": sorted(uuid["1g.10gb@3"], uuid["3g.40gb@4"]),
	} {
		if diff := cmp.Diff(wantUUIDs, visible(request)); diff != "" {
			t.Errorf("container naming request %s: %s (-want +got):\n%s", request, VisibleDevicesEnv, diff)
		}
	}
	// A container naming the whole claim is told the devices of one of its
	// requests (the last applied), never a device outside the claim.
	for _, u := range visible("") {
		if !goslices.Contains([]string{uuid["1g.10gb@2"], uuid["1g.10gb@3"], uuid["3g.40gb@4"]}, u) {
			t.Errorf("container naming the claim is told %s, not a device of the claim", u)
		}
	}
}

// TestPrepareDeviceOfARequestAndASubrequest: a device shared (admin
// access) by a request and a subrequest of another request gets one CDI
// device per parent request, named after the parent ("_" + "work", never
// "_work/large", which is no CDI device name), and a container naming the
// parent request is told that request's devices.
func TestPrepareDeviceOfARequestAndASubrequest(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const shared = "gpu-0-mig-1g10gb-19-3"
	c := claim(uid1, "monitor",
		alloc{"work/large", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"},
		alloc{"work/large", slices.DefaultDriverName, node, shared},
		alloc{"watch", slices.DefaultDriverName, node, shared},
	)
	withAdminAccess(c, 1, 2)
	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	id := func(d string) []string { return []string{"k8s.mig.miglayout.io/claim=" + uid1 + "-" + d} }
	want := []kubeletplugin.Device{
		{Requests: []string{"work/large"}, PoolName: node, DeviceName: "gpu-0-mig-3g40gb-9-4", CDIDeviceIDs: id("gpu-0-mig-3g40gb-9-4")},
		{Requests: []string{"work/large"}, PoolName: node, DeviceName: shared, CDIDeviceIDs: id(shared + "_work")},
		{Requests: []string{"watch"}, PoolName: node, DeviceName: shared, CDIDeviceIDs: id(shared + "_watch")},
	}
	if diff := cmp.Diff(want, r.Devices); diff != "" {
		t.Errorf("prepared devices (-want +got):\n%s", diff)
	}
	cache, uuid := specsAndUUIDs(t, e)
	sorted := func(s ...string) []string { goslices.Sort(s); return s }
	if diff := cmp.Diff(sorted(uuid["3g.40gb@4"], uuid["1g.10gb@3"]), visibleTo(t, cache, r.Devices, "work/large")); diff != "" {
		t.Errorf("container naming request work: %s (-want +got):\n%s", VisibleDevicesEnv, diff)
	}
}

// TestHandleErrorPassesDroppedFields: the helper's report that the API
// server dropped fields of a slice reaches Config.OnDroppedFields, wrapped
// or not; other errors do not.
func TestHandleErrorPassesDroppedFields(t *testing.T) {
	var got []*resourceslice.DroppedFieldsError
	p := &Plugin{cfg: Config{OnDroppedFields: func(e *resourceslice.DroppedFieldsError) { got = append(got, e) }}}
	report := &resourceslice.DroppedFieldsError{PoolName: "n1",
		DesiredSlice: &resourceapi.ResourceSlice{}, ActualSlice: &resourceapi.ResourceSlice{}}
	ctx := context.Background()
	p.HandleError(ctx, fmt.Errorf("publishing: %w", report), "publishing ResourceSlices")
	p.HandleError(ctx, errors.New("some other trouble"), "publishing ResourceSlices")
	if len(got) != 1 || got[0] != report {
		t.Errorf("OnDroppedFields got %v, want the one report", got)
	}
}

// visibleTo is NVIDIA_VISIBLE_DEVICES, sorted, in a container naming
// request ("" for the whole claim) of a claim prepared as devices: the
// kubelet hands the container the CDI devices of the entries naming the
// request, in the order the plugin returned them, and the runtime applies
// their edits in turn, a later value replacing an earlier one.
func visibleTo(t *testing.T, cache *cdiapi.Cache, devices []kubeletplugin.Device, request string) []string {
	t.Helper()
	env := ""
	for _, d := range devices {
		if request != "" && !goslices.Contains(d.Requests, request) {
			continue
		}
		cd := cache.GetDevice(d.CDIDeviceIDs[0])
		if cd == nil {
			t.Fatalf("CDI cache does not resolve %s", d.CDIDeviceIDs[0])
		}
		for _, kv := range cd.ContainerEdits.Env {
			if v, ok := strings.CutPrefix(kv, VisibleDevicesEnv+"="); ok {
				env = v
			}
		}
	}
	got := strings.Split(env, ",")
	goslices.Sort(got)
	return got
}

// specsAndUUIDs reads the CDI specs e's plugin wrote, failing t on a spec
// the CDI library refuses, and NVML's UUIDs of GPU 0's MIG devices by
// profile@start ("1g.10gb@3").
func specsAndUUIDs(t *testing.T, e *env) (*cdiapi.Cache, map[string]string) {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) != 0 {
		t.Fatalf("CDI cache errors: %v", errs)
	}
	migs, err := e.gpus.MIGDevices(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	uuid := map[string]string{}
	for _, m := range migs {
		uuid[m.Profile+"@"+itoa(m.Placement.Start)] = m.UUID
	}
	return cache, uuid
}
