package clustertest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
)

// Snapshot is the state of the node's simulated GPUs now.
func (e *Env) Snapshot(t testing.TB, node string) nvmlsim.State {
	t.Helper()
	sim, err := e.Cluster.Sim(node)
	if err != nil {
		t.Fatal(err)
	}
	return sim.Snapshot()
}

// Layouts returns each GPU's layout in canonical text form ("-" for MIG off).
func Layouts(st nvmlsim.State) []string {
	var out []string
	for _, g := range st.GPUs {
		if !g.MIGCurrent {
			out = append(out, "-")
			continue
		}
		out = append(out, g.Layout().String())
	}
	return out
}

// NVMLDevices is what the node's pool must publish according to NVML: device name → UUID
// (none of a lost GPU, which NVML cannot read).
func NVMLDevices(st nvmlsim.State) map[string]string {
	out := map[string]string{}
	for _, g := range st.GPUs {
		if g.Lost {
			continue
		}
		if !g.MIGCurrent {
			out[migslices.GPUDeviceName(g.Index)] = g.UUID
			continue
		}
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				out[migslices.MIGDeviceName(g.Index, gi.Profile, gi.ProfileID, gi.Placement.Start)] = ci.UUID
			}
		}
	}
	return out
}

// ProcessesOn returns the simulated processes on the device with the given UUID.
func ProcessesOn(st nvmlsim.State, uuid string) []nvmlsim.Process {
	var out []nvmlsim.Process
	for _, p := range st.Processes {
		if p.DeviceUUID == uuid {
			out = append(out, p)
		}
	}
	return out
}

// PublishedDevice is a device of a node's pool.
type PublishedDevice struct {
	UUID    string // its uuid attribute
	Tainted bool   // it has the drain taint
	Xid     string // the value of its Xid taint, "" without one
	Device  resourceapi.Device
}

// PoolDevices lists the devices the newest generation of the node's pool publishes, by
// name (the scheduler ignores older generations too).
func (e *Env) PoolDevices(ctx context.Context, node string) (map[string]PublishedDevice, error) {
	list, err := e.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + cluster.Driver})
	if err != nil {
		return nil, err
	}
	out := map[string]PublishedDevice{}
	maxGen := int64(0)
	for _, s := range list.Items {
		maxGen = max(maxGen, s.Spec.Pool.Generation)
	}
	for _, s := range list.Items {
		if s.Spec.Pool.Generation != maxGen {
			continue
		}
		for _, d := range s.Spec.Devices {
			pd := PublishedDevice{Device: d}
			pd.Tainted, pd.Xid = migslices.TaintsOf(d)
			if a, ok := d.Attributes[migslices.AttrUUID]; ok && a.StringValue != nil {
				pd.UUID = *a.StringValue
			}
			out[d.Name] = pd
		}
	}
	return out, nil
}

// WaitPoolMatchesNVML waits (30s at most) until the node's pool publishes exactly the
// devices NVML has, with their UUIDs and no drain taint (invariant 2), and returns them
// (NVMLDevices).
func (e *Env) WaitPoolMatchesNVML(t testing.TB, ctx context.Context, node string) map[string]string {
	t.Helper()
	var want map[string]string
	Poll(t, ctx, 30*time.Second, "the pool of "+node+" to equal NVML", func(ctx context.Context) (bool, string) {
		want = NVMLDevices(e.Snapshot(t, node))
		got, err := e.PoolDevices(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		var diff []string
		for name, uuid := range want {
			pd, ok := got[name]
			switch {
			case !ok:
				diff = append(diff, "missing "+name)
			case pd.UUID != uuid:
				diff = append(diff, fmt.Sprintf("%s has uuid %s, NVML %s", name, pd.UUID, uuid))
			case pd.Tainted:
				diff = append(diff, name+" is still tainted")
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				diff = append(diff, "phantom "+name)
			}
		}
		sort.Strings(diff)
		return len(diff) == 0, strings.Join(diff, "; ")
	})
	return want
}
