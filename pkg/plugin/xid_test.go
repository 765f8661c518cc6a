package plugin

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/slices"
)

const (
	xidMIG1g = "gpu-0-mig-1g10gb-19-3"
	xidMIG3g = "gpu-0-mig-3g40gb-9-4"
	xidMIG2g = "gpu-0-mig-2g20gb-14-0"
	xidUID4  = "1f0e9a3c-0000-4000-8000-00000000a004"
)

// xidInjection is one Xid a test injects: on GPU gpu, attributable to the
// GPU instance of the MIG device at start gi (-1: the whole GPU).
type xidInjection struct {
	gpu  int
	code uint64
	gi   int
}

// TestXidHealth: an Xid critical error makes the prepared devices it hits
// Unhealthy, reported at once (the interval is an hour): those of its GPU
// instance, or every device of the GPU for one that is not attributable to
// an instance, made before or after it; an ignored Xid changes nothing; a
// device made again after its GPU instance's Xid is Healthy.
func TestXidHealth(t *testing.T) {
	healthy, unhealthy := kubeletplugin.HealthStatusHealthy, kubeletplugin.HealthStatusUnhealthy
	tests := map[string]struct {
		ignored []uint64
		xids    []xidInjection
		// remake destroys and creates again the 2g.20gb (free when the
		// Xids come), then prepares a claim on it.
		remake bool
		want   map[string]kubeletplugin.HealthStatus
	}{
		"Xid on the 3g.40gb's GPU instance": {
			xids: []xidInjection{{0, 94, 4}},
			want: map[string]kubeletplugin.HealthStatus{xidMIG1g: healthy, xidMIG3g: unhealthy, "gpu-1": healthy},
		},
		"Xid on GPU 0 as a whole": {
			xids: []xidInjection{{0, 48, -1}},
			want: map[string]kubeletplugin.HealthStatus{xidMIG1g: unhealthy, xidMIG3g: unhealthy, "gpu-1": healthy},
		},
		"Xid on GPU 1, MIG mode off": {
			xids: []xidInjection{{1, 79, -1}},
			want: map[string]kubeletplugin.HealthStatus{xidMIG1g: healthy, xidMIG3g: healthy, "gpu-1": unhealthy},
		},
		"application's Xid ignored": {
			xids: []xidInjection{{0, 13, -1}, {0, 31, 4}, {1, 48, -1}},
			want: map[string]kubeletplugin.HealthStatus{xidMIG1g: healthy, xidMIG3g: healthy, "gpu-1": unhealthy},
		},
		"nothing ignored": {
			ignored: []uint64{},
			xids:    []xidInjection{{0, 13, -1}},
			want:    map[string]kubeletplugin.HealthStatus{xidMIG1g: unhealthy, xidMIG3g: unhealthy, "gpu-1": healthy},
		},
		"device made again after its GPU instance's Xid": {
			xids:   []xidInjection{{0, 94, 0}},
			remake: true,
			want:   map[string]kubeletplugin.HealthStatus{xidMIG1g: healthy, xidMIG3g: healthy, "gpu-1": healthy, xidMIG2g: healthy},
		},
		"device made after its GPU's Xid": {
			xids:   []xidInjection{{0, 48, -1}},
			remake: true,
			want:   map[string]kubeletplugin.HealthStatus{xidMIG1g: unhealthy, xidMIG3g: unhealthy, "gpu-1": healthy, xidMIG2g: unhealthy},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			giAt := map[int]int{}
			migs, err := e.gpus.MIGDevices(e.ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range migs {
				giAt[d.Placement.Start] = d.GIID
			}
			reg := prometheus.NewRegistry()
			var woken atomic.Int32
			p, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
				HostRoot: e.hostRoot, HealthInterval: time.Hour, Xids: e.gpus, IgnoredXids: tc.ignored, Registerer: reg,
				OnXid: func(context.Context, gpu.Xid, []string) { woken.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			driver := slices.DefaultDriverName
			for _, c := range []*resourceapi.ResourceClaim{claim(uid1, "small", alloc{"mig", driver, node, xidMIG1g}),
				claim(uid2, "large", alloc{"mig", driver, node, xidMIG3g}), claim(healthUID3, "whole", alloc{"g", driver, node, "gpu-1"})} {
				if r := e.prepare(p, c); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			reports := make(chan kubeletplugin.DeviceHealthReport)
			go func() { _ = p.WatchHealthStatus(ctx, reports) }()
			if r := <-reports; len(r.Devices) != 3 {
				t.Fatalf("first report %+v, want 3 devices", r)
			}
			watched := make(chan struct{})
			go func() { _ = p.WatchXids(ctx); close(watched) }()
			// The watch delivers only Xids that come after it registered:
			// inject them again until a report follows.
			deadline := time.After(20 * time.Second)
		wait:
			for {
				for _, x := range tc.xids {
					gi := -1
					if x.gi >= 0 {
						gi = giAt[x.gi]
					}
					if err := e.sim.InjectXid(x.gpu, x.code, gi, -1); err != nil {
						t.Fatal(err)
					}
				}
				select {
				case <-reports:
					break wait
				case <-time.After(100 * time.Millisecond):
				case <-deadline:
					t.Fatal("no report within 20s of the Xids: the interval is an hour")
				}
			}
			// The watch ends before the device is made again: an Xid
			// injected again meanwhile and delivered after would hit the
			// new device, which may get the old GPU instance's ID.
			cancel()
			<-watched
			if tc.remake {
				d := mig.Device{Profile: "2g.20gb", Start: 0}
				if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
					t.Fatal(err)
				}
				e.createMIG(d)
				if r := e.prepare(p, claim(xidUID4, "remade", alloc{"mig", driver, node, xidMIG2g})); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			got := map[string]kubeletplugin.HealthStatus{}
			for _, d := range p.healthReport(e.ctx, time.Minute).Devices {
				got[d.DeviceName] = d.Health
				if d.Health == unhealthy && !strings.Contains(d.Message, "Xid ") {
					t.Errorf("device %s Unhealthy with %q, want the Xid named", d.DeviceName, d.Message)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("health after the Xids (-want +got):\n%s", diff)
			}
			// The agent publishes the same devices tainted (XidOf), woken
			// by OnXid.
			for _, c := range p.PreparedClaims() {
				for _, d := range c.Devices {
					if _, hit := p.XidOf(d.GPUIndex, d.GPUUUID, d.UUID); hit != (tc.want[d.Device] == unhealthy) {
						t.Errorf("XidOf(%s) = %t, want %t", d.Device, hit, !hit)
					}
				}
			}
			if woken.Load() == 0 {
				t.Error("OnXid not called")
			}
			ignored := testutil.ToFloat64(p.metrics.xids.WithLabelValues("13", "ignored"))
			if tc.ignored == nil && tc.xids[0].code == 13 && ignored == 0 {
				t.Errorf("miglayout_plugin_xid_errors_total{xid=13,action=ignored} = 0, want the ignored Xid counted")
			}
		})
	}
}

// TestXidOnGPUInstanceWithoutDevice: an Xid of a GPU instance that has no
// MIG device (no compute instance) marks nothing, is counted unattributed,
// and tells the agent nothing.
func TestXidOnGPUInstanceWithoutDevice(t *testing.T) {
	e := newEnv(t)
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "1g.10gb", Start: 2}); err != nil {
		t.Fatal(err)
	}
	gi := gputest.CreateGPUInstance(t, e.sim, 0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2, 1)
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	var woken atomic.Int32
	reg := prometheus.NewRegistry()
	p, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, Xids: e.gpus, Registerer: reg, OnXid: func(context.Context, gpu.Xid, []string) { woken.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go func() { _ = p.WatchXids(ctx) }()
	deadline := time.After(20 * time.Second)
	for testutil.ToFloat64(p.metrics.xids.WithLabelValues("48", "unattributed")) == 0 {
		if err := e.sim.InjectXid(0, 48, int(giInfo.Id), -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the Xid was not counted unattributed within 20s")
		}
	}
	if woken.Load() != 0 {
		t.Error("OnXid called for an Xid that marked nothing")
	}
	migs, err := e.gpus.MIGDevices(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range migs {
		if _, hit := p.XidOf(0, "", d.UUID); hit {
			t.Errorf("device %s marked", d.Device())
		}
	}
}
