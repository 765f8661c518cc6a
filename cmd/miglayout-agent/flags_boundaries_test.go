package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// TestRunFlagBoundaries: the values at the edge of what each flag wants. A
// refused value names its flag before the state directory is made; an
// accepted one lets the agent go on to simulated NVML and fail only on the
// kubeconfig, which the test does not give, having taken the lock in the
// state directory.
func TestRunFlagBoundaries(t *testing.T) {
	tests := map[string]struct {
		change func(*options)
		want   string // the flag named, or "" for accepted
	}{
		"no node name":                   {func(o *options) { o.nodeName = "" }, "--node-name"},
		"invalid driver name":            {func(o *options) { o.driverName = "Not_Valid" }, "--driver-name"},
		"node name no Node can have":     {func(o *options) { o.nodeName = "Node_1" }, "--node-name"},
		"lease namespace not a name":     {func(o *options) { o.leaseNamespace = "miglayout_system" }, "--lease-namespace"},
		"lease namespace":                {func(o *options) { o.leaseNamespace = "miglayout-system" }, ""},
		"no settle period":               {func(o *options) { o.settle = 0 }, ""},
		"pass as long as settle":         {func(o *options) { o.settle, o.maxPass = time.Minute, time.Minute }, "--max-pass-duration"},
		"orphan grace 0, the default":    {func(o *options) { o.orphanGrace = 0 }, ""},
		"orphan grace of 1s":             {func(o *options) { o.orphanGrace = time.Second }, ""},
		"orphan grace under 1s":          {func(o *options) { o.orphanGrace = 999 * time.Millisecond }, "--orphaned-claim-grace=999ms: want at least 1s (0: the default, 10m0s)"},
		"negative orphan grace":          {func(o *options) { o.orphanGrace = -time.Minute }, "--orphaned-claim-grace"},
		"health interval 0, the default": {func(o *options) { o.healthInterval = 0 }, ""},
		"health interval of 1s":          {func(o *options) { o.healthInterval = time.Second }, ""},
		"health interval under 1s":       {func(o *options) { o.healthInterval = 999 * time.Millisecond }, "--device-health-interval=999ms: want at least 1s (0: the default, 10s)"},
		"negative health interval":       {func(o *options) { o.healthInterval = -time.Second }, "--device-health-interval"},
		"no ignored Xids":                {func(o *options) { o.ignoredXidList = "" }, ""},
		"ignored Xids with spaces":       {func(o *options) { o.ignoredXidList = "13, 31" }, ""},
		"ignored Xid not a number":       {func(o *options) { o.ignoredXidList = "13,x" }, `--device-health-ignored-xids="13,x": "x" is not an Xid number`},
		"ignored Xid negative":           {func(o *options) { o.ignoredXidList = "-1" }, "--device-health-ignored-xids"},
		"lease duration of 4s":           {func(o *options) { o.leaseDuration = 4 * time.Second }, ""},
		"lease duration under 4s":        {func(o *options) { o.leaseDuration = 3 * time.Second }, "--lease-duration"},
		"lease duration not whole sec":   {func(o *options) { o.leaseDuration = 4500 * time.Millisecond }, "--lease-duration"},
		"lease duration int32 holds":     {func(o *options) { o.leaseDuration = math.MaxInt32 * time.Second }, ""},
		"lease duration over int32":      {func(o *options) { o.leaseDuration = (math.MaxInt32 + 1) * time.Second }, "--lease-duration"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
			state := filepath.Join(t.TempDir(), "state")
			o := options{nodeName: "n1", driverName: "mig.miglayout.io", simulate: "1xA100-SXM4-80GB", stateDir: state, hostRoot: t.TempDir(),
				settle: 5 * time.Second, resync: time.Minute, maxPass: 10 * time.Minute, leaseDuration: 40 * time.Second,
				metricsAddr: ":8081", healthAddr: ":8082"}
			tc.change(&o)
			err := run(context.Background(), o)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "loading kubeconfig") {
					t.Errorf("run: %v, want the flags accepted and the kubeconfig's error", err)
				}
				if _, err := os.Stat(filepath.Join(state, stateLockFile)); err != nil {
					t.Errorf("no state lock in the state directory: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want an error naming %s", err, tc.want)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("the state directory was made (%v)", err)
			}
		})
	}
}

// TestBootID: --boot-id-file is read trimmed; an empty flag, an empty file
// or one that cannot be read give no boot ID (the Xid marks are then kept
// in memory only).
func TestBootID(t *testing.T) {
	dir := t.TempDir()
	write := func(name, contents string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := map[string]struct {
		file string
		want string
	}{
		"as the kernel writes it": {file: write("boot_id", "9f3c1e2a-4b5d-4c6e-8f70-1a2b3c4d5e6f\n"), want: "9f3c1e2a-4b5d-4c6e-8f70-1a2b3c4d5e6f"},
		"empty file":              {file: write("empty", "\n")},
		"missing file":            {file: filepath.Join(dir, "nope")},
		"flag empty":              {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			if got := (options{bootIDFile: tc.file}).bootID(ctx); got != tc.want {
				t.Errorf("bootID() = %q, want %q", got, tc.want)
			}
		})
	}
}
