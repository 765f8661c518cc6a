package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunRefusesBadFlags: a flag value the agent could only fail on later
// (the manager's listeners open after the kubelet plugin registered; a
// negative settle period would drain without waiting) is refused before the
// state directory, NVML or the API server are touched.
func TestRunRefusesBadFlags(t *testing.T) {
	tests := map[string]struct {
		change func(*options)
		want   string
	}{
		"metrics address":          {func(o *options) { o.metricsAddr = "bogus" }, "--metrics-bind-address"},
		"health address":           {func(o *options) { o.healthAddr = ":99999" }, "--health-probe-bind-address"},
		"negative settle period":   {func(o *options) { o.settle = -time.Second }, "--settle-period"},
		"no resync period":         {func(o *options) { o.resync = 0 }, "--resync-period"},
		"pass shorter than settle": {func(o *options) { o.maxPass = time.Second }, "--max-pass-duration"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			o := options{nodeName: "n1", driverName: "mig.miglayout.io", stateDir: state, settle: 5 * time.Second, resync: time.Minute,
				maxPass: 10 * time.Minute, leaseDuration: 40 * time.Second, metricsAddr: ":8081", healthAddr: ":8082"}
			tc.change(&o)
			err := run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want an error naming %s", err, tc.want)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("the state directory was made (%v)", err)
			}
		})
	}
}
