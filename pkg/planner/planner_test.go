package planner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// trace is the readable form of a Result that the tests compare.
type trace struct {
	Changes    []string          // "node/gpu: from -> to (serves ...)"
	Served     []string          // "pod -> node devices [change]"
	Unservable map[string]string // pod -> reason
	Kept       map[string]string // pod -> "node/gpu-N profile@start"
	// MissingSpares: "node profile" -> spare devices lacking.
	MissingSpares map[string]int
}

func toTrace(r Result) trace {
	t := trace{Unservable: r.Unservable}
	for node, profiles := range r.MissingSpares {
		for prof, n := range profiles {
			if t.MissingSpares == nil {
				t.MissingSpares = map[string]int{}
			}
			t.MissingSpares[node+" "+prof] = n
		}
	}
	for pod, k := range r.Kept {
		if t.Kept == nil {
			t.Kept = map[string]string{}
		}
		t.Kept[pod] = fmt.Sprintf("%s/gpu-%d %s@%d", k.Node, k.GPU, k.Profile, k.Placement.Start)
	}
	for _, c := range r.Changes {
		line := c.Node + "/" + itoa(c.GPU) + ": " + show(c.From) + " -> " + show(c.To)
		if len(c.Serves) > 0 {
			line += " serves " + join(c.Serves)
		}
		if len(c.Spares) > 0 {
			line += " keeps spare " + join(c.Spares)
		}
		t.Changes = append(t.Changes, line)
	}
	for _, s := range r.Served {
		line := s.Pod + " -> " + s.Node + " " + join(s.Devices)
		if s.NeedsChange {
			line += " after change"
		}
		t.Served = append(t.Served, line)
	}
	return t
}

func show(l mig.Layout) string {
	if len(l) == 0 {
		return "(empty)"
	}
	return l.String()
}

func TestPlan(t *testing.T) {
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		// groupMax is Snapshot.GroupMaxGPUs.
		groupMax map[string]int
		// aging is Snapshot.AgingAfter, with Snapshot.Now = t0.
		aging time.Duration
		want  trace
	}{
		"of one priority the larger pod is planned first, though younger": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("small", 9).claim(profileIs("1g.10gb"), 1).build(), pod("big", 1).claim(profileIs("7g.80gb"), 1).build()},
			want: trace{
				Served:     []string{"default/big -> n1 gpu-0-mig-7g80gb-0-0"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		"room for large profiles comes before keeping free devices: a 1g goes where the 2g is, not into the 4g's half": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "2g.20gb@4,1g.10gb@6", "1g.10gb@6").build()},
			pods:  []Pod{pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 2g.20gb@4,1g.10gb@6 -> 1g.10gb@4,1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-4 after change"},
			},
		},
		"a 3g goes to the right half, destroying two free devices, and the free 4g stays": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6", "").build()},
			pods:  []Pod{pod("mid", 1).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0,2g.20gb@4,1g.10gb@6 -> 4g.40gb@0,3g.40gb@4 serves default/mid"},
				Served:  []string{"default/mid -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a pod of two devices that fit the node once a device in use ends waits for room": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()},
			pods:  []Pod{pod("pair", 1).claim(profileIs("3g.40gb"), 2).build()},
			want:  trace{Unservable: map[string]string{"default/pair": NoRoom}},
		},
		"a pod of two devices waits for room on the node whose GPU it selects, not on one of the same model it does not": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "", "").brand("Other").build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build(),
			},
			pods: []Pod{pod("pair", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].brand == 'Nvidia'", 2).build()},
			want: trace{Unservable: map[string]string{"default/pair": NoRoom}},
		},
		"a pod of two devices that no node of its kind can hold is not servable": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("pair", 1).claim(profileIs("4g.40gb"), 2).build()},
			want:  trace{Unservable: map[string]string{"default/pair": "no Auto-mode node can hold all of the pod's claims at once, even with every GPU free"}},
		},
		"a pod passed over for AgingAfter is planned by age": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("small", 61).claim(profileIs("1g.10gb"), 1).build(), pod("big", 1).claim(profileIs("7g.80gb"), 1).build()},
			aging: time.Hour,
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-0 7g.80gb@0"},
			},
		},
		"a free GPU instance of a profile the catalog lacks is destroyed like any free device": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,1g.10gb-me@6", "4g.40gb@0").build()},
			pods:  []Pod{pod("mid", 1).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0,1g.10gb-me@6 -> 4g.40gb@0,3g.40gb@4 serves default/mid"},
				Served:  []string{"default/mid -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a free GPU instance of a profile the catalog lacks is never offered to a pod of two devices": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,1g.10gb-me@6", "4g.40gb@0").build(),
				node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
			},
			pods: []Pod{pod("two", 1).claim(profileIs("1g.10gb"), 2).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0,1g.10gb-me@6 -> 4g.40gb@0,1g.10gb@4,1g.10gb@5 serves default/two"},
				Served:  []string{"default/two -> n1 gpu-0-mig-1g10gb-19-4, gpu-0-mig-1g10gb-19-5 after change"},
			},
		},
		"a free GPU instance of a profile the catalog lacks is never offered to a pod that names its GPU": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,1g.10gb-me@6", "4g.40gb@0").build()},
			pods:  []Pod{pod("gpu0", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0,1g.10gb-me@6 -> 4g.40gb@0,1g.10gb@6 serves default/gpu0"},
				Served:  []string{"default/gpu0 -> n1 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
		"a GPU instance in use of a profile the catalog lacks (its size unknown) leaves its GPU as it is": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,1g.10gb-me@6", "4g.40gb@0,1g.10gb-me@6").build()},
			pods:  []Pod{pod("small", 1).claim(profileIs("2g.20gb"), 1).build()},
			want:  trace{Unservable: map[string]string{"default/small": NoRoom}},
		},
		"devices added for one pod keep each other: two 3g replace a free 4g": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0", "").build()},
			pods:  []Pod{pod("two3g", 1).claim(profileIs("3g.40gb"), 2).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0 -> 3g.40gb@0,3g.40gb@4 serves default/two3g"},
				Served:  []string{"default/two3g -> n1 gpu-0-mig-3g40gb-9-4, gpu-0-mig-3g40gb-9-0 after change"},
			},
		},
		"a multi-device pod that cannot be placed leaves no reservation behind": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{
				pod("a", 1).priority(4).claim(profileIs("1g.10gb"), 2).build(),
				pod("b", 1).priority(3).claim(profileIs("2g.20gb"), 3).build(),
				pod("c", 1).priority(2).claim(profileIs("2g.20gb"), 1).build(),
				pod("d", 1).priority(1).claim(profileIs("2g.20gb"), 1).build(),
			},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 2g.20gb@0,2g.20gb@2,1g.10gb@4,1g.10gb@5 serves default/a, default/c, default/d"},
				Served: []string{
					"default/a -> n1 gpu-0-mig-1g10gb-19-4, gpu-0-mig-1g10gb-19-5 after change",
					"default/c -> n1 gpu-0-mig-2g20gb-14-0 after change",
					"default/d -> n1 gpu-0-mig-2g20gb-14-2 after change",
				},
				Unservable: map[string]string{"default/b": NoRoom},
			},
		},
		"a pod with a claim allocated on one node already is planned on that node": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("nic", 1).claim(profileIs("7g.80gb"), 1).allocatedOn("n2").build()},
			want: trace{
				Changes: []string{"n2/0: (empty) -> 7g.80gb@0 serves default/nic"},
				Served:  []string{"default/nic -> n2 gpu-0-mig-7g80gb-0-0 after change"},
			},
		},
		"a prioritized list of two devices each is planned": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("list", 1).firstAvailable(2, profileIs("1g.10gb"), profileIs("2g.20gb")).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@4,1g.10gb@5 serves default/list"},
				Served:  []string{"default/list -> n1 gpu-0-mig-1g10gb-19-4, gpu-0-mig-1g10gb-19-5 after change"},
			},
		},
		"a claim for a GPU by index is planned on that GPU": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("gpu1", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 1", 1).build()},
			want: trace{
				Changes: []string{"n1/1: (empty) -> 3g.40gb@4 serves default/gpu1"},
				Served:  []string{"default/gpu1 -> n1 gpu-1-mig-3g40gb-9-4 after change"},
			},
		},
		"a claim for a GPU by index whose GPU is full waits; the other GPU is not changed for it": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("gpu0", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build()},
			want:  trace{Unservable: map[string]string{"default/gpu0": NoRoom}},
		},
		"a claim for a placement gets that placement, though best fit prefers another": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("left", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].placementStart == 0", 1).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 3g.40gb@0 serves default/left"},
				Served:  []string{"default/left -> n1 gpu-0-mig-3g40gb-9-0 after change"},
			},
		},
		"a device created for a claim that asks for its placement stays there when a later pod needs the GPU": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{
				pod("pin", 1).priority(10).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].placementStart == 0", 1).build(),
				pod("big", 1).claim(profileIs("4g.40gb"), 1).build(),
			},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@0 serves default/pin"},
				Served:  []string{"default/pin -> n1 gpu-0-mig-1g10gb-19-0 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"},
			},
		},
		"a claim on the driver version is judged on the version the GPU's node publishes": {
			nodes: []Node{
				node("old").gpu("A100-SXM4-80GB", "", "").driver("535.104.5").build(),
				node("new").gpu("A100-SXM4-80GB", "", "").driver("580.95.5").build(),
			},
			pods: []Pod{pod("recent", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].driverVersion.compareTo(semver('550.0.0')) >= 0", 1).build()},
			want: trace{
				Changes: []string{"new/0: (empty) -> 1g.10gb@6 serves default/recent"},
				Served:  []string{"default/recent -> new gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
		"size counts every device a pod asks for": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,3g.40gb@4", "").build()},
			pods:  []Pod{pod("one4g", 9).claim(profileIs("4g.40gb"), 1).build(), pod("two3g", 1).claim(profileIs("3g.40gb"), 2).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0,3g.40gb@4 -> 3g.40gb@0,3g.40gb@4 serves default/two3g"},
				Served:  []string{"default/two3g -> n1 gpu-0-mig-3g40gb-9-4, gpu-0-mig-3g40gb-9-0 after change"},
				Kept:    map[string]string{"default/one4g": "n1/gpu-0 4g.40gb@0"},
			},
		},
		"whole 7g is cut for a 16 GiB claim; the device goes where 4g and 3g still fit": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("p1", 1).claim("device.attributes['mig.miglayout.io'].memory >= 16000 && device.attributes['mig.miglayout.io'].memory <= 25000", 1).build()},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 1g.20gb@6 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-0-mig-1g20gb-15-6 after change"},
			},
		},
		"a free device that exists is used, nothing changes": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "3g.40gb@0").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("3g.40gb"), 1).build()},
			want:  trace{Served: []string{"default/p1 -> n1 gpu-0-mig-3g40gb-9-4"}},
		},
		"a free 1g on an otherwise empty GPU is left; a 1g is created beside devices in use": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2}).
				gpu("A100-SXM4-80GB", "1g.10gb@0", "").
				gpu("A100-SXM4-80GB", "2g.20gb@0,3g.40gb@4", "2g.20gb@0,3g.40gb@4").build()},
			pods: []Pod{pod("p1", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/1: 2g.20gb@0,3g.40gb@4 -> 2g.20gb@0,1g.10gb@2,3g.40gb@4 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-1-mig-1g10gb-19-2 after change"},
			},
		},
		"a free device beside devices in use is used before one on an empty GPU": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2}).
				gpu("A100-SXM4-80GB", "1g.10gb@0", "").
				gpu("A100-SXM4-80GB", "2g.20gb@0,1g.10gb@2,3g.40gb@4", "2g.20gb@0,3g.40gb@4").build()},
			pods: []Pod{pod("p1", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{Served: []string{"default/p1 -> n1 gpu-1-mig-1g10gb-19-2"}},
		},
		"an allocated device is never destroyed: the other GPU is cut": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "3g.40gb@0", "3g.40gb@0").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("4g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/1: 7g.80gb@0 -> 4g.40gb@0 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-1-mig-4g40gb-5-0 after change"},
			},
		},
		"no room without destroying a pinned device": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "3g.40gb@0", "3g.40gb@0").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("4g.40gb"), 1).build()},
			want:  trace{Kept: map[string]string{"default/p1": "n1/gpu-0 4g.40gb@0"}},
		},
		// A device held with admin access only (GPU.Shared) stays: it
		// is never destroyed for a pod, and it is in the way of a
		// placement kept for one as much as a device in use (the right
		// half, where only it sits, is as blocked as the left, and is
		// kept as the half that leaves the left to a 4g.40gb).
		"a device held with admin access is never destroyed and is in the way of a kept placement": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,2g.20gb@4", "1g.10gb@0").shared("2g.20gb@4").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("3g.40gb"), 1).build()},
			want:  trace{Kept: map[string]string{"default/p1": "n1/gpu-0 3g.40gb@4"}},
		},
		"higher priority first, then older; the GPU already changed is reused": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2}).gpu("H100-SXM5-80GB", "7g.80gb@0", "").gpu("H100-SXM5-80GB", "7g.80gb@0", "").build()},
			pods: []Pod{
				pod("young", 1).claim(profileIs("3g.40gb"), 1).build(),
				pod("old", 9).claim(profileIs("3g.40gb"), 1).build(),
				pod("vip", 0).priority(100).claim(profileIs("4g.40gb"), 1).build(),
			},
			want: trace{
				Changes: []string{
					"n1/0: 7g.80gb@0 -> 4g.40gb@0,3g.40gb@4 serves default/vip, default/old",
					"n1/1: 7g.80gb@0 -> 3g.40gb@4 serves default/young",
				},
				Served: []string{
					"default/vip -> n1 gpu-0-mig-4g40gb-5-0 after change",
					"default/old -> n1 gpu-0-mig-3g40gb-9-4 after change",
					"default/young -> n1 gpu-1-mig-3g40gb-9-4 after change",
				},
			},
		},
		"one GPU per node at once by default": {
			nodes: []Node{node("n1").gpu("H100-SXM5-80GB", "7g.80gb@0", "").gpu("H100-SXM5-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("a", 2).claim(profileIs("4g.40gb"), 1).build(), pod("b", 1).claim(profileIs("4g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 4g.40gb@0 serves default/a"},
				Served:  []string{"default/a -> n1 gpu-0-mig-4g40gb-5-0 after change"},
				Kept:    map[string]string{"default/b": "n1/gpu-1 4g.40gb@0"},
			},
		},
		"node selector and taints decide the node": {
			nodes: []Node{
				// Labelled as the pod selects: only its taint keeps the pod off.
				node("tainted").label("pool", "a").taint("dedicated").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
				node("other").label("pool", "b").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
				node("right").label("pool", "a").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
			},
			pods: []Pod{pod("p1", 1).nodeSelector("pool", "a").claim(profileIs("7g.80gb"), 1).build()},
			want: trace{Served: []string{"default/p1 -> right gpu-0-mig-7g80gb-0-0"}},
		},
		"a cordoned node serves only pods that tolerate it": {
			nodes: []Node{
				node("cordoned").cordoned().gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
				node("open").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
			},
			pods: []Pod{pod("p1", 2).claim(profileIs("7g.80gb"), 1).build(),
				pod("p2", 1).tolerates(corev1.TaintNodeUnschedulable).claim(profileIs("7g.80gb"), 1).build()},
			want: trace{Served: []string{"default/p1 -> open gpu-0-mig-7g80gb-0-0", "default/p2 -> cordoned gpu-0-mig-7g80gb-0-0"}},
		},
		"no profile satisfies the selector": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("p1", 1).claim("device.attributes['mig.miglayout.io'].memory >= 100000", 1).build()},
			want:  trace{Unservable: map[string]string{"default/p1": "no profile of the Auto nodes' GPU models (A100-SXM4-80GB) satisfies claim p1-gpu"}},
		},
		"two devices in one claim are planned together": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("2g.20gb"), 2).build()},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 2g.20gb@0,2g.20gb@2 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-0-mig-2g20gb-14-0, gpu-0-mig-2g20gb-14-2 after change"},
			},
		},
		"a GPU changing already is left alone but its coming devices serve": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "").changing().build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("3g.40gb"), 1).build(), pod("p2", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Served:     []string{"default/p1 -> n1 gpu-0-mig-3g40gb-9-0"},
				Unservable: map[string]string{"default/p2": NoRoom},
			},
		},
		"spares are added where nothing is destroyed": {
			nodes: []Node{node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 2}, MaxGPUsPerNode: 2}).
				gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").build()},
			want: trace{Changes: []string{"n1/1: 3g.40gb@4 -> 1g.10gb@0,1g.10gb@1,3g.40gb@4 keeps spare 1g.10gb, 1g.10gb"}},
		},
		"a device a DeviceTaintRule names before it exists is never created: the 3g.40gb goes to the other half": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").tainted("3g.40gb@4").build()},
			pods:  []Pod{pod("mid", 1).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 3g.40gb@0 serves default/mid"},
				Served:  []string{"default/mid -> n1 gpu-0-mig-3g40gb-9-0 after change"},
			},
		},
		"a pod only a tainted device could serve is not served by creating it": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").tainted("7g.80gb@0").build()},
			pods:  []Pod{pod("big", 1).claim(profileIs("7g.80gb"), 1).build()},
			want:  trace{Unservable: map[string]string{"default/big": NoRoom}},
		},
		"spares that would destroy a free device, or pass the limit on GPUs changed, are reported missing": {
			nodes: []Node{
				node("whole").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
				node("limited").policy(Policy{Spares: map[string]int{"1g.10gb": 3, "2g.20gb": 1}, MaxGPUsPerNode: 1}).
					gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").build(),
			},
			want: trace{
				Changes:       []string{"limited/0: 3g.40gb@4 -> 1g.10gb@0,1g.10gb@1,1g.10gb@2,3g.40gb@4 keeps spare 1g.10gb, 1g.10gb, 1g.10gb"},
				MissingSpares: map[string]int{"whole 1g.10gb": 1, "limited 2g.20gb": 1},
			},
		},
		"a spare goes on a GPU the plan changes anyway, whatever the change destroyed for a pod": {
			nodes: []Node{node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods:  []Pod{pod("mid", 1).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 1g.10gb@0,3g.40gb@4 serves default/mid keeps spare 1g.10gb"},
				Served:  []string{"default/mid -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a large claim nothing can serve holds the GPU closest to freeing up; younger small claims go elsewhere": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 8}).
				gpu("A100-SXM4-80GB", "3g.40gb@0,1g.10gb@4,1g.10gb@5", "3g.40gb@0,1g.10gb@4,1g.10gb@5").
				gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()},
			pods: []Pod{pod("big", 9).claim(profileIs("7g.80gb"), 1).build(), pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 3g.40gb@0,1g.10gb@4,1g.10gb@5 -> 3g.40gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-1 7g.80gb@0"},
			},
		},
		"a GPU kept for a 4g.40gb still takes a small device outside the kept placement": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "2g.20gb@0", "2g.20gb@0").build()},
			pods:  []Pod{pod("big", 9).claim(profileIs("4g.40gb"), 1).build(), pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 2g.20gb@0 -> 2g.20gb@0,1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"},
			},
		},
		"a pod with several devices gets none in a kept placement": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "2g.20gb@0", "2g.20gb@0").build()},
			pods:  []Pod{pod("big", 9).claim(profileIs("4g.40gb"), 1).build(), pod("pair", 1).claim(profileIs("1g.10gb"), 2).build()},
			want: trace{
				Changes: []string{"n1/0: 2g.20gb@0 -> 2g.20gb@0,1g.10gb@4,1g.10gb@5 serves default/pair"},
				Served:  []string{"default/pair -> n1 gpu-0-mig-1g10gb-19-4, gpu-0-mig-1g10gb-19-5 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"},
			},
		},
		"a 7g.80gb holds, of GPUs equally close to freeing up, the one whose free room is worth least to others": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 8}).
				gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").
				gpu("A100-SXM4-80GB", "4g.40gb@0", "4g.40gb@0").build()},
			pods: []Pod{pod("big", 9).claim(profileIs("7g.80gb"), 1).build(), pod("mid", 5).claim(profileIs("4g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 3g.40gb@4 -> 4g.40gb@0,3g.40gb@4 serves default/mid"},
				Served:  []string{"default/mid -> n1 gpu-0-mig-4g40gb-5-0 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-1 7g.80gb@0"},
			},
		},
		"a small device goes where it spoils the least, keeping the empty GPU whole": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 8}).gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 1g.10gb@6 -> 1g.10gb@4,1g.10gb@6 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-0-mig-1g10gb-19-4 after change"},
			},
		},
		"destroying an idle device beats spoiling a whole GPU": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 8}).gpu("A100-SXM4-80GB", "4g.40gb@0,1g.10gb@4", "4g.40gb@0").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("p1", 1).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0,1g.10gb@4 -> 4g.40gb@0,3g.40gb@4 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"devices planned earlier in the same plan move to make room": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			pods: []Pod{
				pod("a", 4).claim(profileIs("1g.10gb"), 1).build(), pod("b", 3).claim(profileIs("1g.10gb"), 1).build(),
				pod("c", 2).claim(profileIs("1g.10gb"), 1).build(), pod("d", 1).claim(profileIs("1g.10gb"), 1).build(),
			},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3 serves default/a, default/b, default/c, default/d"},
				Served: []string{
					"default/a -> n1 gpu-0-mig-1g10gb-19-0 after change", "default/b -> n1 gpu-0-mig-1g10gb-19-1 after change",
					"default/c -> n1 gpu-0-mig-1g10gb-19-2 after change", "default/d -> n1 gpu-0-mig-1g10gb-19-3 after change",
				},
			},
		},
		"limit on GPUs changed at once across nodes": {
			nodes: []Node{node("n1").policy(Policy{Group: "all"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").policy(Policy{Group: "all"}).gpu("A100-SXM4-80GB", "", "").build()},
			pods:     []Pod{pod("p1", 2).claim(profileIs("7g.80gb"), 1).build(), pod("p2", 1).claim(profileIs("7g.80gb"), 1).build()},
			groupMax: map[string]int{"all": 1},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 7g.80gb@0 serves default/p1"},
				Served:  []string{"default/p1 -> n1 gpu-0-mig-7g80gb-0-0 after change"},
				Kept:    map[string]string{"default/p2": "n2/gpu-0 7g.80gb@0"},
			},
		},
		"a claim two pods share gets its device once": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("a", 2).sharedClaim("shared", profileIs("7g.80gb")).build(), pod("b", 1).sharedClaim("shared", profileIs("7g.80gb")).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 7g.80gb@0 serves default/a, default/b"},
				Served:  []string{"default/a -> n1 gpu-0-mig-7g80gb-0-0 after change", "default/b -> n1 gpu-0-mig-7g80gb-0-0 after change"},
			},
		},
		"pods sharing some of their claims wait for the shared claim's allocation": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{
				pod("a", 2).sharedClaim("shared", profileIs("3g.40gb")).build(),
				pod("b", 1).sharedClaim("shared", profileIs("3g.40gb")).claim(profileIs("1g.10gb"), 1).build(),
				pod("c", 1).sharedClaim("shared", profileIs("3g.40gb")).claim(profileIs("1g.10gb"), 1).build(),
			},
			want: trace{
				Changes:    []string{"n1/0: (empty) -> 1g.10gb@0,3g.40gb@4 serves default/b"},
				Served:     []string{"default/b -> n1 gpu-0-mig-3g40gb-9-4, gpu-0-mig-1g10gb-19-0 after change"},
				Unservable: map[string]string{"default/a": WaitsForSharedClaim, "default/c": WaitsForSharedClaim},
			},
		},
		"a pod sharing a claim with a pod served on a node it may not use hears why": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").label("pool", "b").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{pod("a", 2).sharedClaim("shared", profileIs("7g.80gb")).build(),
				pod("b", 1).nodeSelector("pool", "b").sharedClaim("shared", profileIs("7g.80gb")).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 7g.80gb@0 serves default/a"},
				Served:  []string{"default/a -> n1 gpu-0-mig-7g80gb-0-0 after change"},
				Unservable: map[string]string{"default/b": "the pod shares claims with pod default/a, which this plan serves on node n1, " +
					"where this pod may not run (node selector, affinity, tolerations, claims allocated already, or kube-scheduler did not bind it there)"},
			},
		},
		"a GPU whose change failed holds no slot of its node's limit; one in flight does": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "").retrying().gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@0", "").changing().gpu("A100-SXM4-80GB", "", "").build(),
			},
			pods: []Pod{pod("a", 2).claim(profileIs("7g.80gb"), 1).build(), pod("b", 1).claim(profileIs("7g.80gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/1: (empty) -> 7g.80gb@0 serves default/a"},
				Served:  []string{"default/a -> n1 gpu-1-mig-7g80gb-0-0 after change"},
				Kept:    map[string]string{"default/b": "n2/gpu-1 7g.80gb@0"},
			},
		},
		"a frozen node (agent lost) serves nothing, from free devices or its change in flight, and keeps no spares; its change holds its group's slot": {
			nodes: []Node{
				node("lost").policy(Policy{Group: "g", Spares: map[string]int{"1g.10gb": 1}}).frozen().
					gpu("A100-SXM4-80GB", "1g.10gb@0", "").changing().gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
				node("live").policy(Policy{Group: "g"}).gpu("A100-SXM4-80GB", "", "").build(),
			},
			groupMax: map[string]int{"g": 1},
			pods:     []Pod{pod("big", 2).claim(profileIs("7g.80gb"), 1).build(), pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Kept:       map[string]string{"default/big": "live/gpu-0 7g.80gb@0"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		"every Auto node frozen: a pod they could serve waits for them, one they never could is told why, and why each is": {
			nodes: []Node{node("lost").frozen().gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
				node("shared").frozenBy("another MigLayout selects it too").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build()},
			pods: []Pod{pod("a", 1).claim(profileIs("7g.80gb"), 1).build(),
				pod("huge", 1).claim("device.attributes['mig.miglayout.io'].memory >= 200000", 1).build(),
				pod("pair", 1).claim(profileIs("7g.80gb"), 3).build()},
			want: trace{Unservable: map[string]string{"default/a": WaitsForLostNode,
				"default/pair": "no Auto-mode node can hold all of the pod's claims at once, even with every GPU free (nor can any Auto-mode node be changed now: node lost: its MigLayout is paused, its agent is lost, another MigLayout selects it too, or a DeviceTaintRule takes all its devices out of scheduling; node shared: another MigLayout selects it too)",
				"default/huge": "no profile of the Auto nodes' GPU models (A100-SXM4-80GB) satisfies claim huge-gpu (nor can any Auto-mode node be changed now: node lost: its MigLayout is paused, its agent is lost, another MigLayout selects it too, or a DeviceTaintRule takes all its devices out of scheduling; node shared: another MigLayout selects it too)"}},
		},
		"a pod only a frozen node could serve waits for it, whatever keeps the live ones from serving it": {
			nodes: []Node{
				node("lost").label("gpu", "a100").frozen().gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
				node("live").label("gpu", "h100").gpu("H100-SXM5-80GB", "", "").build(),
			},
			pods: []Pod{
				pod("by-selector", 1).nodeSelector("gpu", "a100").claim(profileIs("3g.40gb"), 1).build(),
				pod("by-model", 1).claim("device.attributes['mig.miglayout.io'].productName == 'NVIDIA A100-SXM4-80GB'", 1).build(),
				pod("multi", 1).claim("device.attributes['mig.miglayout.io'].productName == 'NVIDIA A100-SXM4-80GB'", 2).build(),
			},
			want: trace{Unservable: map[string]string{"default/by-selector": WaitsForLostNode, "default/by-model": WaitsForLostNode, "default/multi": WaitsForLostNode}},
		},
		"no Auto node": {
			pods: []Pod{pod("a", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{Unservable: map[string]string{"default/a": NoAutoNode}},
		},
		"a pod nothing serves does not keep the claim it shares from another pod": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{pod("a", 2).nodeSelector("pool", "none").sharedClaim("shared", profileIs("7g.80gb")).build(),
				pod("b", 1).sharedClaim("shared", profileIs("7g.80gb")).build()},
			want: trace{
				Changes:    []string{"n1/0: (empty) -> 7g.80gb@0 serves default/b"},
				Served:     []string{"default/b -> n1 gpu-0-mig-7g80gb-0-0 after change"},
				Unservable: map[string]string{"default/a": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"},
			},
		},
		"a group's limit holds across its nodes only, counting GPUs already changing": {
			nodes: []Node{
				node("a1").policy(Policy{Group: "a"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("a2").policy(Policy{Group: "a"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("b1").policy(Policy{Group: "b"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("b2").policy(Policy{Group: "b"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("b3").policy(Policy{Group: "b"}).gpu("A100-SXM4-80GB", "3g.40gb@4", "").changing().build(),
			},
			pods: []Pod{
				pod("p1", 4).claim(profileIs("7g.80gb"), 1).build(), pod("p2", 3).claim(profileIs("7g.80gb"), 1).build(),
				pod("p3", 2).claim(profileIs("7g.80gb"), 1).build(), pod("p4", 1).claim(profileIs("7g.80gb"), 1).build(),
			},
			groupMax: map[string]int{"a": 2, "b": 2},
			want: trace{
				Changes: []string{"a1/0: (empty) -> 7g.80gb@0 serves default/p1", "a2/0: (empty) -> 7g.80gb@0 serves default/p2",
					"b1/0: (empty) -> 7g.80gb@0 serves default/p3"},
				Served: []string{"default/p1 -> a1 gpu-0-mig-7g80gb-0-0 after change", "default/p2 -> a2 gpu-0-mig-7g80gb-0-0 after change",
					"default/p3 -> b1 gpu-0-mig-7g80gb-0-0 after change"},
				Kept: map[string]string{"default/p4": "b2/gpu-0 7g.80gb@0"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Nodes: tc.nodes, Pending: tc.pods, Classes: []*resourceapi.DeviceClass{migClass()},
				GroupMaxGPUs: tc.groupMax, Now: t0, AgingAfter: tc.aging}
			got, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, c := range got.Changes {
				for _, n := range tc.nodes {
					for _, g := range n.GPUs {
						if n.Node.Name != c.Node || g.Info.Index != c.GPU {
							continue
						}
						for _, d := range g.Pinned {
							if !c.To.Contains(d) {
								t.Errorf("change on %s/%d destroys pinned %s", c.Node, c.GPU, d)
							}
						}
						if err := g.Info.Model.Validate(c.To); err != nil {
							t.Errorf("planned layout invalid: %v", err)
						}
					}
				}
			}
			again, _ := Plan(context.Background(), snap)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("plan is not deterministic:\n%s", diff)
			}
		})
	}
}
