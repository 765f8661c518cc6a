package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

const healthUID3 = "1f0e9a3c-0000-4000-8000-000000000003"

// TestHealthReport: each device of a prepared claim is reported once,
// Healthy where NVML has it as prepared, Unhealthy with the reason where its
// GPU fell off the bus or needs a reset, where it was destroyed, or made
// again with another UUID, and Unknown where NVML cannot be read at all, or
// its GPU cannot for another reason.
func TestHealthReport(t *testing.T) {
	const mig3 = "gpu-0-mig-1g10gb-19-3"
	d3 := mig.Device{Profile: "1g.10gb", Start: 3}
	driver := slices.DefaultDriverName
	type health struct {
		device  string
		health  kubeletplugin.HealthStatus
		message string // a part of it
	}
	tests := map[string]struct {
		// change changes the node after the claims are prepared, and returns
		// the GPU manager the reporting plugin reads.
		change func(e *env) gpu.Manager
		want   []health
	}{
		"as prepared": {
			change: func(e *env) gpu.Manager { return e.gpus },
			want:   []health{{mig3, kubeletplugin.HealthStatusHealthy, ""}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"GPU 0 fallen off the bus": {
			change: func(e *env) gpu.Manager { return losingGPU0{e.gpus} },
			want: []health{{mig3, kubeletplugin.HealthStatusUnhealthy, "GPU 0 cannot be read"},
				{"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"GPU 0 denied to the agent": {
			change: func(e *env) gpu.Manager { return denyingGPU0{e.gpus} },
			want: []health{{mig3, kubeletplugin.HealthStatusUnknown, "ERROR_NO_PERMISSION"},
				{"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"GPU 0's MIG devices not listed": {
			change: func(e *env) gpu.Manager {
				return failingMIGListing{Manager: e.gpus, err: &gpu.NVMLError{Op: "nvmlDeviceGetMigDeviceHandleByIndex", Return: nvml.ERROR_UNKNOWN}}
			},
			want: []health{{mig3, kubeletplugin.HealthStatusUnknown, "ERROR_UNKNOWN"}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"GPU 0's MIG devices not listed: RESET_REQUIRED": {
			change: func(e *env) gpu.Manager {
				return failingMIGListing{Manager: e.gpus, err: &gpu.NVMLError{Op: "nvmlDeviceGetMigDeviceHandleByIndex", Return: nvml.ERROR_RESET_REQUIRED}}
			},
			want: []health{{mig3, kubeletplugin.HealthStatusUnhealthy, "ERROR_RESET_REQUIRED"}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"GPU 0's MIG devices not listed: INSUFFICIENT_POWER": {
			change: func(e *env) gpu.Manager {
				return failingMIGListing{Manager: e.gpus, err: &gpu.NVMLError{Op: "nvmlDeviceGetMigDeviceHandleByIndex", Return: nvml.ERROR_INSUFFICIENT_POWER}}
			},
			want: []health{{mig3, kubeletplugin.HealthStatusUnhealthy, "ERROR_INSUFFICIENT_POWER"}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"GPU 0's MIG devices not listed: IRQ_ISSUE": {
			change: func(e *env) gpu.Manager {
				return failingMIGListing{Manager: e.gpus, err: &gpu.NVMLError{Op: "nvmlDeviceGetMigDeviceHandleByIndex", Return: nvml.ERROR_IRQ_ISSUE}}
			},
			want: []health{{mig3, kubeletplugin.HealthStatusUnhealthy, "ERROR_IRQ_ISSUE"}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"device destroyed": {
			change: func(e *env) gpu.Manager {
				if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d3); err != nil {
					e.t.Fatal(err)
				}
				return e.gpus
			},
			want: []health{{mig3, kubeletplugin.HealthStatusUnhealthy, "is not in NVML"}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"device made again": {
			change: func(e *env) gpu.Manager {
				if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d3); err != nil {
					e.t.Fatal(err)
				}
				e.createMIG(d3)
				return e.gpus
			},
			want: []health{{mig3, kubeletplugin.HealthStatusUnhealthy, "was made again as MIG-"}, {"gpu-1", kubeletplugin.HealthStatusHealthy, ""}},
		},
		"NVML unreadable": {
			change: func(e *env) gpu.Manager { return unlistable{e.gpus} },
			want: []health{{mig3, kubeletplugin.HealthStatusUnknown, "NVML is down"},
				{"gpu-1", kubeletplugin.HealthStatusUnknown, "NVML is down"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin("")
			// Two claims share the MIG device (admin access), one holds GPU 1.
			shared := claim(uid1, "infer", alloc{"mig", driver, node, mig3})
			admin := claim(uid2, "monitor", alloc{"mig", driver, node, mig3})
			withAdminAccess(admin, 0)
			for _, c := range []*resourceapi.ResourceClaim{shared, admin, claim(healthUID3, "whole", alloc{"g", driver, node, "gpu-1"})} {
				if r := e.prepare(p, c); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			reporter, err := New(Config{NodeName: node, GPUs: tc.change(e), Locks: e.locks, CDIDir: e.cdiDir,
				CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
			if err != nil {
				t.Fatal(err)
			}
			report := reporter.healthReport(e.ctx, time.Minute)
			var got []health
			for _, d := range report.Devices {
				if d.PoolName != node || d.HealthCheckTimeout != time.Minute || d.LastUpdated.IsZero() {
					t.Errorf("device %+v: want pool %s, timeout 1m, a time", d, node)
				}
				h := health{d.DeviceName, d.Health, d.Message}
				for _, w := range tc.want {
					if w.device == d.DeviceName && w.message != "" && strings.Contains(d.Message, w.message) {
						h.message = w.message
					}
				}
				got = append(got, h)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(health{})); diff != "" {
				t.Errorf("health (-want +got):\n%s\nreport %+v", diff, report)
			}
		})
	}
}

// TestWatchHealthStatus: a report at once, another each interval, none
// without a prepared claim's device; the watch ends without error with its
// context.
func TestWatchHealthStatus(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	p.cfg.HealthInterval = 10 * time.Millisecond
	if r := e.prepare(p, claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	go func() { done <- p.WatchHealthStatus(ctx, reports) }()
	for i := range 3 {
		select {
		case r := <-reports:
			if len(r.Devices) != 1 || r.Devices[0].Health != kubeletplugin.HealthStatusHealthy || r.Devices[0].HealthCheckTimeout != 30*time.Second {
				t.Errorf("report %d: %+v, want the device Healthy with the kubelet's 30 s timeout", i, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no report %d", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchHealthStatus = %v, want nil at the end of its context", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchHealthStatus did not return at the end of its context")
	}
}
