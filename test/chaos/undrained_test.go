package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// monStep is one step of the monitor's life at time at: a poll of node-a's
// NVML, watch events buffered, or a Checkpoint that replays them.
type monStep func(m *Monitor, at time.Time)

// polled is a poll of node-a: GPU 0 holds a 1g.10gb device at each start
// given, with the UUID given (lost: fallen off the bus), beside a whole GPU 1.
func polled(lost bool, devs map[int]string) monStep {
	return func(m *Monitor, at time.Time) {
		g := migGPU0(devs)
		g.Lost = lost
		m.compare(map[string]nvmlsim.State{poolA: {GPUs: []nvmlsim.GPU{g, {Index: 1, UUID: "GPU-1"}}}}, nil, at)
	}
}

// watched buffers events as the watch delivers them, at at, in revision order
// after every event before.
func watched(events ...event) monStep {
	return func(m *Monitor, at time.Time) {
		for _, e := range events {
			e.rv, e.at = m.lastRV+uint64(len(m.buf))+1, at
			m.buf = append(m.buf, e)
		}
	}
}

func checkpoint(m *Monitor, _ time.Time) { m.Checkpoint() }

// TestMonitorUndrainedDestroyed: a device NVML destroyed is found where the
// publication that took its UUID out of the pool's complete view had it
// without the drain taint, judged from that history however late the watch
// delivers it; a step at index i happens at t0+i s.
func TestMonitorUndrainedDestroyed(t *testing.T) {
	name := migGPU0Name(0)
	x, xDrain := dv{name, "MIG-1", ""}, dv{name, "MIG-1", migslices.DrainTaintKey}
	xAgain := dv{name, "MIG-9", ""}
	y := dv{migGPU0Name(1), "MIG-2", ""}
	gpu1 := dv{migslices.GPUDeviceName(1), "GPU-1", ""}
	on, gone := polled(false, map[int]string{0: "MIG-1", 1: "MIG-2"}), polled(false, map[int]string{1: "MIG-2"})
	found := "device destroyed without drain: node-a/" + name + " (uuid MIG-1, withdrawn from a publication without the drain taint)"
	for tcName, tc := range map[string]struct {
		steps []monStep
		want  []string
	}{
		"drained, withdrawn, destroyed": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, xDrain, y), pub(poolA, 3, y)), gone, checkpoint},
		},
		"withdrawn untainted, destroyed": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), gone, checkpoint},
			want:  []string{found},
		},
		"the watch delivers the drain after the poll that found the device gone": {
			steps: []monStep{on, gone, watched(pub(poolA, 1, x, y), pub(poolA, 2, xDrain, y), pub(poolA, 3, y)), checkpoint},
		},
		"the watch delivers the untainted withdrawal after the poll that found the device gone": {
			steps: []monStep{on, gone, watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), checkpoint},
			want:  []string{found},
		},
		"destroyed while still published: judged once withdrawn": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y)), gone, checkpoint, watched(pub(poolA, 2, y)), checkpoint},
			want:  []string{found},
		},
		"drained, the drain undone, withdrawn untainted, destroyed": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, xDrain, y), pub(poolA, 3, x, y), pub(poolA, 4, y)), gone, checkpoint},
			want:  []string{found},
		},
		"withdrawn untainted, published again drained, withdrawn, destroyed": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), checkpoint,
				watched(pub(poolA, 3, xDrain, y), pub(poolA, 4, y)), gone, checkpoint},
		},
		"published again under its name with another uuid, untainted before": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, xAgain, y)), polled(false, map[int]string{0: "MIG-9", 1: "MIG-2"}), checkpoint},
			want:  []string{found},
		},
		"published again under its name with another uuid, drained before": {
			steps: []monStep{on, watched(pub(poolA, 1, xDrain, y), pub(poolA, 2, xAgain, y)), polled(false, map[int]string{0: "MIG-9", 1: "MIG-2"}), checkpoint},
		},
		"a device destroyed is judged once": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), gone, checkpoint,
				watched(pub(poolA, 3, x, y), pub(poolA, 4, y)), gone, checkpoint},
			want: []string{found},
		},
		// The scheduler never saw it: a GPU instance rolled back with its
		// compute instance by a create that failed after it.
		"never published": {
			steps: []monStep{watched(pub(poolA, 1, y)), on, gone, checkpoint, watched(pub(poolA, 2, y)), checkpoint},
		},
		"made and destroyed between two polls, published untainted": {
			steps: []monStep{gone, watched(pub(poolA, 1, x, y)), checkpoint, gone, watched(pub(poolA, 2, y)), checkpoint},
			want:  []string{found},
		},
		"made and destroyed between two polls, drained": {
			steps: []monStep{gone, watched(pub(poolA, 1, x, y), pub(poolA, 2, xDrain, y)), checkpoint, gone, watched(pub(poolA, 3, y)), checkpoint},
		},
		// Published before the monitor started, for all it knows after NVML
		// lost it.
		"listed at the start, never polled": {
			steps: []monStep{watched(listed(pub(poolA, 1, x, y))), checkpoint, gone, watched(pub(poolA, 2, y)), checkpoint},
		},
		// The list after a watch ended shows none of the publications
		// between, the drain among them.
		"withdrawn in a list after the watch ended": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), listed(pub(poolA, 3, y)), relist(true, poolA+"-slice")), gone, checkpoint},
		},
		"withdrawn untainted after a list": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), listed(pub(poolA, 2, x, y)), relist(true, poolA+"-slice"), pub(poolA, 3, y)), gone, checkpoint},
			want:  []string{found},
		},
		"a whole GPU withdrawn untainted (MIG mode turned on)": {
			steps: []monStep{on, watched(pub(poolA, 1, gpu1, y), pub(poolA, 2, y)), on, checkpoint},
		},
		// The agent cannot touch a GPU off the bus: the recovery destroyed
		// its devices, withdrawn untainted as unreadable.
		"a GPU fallen off the bus, its devices withdrawn untainted, gone at its recovery": {
			steps: []monStep{polled(true, map[int]string{0: "MIG-1"}), watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), gone, checkpoint},
		},
		"a GPU fallen off the bus keeps its devices": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), polled(true, map[int]string{0: "MIG-1"}), checkpoint},
		},
		"a GPU back from the bus, a device destroyed after its recovery": {
			steps: []monStep{polled(true, map[int]string{0: "MIG-1"}), on, watched(pub(poolA, 1, x, y), pub(poolA, 2, y)), gone, checkpoint},
			want:  []string{found},
		},
		// A pool whose slices a kubelet restart deleted is judged by the
		// view from before and the one it comes back with.
		"pool deleted while drained, back without the device": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), pub(poolA, 2, xDrain, y), deleted(pub(poolA, 2, xDrain, y)), pub(poolA, 1, y)), gone, checkpoint},
		},
		"pool deleted while untainted, back drained, withdrawn": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), deleted(pub(poolA, 1, x, y)), pub(poolA, 1, xDrain, y), pub(poolA, 2, y)), gone, checkpoint},
		},
		"pool deleted while untainted, back without the device": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), deleted(pub(poolA, 1, x, y)), pub(poolA, 1, y)), gone, checkpoint},
			want:  []string{found},
		},
		"pool deleted, destroyed while absent, not back yet": {
			steps: []monStep{on, watched(pub(poolA, 1, x, y), deleted(pub(poolA, 1, x, y))), gone, checkpoint},
		},
		// A pool of two slices: the scheduler sees nothing of a generation
		// half written.
		"drained in a generation written whole, withdrawn": {
			steps: []monStep{on, watched(part("s1", 1, 2, x), part("s2", 1, 2, y), part("s1", 2, 2, xDrain), part("s2", 2, 2, y),
				part("s1", 3, 2), part("s2", 3, 2, y)), gone, checkpoint},
		},
		"tainted only in a generation never written whole, withdrawn": {
			steps: []monStep{on, watched(part("s1", 1, 2, x), part("s2", 1, 2, y), part("s1", 2, 2, xDrain),
				part("s1", 3, 2), part("s2", 3, 2, y)), gone, checkpoint},
			want: []string{found},
		},
	} {
		t.Run(tcName, func(t *testing.T) {
			m := newTestMonitor()
			for i, step := range tc.steps {
				step(m, t0.Add(time.Duration(i)*time.Second))
			}
			if got := findingStrings(m.Findings(time.Time{})); !slices.Equal(got, append([]string{}, tc.want...)) {
				t.Errorf("findings\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}
