package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// simState builds the NVML state of a node whose GPUs (of model) hold layouts, one per
// GPU ("-": MIG off), through the NVML manager the agent uses.
func simState(t *testing.T, model string, layouts ...string) (*nvmlsim.Sim, nvmlsim.State) {
	t.Helper()
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: fmt.Sprintf("%dx%s", len(layouts), model)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewNVML(sim, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, l := range layouts {
		if l == "-" {
			continue
		}
		if _, err := m.SetMIGMode(ctx, i, true); err != nil {
			t.Fatal(err)
		}
		for _, d := range mig.MustParseLayout(l) {
			if _, err := m.CreateMIGDevice(ctx, i, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	return sim, sim.Snapshot()
}

// devName is the published name of the device "profile@start" of GPU idx in st ("" for
// the whole GPU).
func devName(t *testing.T, st nvmlsim.State, idx int, dev string) string {
	t.Helper()
	for _, g := range st.GPUs {
		if g.Index != idx {
			continue
		}
		if dev == "" {
			return migslices.GPUDeviceName(idx)
		}
		for _, gi := range g.GPUInstances {
			if (mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}).String() == dev {
				for name, uuid := range clustertest.NVMLDevices(st) {
					if len(gi.ComputeInstances) > 0 && uuid == gi.ComputeInstances[0].UUID {
						return name
					}
				}
			}
		}
	}
	t.Fatalf("no device %q on gpu %d", dev, idx)
	return ""
}

func migSpec(idx int32, layout string) v1alpha1.GPUSpec {
	if layout == "-" {
		return v1alpha1.GPUSpec{Index: idx}
	}
	return v1alpha1.GPUSpec{Index: idx, MIGEnabled: true, Layout: layout}
}

func readyStatus(idx int32, layout string) v1alpha1.GPUStatus {
	if layout == "-" {
		return v1alpha1.GPUStatus{Index: idx, Phase: v1alpha1.PhaseReady}
	}
	return v1alpha1.GPUStatus{Index: idx, Phase: v1alpha1.PhaseReady, MIGEnabled: true, MIGPending: true, Layout: layout}
}

// TestGPUsConverged: a node converges where its spec lists every GPU and each is Ready
// with the layout and mode asked for or, where blocking is allowed, Blocked (DeviceInUse)
// on a change that destroys a device in use; anything else is not converged.
func TestGPUsConverged(t *testing.T) {
	const lA, lB = "3g.40gb@0,3g.40gb@4", "7g.80gb@0"
	_, st := simState(t, a100, lA, lB)
	_, race := simState(t, a100, raceFrom)
	blocked := v1alpha1.GPUStatus{Index: 0, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, MIGEnabled: true, MIGPending: true, Layout: raceFrom}
	reset := blocked
	reset.Reason = v1alpha1.ReasonResetRequired
	pendingOff := readyStatus(0, lA)
	pendingOff.MIGPending = false
	migOff := readyStatus(0, lA)
	migOff.MIGEnabled = false
	for name, tc := range map[string]struct {
		st           nvmlsim.State
		specs        []v1alpha1.GPUSpec
		status       []v1alpha1.GPUStatus
		allowBlocked bool
		inUse        []string // devices of gpu 0, as "profile@start"
		inUseErr     error
		want         bool
	}{
		"each GPU Ready with its own layout": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA), migSpec(1, lB)},
			status: []v1alpha1.GPUStatus{readyStatus(0, lA), readyStatus(1, lB)}, want: true},
		"status listed in the other order": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA), migSpec(1, lB)},
			status: []v1alpha1.GPUStatus{readyStatus(1, lB), readyStatus(0, lA)}, want: true},
		"spec lists fewer GPUs than NVML": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA)},
			status: []v1alpha1.GPUStatus{readyStatus(0, lA)}},
		"spec lists more GPUs than NVML": {st: race, specs: []v1alpha1.GPUSpec{migSpec(0, raceFrom), migSpec(1, raceFrom)},
			status: []v1alpha1.GPUStatus{readyStatus(0, raceFrom), readyStatus(1, raceFrom)}},
		"a GPU without status": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA), migSpec(1, lB)},
			status: []v1alpha1.GPUStatus{readyStatus(1, lB)}},
		"Ready with another layout": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA), migSpec(1, lB)},
			status: []v1alpha1.GPUStatus{readyStatus(0, lA), readyStatus(1, lA)}},
		"Ready, MIG on but the mode pending off": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA), migSpec(1, lB)},
			status: []v1alpha1.GPUStatus{pendingOff, readyStatus(1, lB)}},
		"Ready, MIG off but pending on": {st: st, specs: []v1alpha1.GPUSpec{migSpec(0, lA), migSpec(1, lB)},
			status: []v1alpha1.GPUStatus{migOff, readyStatus(1, lB)}},
		"Blocked on an allocated device it must destroy": {st: race, specs: []v1alpha1.GPUSpec{migSpec(0, raceTo)},
			status: []v1alpha1.GPUStatus{blocked}, allowBlocked: true, inUse: []string{"1g.10gb@6"}, want: true},
		"Blocked on an allocated device, blocking not allowed": {st: race, specs: []v1alpha1.GPUSpec{migSpec(0, raceTo)},
			status: []v1alpha1.GPUStatus{blocked}, inUse: []string{"1g.10gb@6"}},
		"Blocked, but only a kept device is in use": {st: race, specs: []v1alpha1.GPUSpec{migSpec(0, raceTo)},
			status: []v1alpha1.GPUStatus{blocked}, allowBlocked: true, inUse: []string{"1g.10gb@0"}},
		"Blocked for another reason than a device in use": {st: race, specs: []v1alpha1.GPUSpec{migSpec(0, raceTo)},
			status: []v1alpha1.GPUStatus{reset}, allowBlocked: true, inUse: []string{"1g.10gb@6"}},
		"Blocked, the devices in use unreadable": {st: race, specs: []v1alpha1.GPUSpec{migSpec(0, raceTo)},
			status: []v1alpha1.GPUStatus{blocked}, allowBlocked: true, inUseErr: errors.New("listing claims: refused")},
	} {
		t.Run(name, func(t *testing.T) {
			nml := &v1alpha1.NodeMigLayout{Spec: v1alpha1.NodeMigLayoutSpec{GPUs: tc.specs}, Status: v1alpha1.NodeMigLayoutStatus{GPUs: tc.status}}
			inUse := func() (sets.Set[string], error) {
				s := sets.New[string]()
				for _, d := range tc.inUse {
					s.Insert(devName(t, tc.st, 0, d))
				}
				return s, tc.inUseErr
			}
			ok, why := gpusConverged("n", nml, tc.st, tc.allowBlocked, inUse, nil)
			if ok != tc.want {
				t.Errorf("converged %v (%s), want %v", ok, why, tc.want)
			}
		})
	}
}

// TestBlockedLegitimately: a Blocked GPU is legitimately blocked only where the change
// destroys a device that is in use: on the GPU it is about, not another.
func TestBlockedLegitimately(t *testing.T) {
	_, one := simState(t, a100, raceFrom)
	_, two := simState(t, a100, raceTo, raceFrom)
	_, off := simState(t, a100, "-")
	for name, tc := range map[string]struct {
		st    nvmlsim.State
		idx   int
		spec  v1alpha1.GPUSpec
		inUse []string // devices of GPU idx
		want  bool
	}{
		"a destroyed device allocated":       {st: one, spec: migSpec(0, raceTo), inUse: []string{"1g.10gb@6"}, want: true},
		"a destroyed device at 4 allocated":  {st: one, spec: migSpec(0, raceTo), inUse: []string{"1g.10gb@4"}, want: true},
		"only a kept device allocated":       {st: one, spec: migSpec(0, raceTo), inUse: []string{"1g.10gb@0", "1g.10gb@3"}},
		"nothing in use":                     {st: one, spec: migSpec(0, raceTo)},
		"MIG off destroys every device":      {st: one, spec: migSpec(0, "-"), inUse: []string{"1g.10gb@0"}, want: true},
		"second GPU, a destroyed device":     {st: two, idx: 1, spec: migSpec(1, raceTo), inUse: []string{"1g.10gb@5"}, want: true},
		"second GPU, a kept device":          {st: two, idx: 1, spec: migSpec(1, raceTo), inUse: []string{"1g.10gb@1"}},
		"no such GPU":                        {st: one, idx: 3, spec: migSpec(3, raceTo)},
		"an unparsable layout":               {st: one, spec: migSpec(0, "9g.1gb@0"), inUse: []string{"1g.10gb@6"}},
		"MIG on under the whole GPU in use":  {st: off, spec: migSpec(0, raceTo), inUse: []string{""}, want: true},
		"MIG on, nothing in use":             {st: off, spec: migSpec(0, raceTo)},
		"MIG off kept, the whole GPU in use": {st: off, spec: v1alpha1.GPUSpec{Index: 0}, inUse: []string{""}},
	} {
		t.Run(name, func(t *testing.T) {
			inUse := sets.New[string]()
			for _, d := range tc.inUse {
				inUse.Insert(devName(t, tc.st, tc.idx, d))
			}
			why, legit := blockedLegitimately(tc.st, tc.idx, tc.spec, inUse)
			if legit != tc.want {
				t.Errorf("legitimately blocked %v (%s), want %v", legit, why, tc.want)
			}
		})
	}
}

// poolOf is the pool that matches st exactly.
func poolOf(st nvmlsim.State) map[string]clustertest.PublishedDevice {
	out := map[string]clustertest.PublishedDevice{}
	for name, uuid := range clustertest.NVMLDevices(st) {
		out[name] = clustertest.PublishedDevice{UUID: uuid}
	}
	return out
}

// TestCheckNode: the independent check counts every difference between the pool and
// NVML, GIs without compute instance, and Ready GPUs that hold another layout or mode
// than desired; a GPU not Ready yet is not judged, and a pool equal to NVML with every
// GPU as desired is clean.
func TestCheckNode(t *testing.T) {
	const lA, lB = "3g.40gb@0,3g.40gb@4", "7g.80gb@0"
	_, base := simState(t, a100, lA, lB)
	_, offOn := simState(t, a100, "-", lB)
	for name, tc := range map[string]struct {
		st       nvmlsim.State // default base
		specs    []string      // per GPU; default lA, lB
		status   []v1alpha1.GPUStatus
		pool     func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice)
		edit     func(st *nvmlsim.State)
		nmlErr   error
		journal  []int // GPUs with a journal entry
		mismatch int
		leaked   int
		left     int
	}{
		"clean":                   {},
		"clean, MIG off on gpu 0": {st: offOn, specs: []string{"-", lB}},
		"a device missing from the pool": {pool: func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice) {
			delete(p, devName(t, base, 1, "7g.80gb@0"))
		}, mismatch: 1},
		"a device published with another UUID": {pool: func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice) {
			n := devName(t, st, 1, "7g.80gb@0")
			d := p[n]
			d.UUID = "MIG-other"
			p[n] = d
		}, mismatch: 1},
		"a device still tainted": {pool: func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice) {
			n := devName(t, st, 1, "7g.80gb@0")
			d := p[n]
			d.Tainted = true
			p[n] = d
		}, mismatch: 1},
		"a phantom device": {pool: func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice) {
			p["gpu-1-mig-1g10gb-19-6"] = clustertest.PublishedDevice{UUID: "MIG-phantom"}
		}, mismatch: 1},
		"a GI without compute instance": {edit: func(st *nvmlsim.State) {
			st.GPUs[1].GPUInstances[0].ComputeInstances = nil
		}, pool: func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice) {
			delete(p, devName(t, base, 1, "7g.80gb@0"))
		}, leaked: 1},
		"the NodeMigLayout unreadable": {nmlErr: errors.New("not found"), leaked: 1},
		"Ready, holding an instance the layout lacks": {specs: []string{lA, "4g.40gb@0"},
			leaked: 2}, // holds 7g.80gb@0, lacks 4g.40gb@0
		"Ready, lacking a desired instance": {edit: func(st *nvmlsim.State) {
			st.GPUs[0].GPUInstances = st.GPUs[0].GPUInstances[:1]
		}, pool: func(t *testing.T, st nvmlsim.State, p map[string]clustertest.PublishedDevice) {
			delete(p, devName(t, base, 0, "3g.40gb@4"))
		}, leaked: 1},
		"Ready, MIG pending off":              {edit: func(st *nvmlsim.State) { st.GPUs[1].MIGPending = false }, leaked: 1},
		"Ready, MIG wanted off":               {specs: []string{lA, "-"}, leaked: 1},
		"Ready, MIG wanted on":                {st: offOn, specs: []string{lA, lB}, leaked: 1},
		"Ready, an unparsable desired layout": {specs: []string{lA, "9g.1gb@0"}, leaked: 1},
		"not Ready yet, holding another layout": {specs: []string{lA, "4g.40gb@0"},
			status: []v1alpha1.GPUStatus{readyStatus(0, lA), {Index: 1, Phase: v1alpha1.PhasePending}}},
		"a journal entry of a Ready GPU":     {journal: []int{1}, left: 1},
		"a journal entry of a GPU not Ready": {journal: []int{1}, status: []v1alpha1.GPUStatus{readyStatus(0, lA), {Index: 1, Phase: v1alpha1.PhasePending}}},
	} {
		t.Run(name, func(t *testing.T) {
			st := tc.st
			if st.GPUs == nil {
				st = base
			}
			// A deep enough copy: GPUs and their instances.
			st.GPUs = append([]nvmlsim.GPU(nil), st.GPUs...)
			for i := range st.GPUs {
				st.GPUs[i].GPUInstances = append([]nvmlsim.GPUInstance(nil), st.GPUs[i].GPUInstances...)
			}
			pool := poolOf(st)
			if tc.edit != nil {
				tc.edit(&st)
			}
			if tc.pool != nil {
				tc.pool(t, st, pool)
			}
			specs := tc.specs
			if specs == nil {
				specs = []string{lA, lB}
			}
			nml := &v1alpha1.NodeMigLayout{}
			for i, l := range specs {
				nml.Spec.GPUs = append(nml.Spec.GPUs, migSpec(int32(i), l))
				nml.Status.GPUs = append(nml.Status.GPUs, readyStatus(int32(i), l))
			}
			if tc.status != nil {
				nml.Status.GPUs = tc.status
			}
			var journal []agent.JournalEntry
			for _, g := range tc.journal {
				journal = append(journal, agent.JournalEntry{GPU: g})
			}
			var res CheckResult
			checkNode(&res, "n", st, pool, nml, tc.nmlErr, journal)
			if len(res.PoolMismatch) != tc.mismatch || len(res.Leaked) != tc.leaked || len(res.JournalLeft) != tc.left {
				t.Errorf("pool≠NVML %q, leaked %q, journal left %q; want %d, %d, %d", res.PoolMismatch, res.Leaked, res.JournalLeft, tc.mismatch, tc.leaked, tc.left)
			}
			if res.clean() != (tc.mismatch+tc.leaked == 0) {
				t.Errorf("clean() %v with pool≠NVML %q, leaked %q", res.clean(), res.PoolMismatch, res.Leaked)
			}
		})
	}
}
