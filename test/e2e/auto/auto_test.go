package auto

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

const (
	layoutName = "e2e-auto"
	a100       = "A100-SXM4-80GB"
)

var autoNodes = map[string]string{groupLabel: "auto"}

// CEL selectors of the demand.
const (
	sel7g = `device.attributes['mig.miglayout.io'].profile == '7g.80gb'`
	sel3g = `device.attributes['mig.miglayout.io'].profile == '3g.40gb'`
	// The driver version is not in the MIG catalog: the planner judges it on
	// the value the node's agent reports (NodeMigLayout status).
	sel3gDriver = sel3g + ` && device.attributes['mig.miglayout.io'].driverVersion.isGreaterThan(semver('550.0.0'))`
	sel1g       = `device.attributes['mig.miglayout.io'].memory >= 9000 && device.attributes['mig.miglayout.io'].memory <= 10240`
	selHuge     = `device.attributes['mig.miglayout.io'].memory >= 200000`
)

// TestAutoRepartitionsWholeGPUs: every GPU starts as one whole 7g.80gb device (a Static
// MigLayout, then switched to Auto); one pod holds a 7g.80gb; eight pending pods ask for
// 3g.40gb (by profile, and from templates by driver version too) and 1g.10gb (by a memory
// range) devices, half by resourceClaimName, half from ResourceClaimTemplates, and one pod for a device no GPU has. The planner
// repartitions the free GPUs, the scheduler binds the eight pods and the stand-in kubelet
// runs them; the held 7g.80gb is never planned for nor touched; the impossible pod hears
// why and stays pending. It logs claim-to-bound latency (p50/p99) and devices destroyed,
// and checks that NVML lost exactly the devices the plans destroyed.
// Then a 7g.80gb pod finds every GPU in use and hears that a placement is kept for it.
func TestAutoRepartitionsWholeGPUs(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	t0 := time.Now()

	// 1. Whole GPUs: a Static MigLayout makes every A100 one 7g.80gb@0.
	ml := env.SetMigLayout(t, ctx, layoutName, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: autoNodes},
		Mode:         v1alpha1.ModeStatic,
		Rules:        []v1alpha1.LayoutRule{{Name: "whole", ProductName: a100, Profiles: map[string]int32{"7g.80gb": 1}}},
	})
	env.WaitReady(t, ctx, ml, 2)
	for _, n := range []string{nodeA, nodeB} {
		if got, want := clustertest.Layouts(env.Snapshot(t, n)), []string{"7g.80gb@0", "7g.80gb@0"}; !slices.Equal(got, want) {
			t.Fatalf("%s layouts = %v, want %v", n, got, want)
		}
		env.WaitPoolMatchesNVML(t, ctx, n)
	}
	t.Logf("every GPU is one 7g.80gb after %.1fs", time.Since(t0).Seconds())

	// 2. One pod holds a whole GPU's 7g.80gb.
	ns := env.NewNamespace(t, ctx, "auto")
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "whole"}, Spec: clustertest.ClaimSpec(sel7g)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, clustertest.Pod(ns, "whole", autoNodes, "whole", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitPodRunning(t, ctx, ns, "whole", 60*time.Second)
	pinNode, pinDev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "whole"))
	if !ok {
		t.Fatal("claim whole is not allocated")
	}
	pinGPU, _, _ := migslices.DeviceGPUIndex(pinDev)
	pinUUID := clustertest.NVMLDevices(env.Snapshot(t, pinNode))[pinDev]
	if pinUUID == "" || len(clustertest.ProcessesOn(env.Snapshot(t, pinNode), pinUUID)) == 0 {
		t.Fatalf("held device %s/%s (uuid %q) has no process of its pod", pinNode, pinDev, pinUUID)
	}
	t.Logf("pod whole holds %s/%s (GPU %d, %s)", pinNode, pinDev, pinGPU, pinUUID)

	// 3. Auto mode, two GPUs of a node at once. The NodeMigLayouts keep their layouts; the
	// agent reports the held device in use, which is what keeps the planner off it.
	ml = env.SetMigLayout(t, ctx, layoutName, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: autoNodes},
		Mode:         v1alpha1.ModeAuto,
		Policy:       &v1alpha1.AutoPolicy{MaxGPUsPerNode: 2},
	})
	env.WaitReady(t, ctx, ml, 2)
	clustertest.Poll(t, ctx, 30*time.Second, fmt.Sprintf("NodeMigLayout %s to report GPU %d's 7g.80gb@0 in use", pinNode, pinGPU), func(ctx context.Context) (bool, string) {
		nml := env.GetNodeMigLayout(t, ctx, pinNode)
		for _, g := range nml.Status.GPUs {
			if int(g.Index) == pinGPU {
				return g.InUse == "7g.80gb@0", fmt.Sprintf("inUse %q", g.InUse)
			}
		}
		return false, fmt.Sprintf("no status of GPU %d", pinGPU)
	})

	// 4. Watch the demand's claims and pods, the simulated GPUs and the NodeMigLayouts.
	obs := observe(t, ctx, ns)

	// 5. The demand: 4x 3g.40gb and 4x 1g.10gb-sized, half by name, half from templates
	// (interleaved), and one device no A100 has.
	for name, cel := range map[string]string{"big": sel3gDriver, "small": sel1g} {
		if _, err := env.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: clustertest.ClaimSpec(cel)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type demand struct{ pod, claim, template, cel string }
	served := []demand{
		{pod: "big-0", claim: "big-0", cel: sel3g},
		{pod: "small-0", claim: "small-0", cel: sel1g},
		{pod: "big-t-0", template: "big"},
		{pod: "small-t-0", template: "small"},
		{pod: "big-1", claim: "big-1", cel: sel3g},
		{pod: "small-1", claim: "small-1", cel: sel1g},
		{pod: "big-t-1", template: "big"},
		{pod: "small-t-1", template: "small"},
	}
	all := append(slices.Clone(served), demand{pod: "huge", claim: "huge", cel: selHuge})
	tDemand := time.Now()
	for _, d := range all {
		if d.claim != "" {
			obs.claimCreated(d.claim, time.Now())
			if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: d.claim}, Spec: clustertest.ClaimSpec(d.cel)}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, clustertest.Pod(ns, d.pod, autoNodes, d.claim, d.template), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("created %d pending pods in %v", len(all), time.Since(tDemand).Round(time.Millisecond))

	// 6. Every served pod is bound and Running.
	pods := map[string]*corev1.Pod{}
	for _, d := range served {
		pods[d.pod] = env.WaitPodRunning(t, ctx, ns, d.pod, 90*time.Second)
	}
	t.Logf("all %d pods Running %.1fs after the demand was created", len(served), time.Since(tDemand).Seconds())
	obs.stop()

	// Each got a device of the kind it asked for that exists in NVML with its process, and
	// no device went to two pods.
	states := map[string]map[string]string{}
	procs := map[string]func(string) int{}
	for _, n := range []string{nodeA, nodeB} {
		st := env.Snapshot(t, n)
		states[n] = clustertest.NVMLDevices(st)
		procs[n] = func(uuid string) int { return len(clustertest.ProcessesOn(st, uuid)) }
	}
	taken := map[string]string{}
	for _, d := range served {
		p := pods[d.pod]
		c := env.GetClaim(t, ctx, ns, clustertest.PodClaim(p))
		pool, dev, ok := clustertest.Allocated(c)
		want := "-mig-3g40gb-"
		if strings.HasPrefix(d.pod, "small") {
			want = "-mig-1g10gb" // 1g.10gb or 1g.10gb+me: both 9728 MiB
		}
		uuid := states[pool][dev]
		switch {
		case !ok:
			t.Errorf("pod %s: claim %s not allocated", d.pod, c.Name)
		case pool != p.Spec.NodeName:
			t.Errorf("pod %s on %s, its claim allocated from pool %s", d.pod, p.Spec.NodeName, pool)
		case !strings.Contains(dev, want):
			t.Errorf("pod %s got %s/%s, want a %s device", d.pod, pool, dev, strings.Trim(want, "-"))
		case uuid == "":
			t.Errorf("pod %s got %s/%s, which NVML does not have", d.pod, pool, dev)
		case procs[pool](uuid) == 0:
			t.Errorf("pod %s: no process on %s/%s (%s)", d.pod, pool, dev, uuid)
		case taken[pool+"/"+dev] != "":
			t.Errorf("pods %s and %s both got %s/%s", taken[pool+"/"+dev], d.pod, pool, dev)
		}
		taken[pool+"/"+dev] = d.pod
		t.Logf("pod %-9s claim %-15s → %s/%s", d.pod, c.Name, pool, dev)
	}

	// 7. The held device was never touched: same UUID, its process running, and no plan
	// ever changed its GPU's desired layout.
	if got := states[pinNode][pinDev]; got != pinUUID {
		t.Errorf("held device %s/%s has uuid %q now, want %q", pinNode, pinDev, got, pinUUID)
	}
	if procs[pinNode](pinUUID) == 0 {
		t.Errorf("the process of pod whole on %s is gone", pinUUID)
	}
	pinKey := fmt.Sprintf("%s/gpu-%d", pinNode, pinGPU)
	if h := obs.specHistory(pinKey); !slices.Equal(h, []string{"7g.80gb@0"}) {
		t.Errorf("desired layouts of %s over the test: %v, want only 7g.80gb@0", pinKey, h)
	}
	planned := plannedChanges(t)
	for _, p := range planned {
		if p.node == pinNode && p.gpu == pinGPU {
			t.Errorf("the planner changed the GPU of the held device: %s", p.line)
		}
	}
	if len(planned) == 0 {
		t.Errorf("the controller log has no planned change")
	}
	for _, k := range obs.specKeys() {
		t.Logf("desired layouts of %s: %s", k, strings.Join(obs.specHistory(k), " → "))
	}

	// 8. The impossible pod hears why and stays pending; the served pods heard that they
	// wait for a repartition.
	waitPodEvent(t, ctx, ns, "huge", controller.EventNotServable)
	for _, d := range served {
		waitPodEvent(t, ctx, ns, d.pod, controller.EventWaitingForRepartition)
	}
	if p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if p.Spec.NodeName != "" {
		t.Errorf("pod huge was bound to %s", p.Spec.NodeName)
	}
	for _, n := range []string{nodeA, nodeB} {
		env.WaitPoolMatchesNVML(t, ctx, n)
	}

	// 9. The numbers.
	var lat []time.Duration
	for _, d := range served {
		claim := d.claim
		if claim == "" {
			claim = clustertest.PodClaim(pods[d.pod])
		}
		created, bound := obs.latency(claim, d.pod)
		if created.IsZero() || bound.IsZero() {
			t.Errorf("pod %s: claim %s seen at %v, bound at %v", d.pod, claim, created, bound)
			continue
		}
		lat = append(lat, bound.Sub(created))
		t.Logf("pod %-9s claim created → pod bound: %v", d.pod, bound.Sub(created).Round(time.Millisecond))
	}
	destroyed, created := obs.deviceChurn()
	var plannedDestroyed []string
	for _, p := range planned {
		plannedDestroyed = append(plannedDestroyed, p.destroyed...)
		t.Logf("planned: %s", p.line)
	}
	sort.Strings(plannedDestroyed)
	t.Logf("claim creation → pod bound over %d pods: p50 %v, p99 %v (batching idle %v, max %v; settle %v)",
		len(lat), percentile(lat, 0.50).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond), batchIdle, batchMax, settlePeriod)
	t.Logf("devices destroyed: %d (%s); created: %d; planned to destroy: %d in %d GPU changes",
		len(destroyed), strings.Join(destroyed, ", "), len(created), len(plannedDestroyed), len(planned))
	// NVML lost exactly the devices the plans destroyed (node/gpu/profile@start, each
	// as often as it was destroyed): none the planner did not choose.
	if diff := cmp.Diff(plannedDestroyed, destroyed, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("devices NVML lost differ from those the plans destroyed (-planned +lost):\n%s", diff)
	}

	// 10. Every GPU now has a device in use, so a 7g.80gb pod arriving now finds no
	// room: a placement is kept for it, it hears that it waits for capacity (not that
	// it cannot be served), and no device is destroyed for it.
	before := map[string]map[string]string{}
	for _, n := range []string{nodeA, nodeB} {
		before[n] = clustertest.NVMLDevices(env.Snapshot(t, n))
	}
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "later"}, Spec: clustertest.ClaimSpec(sel7g)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, clustertest.Pod(ns, "later", autoNodes, "later", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodEvent(t, ctx, ns, "later", controller.EventWaitingForCapacity)
	// The MigLayout's status counts the plan (what `kubectl describe miglayout` shows):
	// the 7g.80gb pod waits on its nodes with a placement kept, the impossible pod counts
	// cluster-wide, and nothing is being repartitioned.
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 30*time.Second, "status.auto counting the waiting pods", func(ml *v1alpha1.MigLayout) bool {
		a := ml.Status.Auto
		return a != nil && a.LastChangeTime != nil && a.PendingPods == 2 && a.WaitingForCapacityPods == 1 && a.NotServablePods == 1 &&
			a.WaitingForRepartitionPods == 0 && a.ChangedGPUs == 0 && a.WaitingForRoomPods == 0
	})
	for _, n := range []string{nodeA, nodeB} {
		if got := clustertest.NVMLDevices(env.Snapshot(t, n)); !maps.Equal(got, before[n]) {
			t.Errorf("%s devices went from %v to %v for a pod no GPU has room for", n, before[n], got)
		}
	}
	if p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "later", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if p.Spec.NodeName != "" {
		t.Errorf("pod later was bound to %s", p.Spec.NodeName)
	}
}

// waitPodEvent waits for an event with the given reason about the pod.
func waitPodEvent(t *testing.T, ctx context.Context, ns, pod, reason string) {
	t.Helper()
	waitPodEventWithin(t, ctx, ns, pod, reason, 20*time.Second)
}

// waitPodEventWithin is waitPodEvent with a timeout.
func waitPodEventWithin(t *testing.T, ctx context.Context, ns, pod, reason string, timeout time.Duration) {
	t.Helper()
	clustertest.Poll(t, ctx, timeout, "event "+reason+" on pod "+ns+"/"+pod, func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Reason == reason {
				t.Logf("pod %s: %s: %s", pod, e.Reason, e.Note)
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return false, "events: " + strings.Join(seen, " | ")
	})
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ---- the controller's planned changes ----

type plannedChange struct {
	node      string
	gpu       int
	destroyed []string // deviceKey of each device the change destroys
	line      string
}

var plannedRE = regexp.MustCompile(`"Planned GPU layout" .*\bnode="([^"]*)" gpu=(\d+) from="([^"]*)" to="([^"]*)" destroyed="([^"]*)"`)

// plannedChanges reads the "Planned GPU layout" lines of the controller's log.
func plannedChanges(t *testing.T) []plannedChange {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Cluster.LogDir(), "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []plannedChange
	for _, line := range strings.Split(string(data), "\n") {
		m := plannedRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var gpu int
		fmt.Sscan(m[2], &gpu)
		d, err := mig.ParseLayout(m[5])
		if err != nil {
			t.Errorf("planned change with unreadable destroyed layout %q: %v", m[5], err)
		}
		var keys []string
		for _, dev := range d {
			keys = append(keys, deviceKey(m[1], gpu, dev.Profile, dev.Start))
		}
		out = append(out, plannedChange{node: m[1], gpu: gpu, destroyed: keys,
			line: fmt.Sprintf("%s/gpu-%s %s → %s (destroys %q)", m[1], m[2], m[3], m[4], m[5])})
	}
	return out
}

// ---- the observer ----

// observer records, from the moment it starts: when each claim of the namespace appeared
// and each pod was first seen bound (informers), every MIG device the simulated GPUs held
// and the desired layout of every GPU over time (sampled every 100ms).
type observer struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	claims   map[string]time.Time
	bound    map[string]time.Time
	devices  map[string]string // uuid → deviceKey, every device seen
	baseline map[string]bool   // uuids at the start
	last     map[string]bool   // uuids at the last sample
	specs    map[string][]string
}

func observe(t *testing.T, ctx context.Context, ns string) *observer {
	ctx, cancel := context.WithCancel(ctx)
	o := &observer{t: t, cancel: cancel, done: make(chan struct{}),
		claims: map[string]time.Time{}, bound: map[string]time.Time{}, devices: map[string]string{},
		specs: map[string][]string{}}
	t.Cleanup(o.stop)
	f := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns))
	_, _ = f.Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if c, ok := obj.(*resourceapi.ResourceClaim); ok {
				o.claimCreated(c.Name, time.Now())
			}
		},
	})
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			o.mu.Lock()
			if _, seen := o.bound[p.Name]; !seen {
				o.bound[p.Name] = time.Now()
			}
			o.mu.Unlock()
		}
	}
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	o.sample(ctx)
	o.baseline = o.last
	go func() {
		defer close(o.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				f.Shutdown()
				return
			case <-tick.C:
				o.sample(ctx)
			}
		}
	}()
	return o
}

func (o *observer) stop() {
	o.cancel()
	<-o.done
}

func (o *observer) claimCreated(name string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, ok := o.claims[name]; !ok || at.Before(prev) {
		o.claims[name] = at
	}
}

func (o *observer) latency(claim, pod string) (created, bound time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.claims[claim], o.bound[pod]
}

func (o *observer) sample(ctx context.Context) {
	now := map[string]bool{}
	devs := map[string]string{}
	for _, n := range []string{nodeA, nodeB} {
		sim, err := env.Cluster.Sim(n)
		if err != nil {
			o.t.Errorf("opening the simulator of %s: %v", n, err)
			return
		}
		for _, g := range sim.Snapshot().GPUs {
			for _, gi := range g.GPUInstances {
				for _, ci := range gi.ComputeInstances {
					now[ci.UUID] = true
					devs[ci.UUID] = deviceKey(n, g.Index, gi.Profile, gi.Placement.Start)
				}
			}
		}
	}
	var nmls v1alpha1.NodeMigLayoutList
	err := env.CRC.List(ctx, &nmls)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = now
	for u, d := range devs {
		o.devices[u] = d
	}
	if err != nil {
		return
	}
	for _, nml := range nmls.Items {
		for _, g := range nml.Spec.GPUs {
			k := fmt.Sprintf("%s/gpu-%d", nml.Name, g.Index)
			if h := o.specs[k]; len(h) == 0 || h[len(h)-1] != g.Layout {
				o.specs[k] = append(h, g.Layout)
			}
		}
	}
}

// deviceChurn lists the devices seen (at the start or since) that NVML no longer has, and
// those that appeared after the start.
func (o *observer) deviceChurn() (destroyed, created []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for u, d := range o.devices {
		if !o.last[u] {
			destroyed = append(destroyed, d)
		}
		if !o.baseline[u] {
			created = append(created, d)
		}
	}
	sort.Strings(destroyed)
	sort.Strings(created)
	return destroyed, created
}

// deviceKey names a MIG device by node, GPU index, profile and placement start, as both
// the simulator's snapshot and a planned layout tell it.
func deviceKey(node string, gpu int, profile string, start int) string {
	return fmt.Sprintf("%s/gpu-%d/%s@%d", node, gpu, profile, start)
}

func (o *observer) specHistory(key string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.specs[key])
}

func (o *observer) specKeys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]string, 0, len(o.specs))
	for k := range o.specs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
