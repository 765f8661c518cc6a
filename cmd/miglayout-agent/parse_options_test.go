package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// TestParseOptionsDevRoot: the agent checks and makes device nodes under
// /dev by default; a simulated node (--simulate), whose GPUs have no
// device nodes, under none unless --dev-root is given.
func TestParseOptionsDevRoot(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"real GPUs":                      {nil, "/dev"},
		"simulated GPUs":                 {[]string{"--simulate=1xA100-SXM4-80GB"}, ""},
		"simulated GPUs with a dev root": {[]string{"--simulate=1xA100-SXM4-80GB", "--dev-root=/host/dev"}, "/host/dev"},
		"real GPUs with a dev root":      {[]string{"--dev-root=/host/dev"}, "/host/dev"},
	} {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args, pflag.ContinueOnError)
			if err != nil {
				t.Fatal(err)
			}
			if o.devRoot != tc.want {
				t.Errorf("dev root %q, want %q", o.devRoot, tc.want)
			}
		})
	}
}

// TestParseOptionsDefaults: the defaults the README and the chart document.
func TestParseOptionsDefaults(t *testing.T) {
	t.Setenv("NODE_NAME", "gpu-node-1")
	o, err := parseOptions(nil, pflag.ContinueOnError)
	if err != nil {
		t.Fatal(err)
	}
	type defaults struct {
		NodeName, StateDir, MetricsAddr, HealthAddr string
		Settle, Resync, LeaseDuration, MaxPass      time.Duration
	}
	got := defaults{o.nodeName, o.stateDir, o.metricsAddr, o.healthAddr, o.settle, o.resync, o.leaseDuration, o.maxPass}
	want := defaults{"gpu-node-1", "/var/lib/miglayout", ":8081", ":8082", 5 * time.Second, time.Minute, 40 * time.Second, 10 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if _, err := parseOptions([]string{"--no-such-flag"}, pflag.ContinueOnError); err == nil {
		t.Error("an unknown flag was accepted")
	}
}

// TestParseOptionsRefusesArguments: a value left over after the flags is
// refused, naming it: "--device-binding-conditions false" (a boolean flag
// takes its value after "=") would turn binding conditions on.
func TestParseOptionsRefusesArguments(t *testing.T) {
	for name, args := range map[string][]string{
		"a boolean flag's separate value": {"--device-binding-conditions", "false"},
		"a stray word between flags":      {"--metrics-secure", "no", "--lease-namespace=miglayout"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseOptions(args, pflag.ContinueOnError)
			if err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
				t.Errorf("parseOptions(%q): %v, want the leftover arguments refused", args, err)
			}
		})
	}
	if _, err := parseOptions([]string{"--device-binding-conditions=false"}, pflag.ContinueOnError); err != nil {
		t.Errorf("--device-binding-conditions=false: %v", err)
	}
}

// TestParseOptionsDriverDevDirs: device nodes are looked for in a driver
// root's dev directory only where the driver root is mounted and is not
// the host's own (the GPU Operator's containerised driver); a relative
// host path is refused.
func TestParseOptionsDriverDevDirs(t *testing.T) {
	for name, tc := range map[string]struct {
		args                     []string
		driverDev, hostDriverDev string
	}{
		"defaults": {nil, "", ""},
		"a driver installed on the host": {[]string{"--nvidia-driver-root=/driver-root", "--host-nvidia-driver-root=/"},
			"", ""},
		"the GPU Operator's driver": {[]string{"--nvidia-driver-root=/driver-root", "--host-nvidia-driver-root=/run/nvidia/driver"},
			"/driver-root/dev", "/run/nvidia/driver/dev"},
		"the driver root not mounted": {[]string{"--host-nvidia-driver-root=/run/nvidia/driver"}, "", ""},
		"simulated GPUs": {[]string{"--simulate=1xA100-SXM4-80GB", "--nvidia-driver-root=/driver-root", "--host-nvidia-driver-root=/run/nvidia/driver"},
			"", ""},
	} {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args, pflag.ContinueOnError)
			if err != nil {
				t.Fatal(err)
			}
			if d, h := o.driverDevDirs(); d != tc.driverDev || h != tc.hostDriverDev {
				t.Errorf("driverDevDirs() = %q, %q; want %q, %q", d, h, tc.driverDev, tc.hostDriverDev)
			}
		})
	}
	if _, err := parseOptions([]string{"--host-nvidia-driver-root=run/nvidia/driver"}, pflag.ContinueOnError); err == nil ||
		!strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative --host-nvidia-driver-root: %v, want an error asking for an absolute path", err)
	}
}

// TestParseOptionsMaxPass: --max-pass-duration defaults to 10m, or to the
// settle period plus 5m where that is longer, so that a long settle period
// leaves a pass that drains the time its other waits take; a value given is
// kept.
func TestParseOptionsMaxPass(t *testing.T) {
	tests := map[string]struct {
		args []string
		want time.Duration
	}{
		"default":             {nil, 10 * time.Minute},
		"short settle period": {[]string{"--settle-period=1m"}, 10 * time.Minute},
		"long settle period":  {[]string{"--settle-period=9m30s"}, 14*time.Minute + 30*time.Second},
		"given":               {[]string{"--settle-period=9m30s", "--max-pass-duration=20m"}, 20 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args, pflag.ContinueOnError)
			if err != nil {
				t.Fatal(err)
			}
			if o.maxPass != tc.want {
				t.Errorf("max pass %s, want %s", o.maxPass, tc.want)
			}
		})
	}
}
