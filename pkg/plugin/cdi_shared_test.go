package plugin

import (
	goslices "slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

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
	for _, i := range []int{2, 3} {
		c.Status.Allocation.Devices.Results[i].AdminAccess = ptr.To(true)
	}
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
	// The kubelet hands a container the CDI devices of the requests it
	// names, in the order the plugin returned them; the runtime applies
	// their edits in turn, a later value replacing an earlier one.
	visible := func(request string) []string {
		env := ""
		for _, d := range res.Devices {
			if !goslices.Contains(d.Requests, request) {
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
