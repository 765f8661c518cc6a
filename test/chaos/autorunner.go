package chaos

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// Labels of the Auto workload's pods.
const (
	autoAppLabel     = "chaos.miglayout.io/app"
	autoProfileLabel = "chaos.miglayout.io/profile"
)

// AutoResult is what one Auto scenario produced.
type AutoResult struct {
	Scenario *AutoScenario
	Faults   []FaultResult
	// Invariant counts (all must be 0).
	AllocatedDestroyed int // allocated device destroyed (NVML-based)
	UndrainedDestroyed int // device destroyed whose withdrawal from the pool lacked the drain taint
	PoolAllocAnomalies int // allocation landed on an unpublished device, or a device withdrawn while allocated
	TaintedAllocations int // allocation landed on a tainted device (observed, see Result.Failed)
	PoolMismatch       int // published ≠ NVML once settled
	Leaked             int // GIs without CI; Ready GPUs holding other instances than desired
	Stuck              int // pending pods that fit beside the devices in use, never bound (liveness)
	NotConverged       int // stages that did not settle within the bound
	// Observations.
	Unpacked  int // pending pods that the freed cluster could hold all together, left pending
	Pods      int // pods created
	Served    int // pods bound
	Destroyed int // MIG devices the agents destroyed while Auto mode ran
	Plans     int // GPU layout changes the planner wrote
	Reverts   int // planned changes of a GPU back to a layout it was planned away from
	Unused    int // devices created while Auto mode ran and destroyed again, never allocated
	Drains    int
	Settle1   time.Duration // from the churn's end until no pending pod is stuck (holds kept)
	Settle2   time.Duration // from the release of the bound pods until no pending pod is stuck
	Took      time.Duration
	// PoolAbsences: as Result's.
	PoolAbsences []time.Duration
	// HarnessErrors: as Result's.
	HarnessErrors int
	Problems      []string
	Notes         []string
}

// Failed reports whether an invariant was violated, or the scenario could
// not be run as written (HarnessErrors).
func (r *AutoResult) Failed() bool {
	return r.AllocatedDestroyed+r.UndrainedDestroyed+r.PoolAllocAnomalies+r.PoolMismatch+r.Leaked+r.Stuck+r.NotConverged+r.HarnessErrors > 0
}

// DestroyedPerServed is the number of devices destroyed per pod served.
func (r *AutoResult) DestroyedPerServed() float64 {
	if r.Served == 0 {
		return 0
	}
	return float64(r.Destroyed) / float64(r.Served)
}

// ensurePriorityClass creates AutoPriorityClass (absent only).
func (e *Env) ensurePriorityClass(ctx context.Context) error {
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: AutoPriorityClass},
		Value:            AutoPriority,
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
		Description:      "Auto chaos workload: served first, evicts nothing",
	}
	_, err := e.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating PriorityClass %s: %w", AutoPriorityClass, err)
	}
	return nil
}

// createAutoPod creates a claim for one MIG device of the arrival's profile and a pod
// using it that may run on either chaos node; both are named name.
func (e *Env) createAutoPod(ctx context.Context, ns, name string, a AutoArrival) error {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clustertest.ClaimSpec(ProfileSelector(a.Profile))}
	if _, err := e.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating claim %s/%s: %w", ns, name, err)
	}
	pod := clustertest.Pod(ns, name, map[string]string{roleLabel: "chaos"}, name, "")
	pod.Labels = map[string]string{autoAppLabel: "auto", autoProfileLabel: a.Profile}
	if a.High {
		pod.Spec.PriorityClassName = AutoPriorityClass
	}
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// RunAuto runs one Auto scenario: the chaos nodes reach its Static base layout, the
// chaos MigLayout switches to Auto, pods arrive and depart during the window while the
// faults strike; then, holds kept and nothing arriving, every pending pod that a GPU
// could serve beside the devices in use must be bound within LivenessTimeout, and again
// once the bound pods are released (and all of them, when the freed GPUs could hold them
// together: an observation); last, with everything released, the pools must match NVML
// and no GPU instance may lack its compute instance.
func (r *Runner) RunAuto(ctx context.Context, sc *AutoScenario, livenessTimeout time.Duration) *AutoResult {
	res := &AutoResult{Scenario: sc}
	start := time.Now()
	env := r.Env
	problem := func(format string, args ...any) {
		res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
	}
	note := func(format string, args ...any) {
		res.Notes = append(res.Notes, fmt.Sprintf(format, args...))
	}
	if err := env.ensurePriorityClass(ctx); err != nil {
		res.HarnessErrors++
		problem("%v", err)
		return res
	}

	// The base layout, without faults or claims.
	gen, err := env.SetMigLayout(ctx, ChaosLayout, sc.Base)
	if err == nil {
		_, err = env.WaitConverged(ctx, ChaosLayout, gen, env.ChaosNodes, false, 2*r.StageTimeout)
	}
	if err != nil {
		res.NotConverged++
		problem("reaching the base layout: %v", err)
		res.Took = time.Since(start)
		return res
	}
	since := time.Now()
	agentOff := map[string]int64{}
	for _, n := range env.ChaosNodes {
		agentOff[n] = fileSize(agentLog(env, n))
	}
	ctrlLog := filepath.Join(env.Cluster.LogDir(), "controller.log")
	ctrlOff := fileSize(ctrlLog)
	r.ctrlLogFrom = ctrlOff
	r.agentLogFrom = agentOff
	gen, err = env.SetMigLayout(ctx, ChaosLayout, sc.AutoSpec())
	if err != nil {
		res.HarnessErrors++
		problem("%v", err)
	}

	// The faults watch for their moment from the churn's start.
	fctx, fcancel := context.WithTimeout(ctx, sc.Window+12*time.Second)
	var wg sync.WaitGroup
	churnStart := make(chan time.Time, len(sc.Faults))
	res.Faults = make([]FaultResult, len(sc.Faults))
	for i, f := range sc.Faults {
		fr := &FaultResult{Fault: f}
		if err := r.arm(fctx, f, fr); err != nil {
			res.HarnessErrors++
			problem("arming %s: %v", f, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.strike(fctx, f, fr, churnStart, sc.Window)
			res.Faults[i] = *fr
		}()
	}
	t0 := time.Now()
	for range sc.Faults {
		churnStart <- t0
	}
	allocated := map[string]sets.Set[string]{}
	for _, n := range env.ChaosNodes {
		allocated[n] = sets.New[string]()
	}
	r.allocSeen = allocated
	defer func() { r.allocSeen = nil }()
	pods := r.churnAuto(ctx, sc, t0, res, problem)
	wg.Wait()
	fcancel()
	faultProblems(res.Faults, problem)
	env.ResumeScheduler()
	for _, n := range env.ChaosNodes {
		if err := env.EnsureAgent(ctx, n); err != nil {
			problem("restarting the agent of %s: %v", n, err)
		}
	}
	r.settleFaults(res.Faults)

	// Liveness, holds kept: nothing arrives or departs any more.
	tl := time.Now()
	j, err := r.awaitServed(ctx, pods, livenessTimeout, false)
	res.Settle1 = time.Since(tl)
	if err != nil {
		res.NotConverged++
		problem("stage 1 (holds kept): %v", err)
	}
	if len(j.Stuck) > 0 {
		res.Stuck += len(j.Stuck)
		for _, s := range describeVerdicts(j.Stuck) {
			problem("stage 1 (holds kept): pending pod %s, never bound within %s", s, livenessTimeout)
		}
		r.explainStuck(ctx, j.Stuck, problem)
	}
	for _, s := range describeVerdicts(j.Excused) {
		note("stage 1: pending pod %s", s)
	}

	// Liveness once the bound pods are released.
	tl = time.Now()
	if err := r.releaseBound(ctx); err != nil {
		problem("releasing the bound pods: %v", err)
	}
	j, err = r.awaitServed(ctx, pods, livenessTimeout, true)
	res.Settle2 = time.Since(tl)
	if err != nil {
		res.NotConverged++
		problem("stage 2 (bound pods released): %v", err)
	}
	if len(j.Stuck) > 0 {
		res.Stuck += len(j.Stuck)
		for _, s := range describeVerdicts(j.Stuck) {
			problem("stage 2 (bound pods released): pending pod %s, never bound within %s", s, livenessTimeout)
		}
		r.explainStuck(ctx, j.Stuck, problem)
	}
	if j.Unpacked > 0 {
		res.Unpacked = j.Unpacked
		note("stage 2: %d pending pods the freed GPUs could hold together were left pending: %s", j.Unpacked, strings.Join(describeVerdicts(j.Excused), "; "))
	}
	res.Served = r.countServed(ctx, pods)

	// Counts of the Auto run, before the release's own repartitions.
	for _, n := range env.ChaosNodes {
		log := readFrom(agentLog(env, n), agentOff[n])
		res.Destroyed += bytes.Count(log, []byte(`"Destroying MIG device"`))
		res.Drains += bytes.Count(log, []byte(`"Draining devices"`))
		res.Unused += unusedDestroys(log, allocated[n])
	}
	res.Plans, res.Reverts = countPlans(readFrom(ctrlLog, ctrlOff))

	// Everything released: the nodes settle, and the pools match NVML.
	if err := env.ReleaseAll(ctx, r.Namespace); err != nil {
		problem("releasing the claims: %v", err)
	}
	if _, err := env.WaitConverged(ctx, ChaosLayout, lastGeneration(gen, res.Faults), env.ChaosNodes, false, r.StageTimeout); err != nil {
		res.NotConverged++
		problem("stage 3 (everything released): %v", err)
	}
	check := env.Check(ctx, env.ChaosNodes, 3*time.Second)
	res.PoolMismatch, res.Leaked = len(check.PoolMismatch), len(check.Leaked)
	for _, s := range union(check.PoolMismatch, check.Leaked, check.JournalLeft) {
		problem("%s", s)
	}

	v := r.monitorVerdict(ctx, since, res.Faults, problem, note)
	res.AllocatedDestroyed, res.UndrainedDestroyed, res.TaintedAllocations = v.destroyed, v.undrained, v.tainted
	res.PoolAllocAnomalies, res.PoolAbsences = v.anomalies, v.absent
	res.Pods = len(pods)
	res.Took = time.Since(start)
	return res
}

// churnAuto creates the scenario's pods at their times, deletes each one its hold after
// it is bound (or at its abandon time), until the window ends; it returns the pods
// created by name.
func (r *Runner) churnAuto(ctx context.Context, sc *AutoScenario, t0 time.Time, res *AutoResult, problem func(string, ...any)) map[string]autoPod {
	env := r.Env
	pods := map[string]autoPod{}
	arrivals := map[string]AutoArrival{}
	boundAt := map[string]time.Time{}
	deleted := map[string]bool{}
	next := 0
	del := func(name string) {
		deleted[name] = true
		if err := env.DeleteWorkload(ctx, r.Namespace, name); err != nil {
			problem("deleting %s: %v", name, err)
		}
	}
	for now := time.Now(); now.Before(t0.Add(sc.Window)) && ctx.Err() == nil; now = time.Now() {
		for ; next < len(sc.Arrivals) && now.After(t0.Add(sc.Arrivals[next].At)); next++ {
			a := sc.Arrivals[next]
			r.seq++
			name := fmt.Sprintf("a%d-%s", r.seq, strings.ReplaceAll(a.Profile, ".", ""))
			if err := env.createAutoPod(ctx, r.Namespace, name, a); err != nil {
				problem("%v", err)
				continue
			}
			prio := int32(0)
			if a.High {
				prio = AutoPriority
			}
			pods[name] = autoPod{Name: name, Profile: a.Profile, Priority: prio}
			arrivals[name] = a
		}
		list, err := env.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range list.Items {
				if _, ok := boundAt[p.Name]; !ok && p.Spec.NodeName != "" {
					boundAt[p.Name] = now
				}
			}
		}
		if inUse, err := env.inUseDevices(ctx, env.ChaosNodes); err == nil {
			r.noteAllocated(inUse)
		}
		for name, a := range arrivals {
			if deleted[name] {
				continue
			}
			if b, ok := boundAt[name]; (ok && now.After(b.Add(a.Hold))) || (a.AbandonAt > 0 && now.After(t0.Add(a.AbandonAt))) {
				del(name)
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return pods
}

// livenessVerdict is judgement plus what stage 2 observes.
type livenessVerdict struct {
	judgement
	// Unpacked: pending pods left while the freed GPUs could hold all of them.
	Unpacked int
}

// awaitServed waits until no pending pod of pods is stuck (judgePending) and no pod or
// claim is being deleted, up to timeout; with all, also until none of the pods pending
// at the start is pending any more where the GPUs, every device freed, could hold all of
// them together (not reaching that is reported as Unpacked, not as stuck: the planner
// packs greedily, largest first). It returns the last verdict, and an error where the
// stage did not settle for want of a verdict (no read of the pods and GPUs succeeded) or
// with pods or claims still being deleted at the timeout.
func (r *Runner) awaitServed(ctx context.Context, pods map[string]autoPod, timeout time.Duration, all bool) (livenessVerdict, error) {
	deadline := time.Now().Add(timeout)
	var v livenessVerdict
	var first map[string]bool // the pods pending at the start, when the freed GPUs hold them together
	judged, deletingLast := false, 0
	for {
		pending, gpus, deleting, err := r.pendingAndGPUs(ctx, pods)
		if err == nil {
			judged, deletingLast = true, deleting
			if all && first == nil {
				first = map[string]bool{}
				if holdTogether(pending, gpus) {
					for _, p := range pending {
						first[p.Name] = true
					}
				}
			}
			v = livenessVerdict{judgement: judgePending(pending, gpus, r.keptPlacements())}
			for _, p := range pending {
				if first[p.Name] {
					v.Unpacked++
				}
			}
			if len(v.Stuck) == 0 && v.Unpacked == 0 && deleting == 0 {
				return v, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			switch {
			case !judged:
				return v, fmt.Errorf("no verdict within %s: %w", timeout, cmp.Or(err, ctx.Err()))
			case deletingLast > 0:
				return v, fmt.Errorf("%d pods or claims still being deleted after %s", deletingLast, timeout)
			}
			return v, nil
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// pendingAndGPUs lists the workload's pending pods (not bound, not being deleted, their
// claim not allocated), the chaos nodes' GPUs with the devices in use, and how many pods
// and claims are being deleted (the devices they free are not judged free yet).
func (r *Runner) pendingAndGPUs(ctx context.Context, pods map[string]autoPod) ([]autoPod, []gpuView, int, error) {
	env := r.Env
	list, err := env.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("listing pods: %w", err)
	}
	claims, err := env.Client.ResourceV1().ResourceClaims(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("listing claims: %w", err)
	}
	allocated := map[string]bool{}
	deleting := 0
	for _, c := range claims.Items {
		allocated[c.Name] = c.Status.Allocation != nil
		if c.DeletionTimestamp != nil {
			deleting++
		}
	}
	var pending []autoPod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			deleting++
		}
		ap, ok := pods[p.Name]
		if !ok || p.DeletionTimestamp != nil || p.Spec.NodeName != "" || allocated[p.Name] {
			continue
		}
		pending = append(pending, ap)
	}
	inUse, err := env.inUseDevices(ctx, env.ChaosNodes)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("listing devices in use: %w", err)
	}
	r.noteAllocated(inUse)
	states := map[string]nvmlsim.State{}
	for _, n := range env.ChaosNodes {
		st, err := env.SimState(n)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("reading the simulator of %s: %w", n, err)
		}
		states[n] = st
	}
	gpus, err := gpuViews(states, inUse)
	return pending, gpus, deleting, err
}

// noteAllocated adds devices in use to those seen allocated during an Auto run.
func (r *Runner) noteAllocated(inUse map[string]sets.Set[string]) {
	for n, s := range inUse {
		if seen, ok := r.allocSeen[n]; ok {
			seen.Insert(s.UnsortedList()...)
		}
	}
}

// releaseBound deletes the bound pods of the namespace and their claims and waits
// until they are gone.
func (r *Runner) releaseBound(ctx context.Context) error {
	env := r.Env
	list, err := env.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var names []string
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			names = append(names, p.Name)
			if err := env.DeleteWorkload(ctx, r.Namespace, p.Name); err != nil {
				return fmt.Errorf("deleting %s: %w", p.Name, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for _, n := range names {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, perr := env.Client.CoreV1().Pods(r.Namespace).Get(ctx, n, metav1.GetOptions{})
			_, cerr := env.Client.ResourceV1().ResourceClaims(r.Namespace).Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(perr) && apierrors.IsNotFound(cerr), nil
		})
		if err != nil {
			return fmt.Errorf("pod or claim %s not gone after 90s", n)
		}
	}
	return nil
}

// countServed counts the pods of the scenario that were ever bound: the scheduler's
// events tell (one Scheduled event per binding), the pods themselves may be gone.
func (r *Runner) countServed(ctx context.Context, pods map[string]autoPod) int {
	evs, err := r.Env.Client.CoreV1().Events(r.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		return 0
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		if _, ok := pods[e.InvolvedObject.Name]; ok && e.InvolvedObject.Kind == "Pod" {
			seen[e.InvolvedObject.Name] = true
		}
	}
	return len(seen)
}

// explainStuck adds, for each stuck pod, its last events (the scheduler's and the
// planner's reasons).
func (r *Runner) explainStuck(ctx context.Context, stuck map[string]string, problem func(string, ...any)) {
	defer r.explainNodes(ctx, problem)
	evs, err := r.Env.Client.CoreV1().Events(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		problem("  listing the events of stuck pods: %v", err)
		return
	}
	for name := range stuck {
		type told struct {
			at   time.Time
			text string
		}
		var all []told
		for _, e := range evs.Items {
			if e.InvolvedObject.Name != name {
				continue
			}
			// Events of the events.k8s.io API (the components') carry their
			// time and count in eventTime and series, not in lastTimestamp
			// and count.
			at, n := e.LastTimestamp.Time, e.Count
			if at.IsZero() {
				at = e.EventTime.Time
			}
			if e.Series != nil {
				at, n = e.Series.LastObservedTime.Time, e.Series.Count
			}
			all = append(all, told{at, fmt.Sprintf("%s %s (x%d): %s", at.Format("15:04:05"), e.Reason, max(n, 1), e.Message)})
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
		var last []string
		for _, t := range all {
			last = append(last, t.text)
		}
		if len(last) > 4 {
			last = last[len(last)-4:]
		}
		problem("  events of %s: %s", name, strings.Join(last, " | "))
	}
}

var retryRE = regexp.MustCompile(`(?m)^I(\d{4} \d{2}:\d{2}:\d{2}\.\d+) .*"Retrying after backoff".* after="([^"]+)"`)

// explainNodes reports, for each chaos node, its GPU rows as its NodeMigLayout's
// status shows them and the agent's last retry delay since the scenario's Auto mode
// began: whether a stuck pod waited on a node still retrying, and for how long.
func (r *Runner) explainNodes(ctx context.Context, problem func(string, ...any)) {
	for _, n := range r.Env.ChaosNodes {
		var nml v1alpha1.NodeMigLayout
		if err := r.Env.CRC.Get(ctx, crclient.ObjectKey{Name: n}, &nml); err != nil {
			problem("  node %s: reading its NodeMigLayout: %v", n, err)
			continue
		}
		var rows []string
		for _, g := range nml.Status.GPUs {
			since := ""
			if g.LastTransitionTime != nil {
				since = " since " + g.LastTransitionTime.Format("15:04:05")
			}
			rows = append(rows, fmt.Sprintf("gpu %d %s/%s%s: %s", g.Index, g.Phase, g.Reason, since, g.Message))
		}
		retry := "none"
		if m := retryRE.FindAllSubmatch(readFrom(agentLog(r.Env, n), r.agentLogFrom[n]), -1); len(m) > 0 {
			last := m[len(m)-1]
			retry = fmt.Sprintf("%s at %s", last[2], last[1])
		}
		problem("  node %s: %s; the agent's last retry delay: %s", n, strings.Join(rows, " | "), retry)
	}
}

var (
	keptRE  = regexp.MustCompile(`memory slices (\d+)-(\d+) of ([^/]+)/gpu-(\d+) \(where a [^ ]+ goes\) are kept for it`)
	eventRE = regexp.MustCompile(`"Event occurred" [^\n]*? object="([^"/]+)/([^"]+)" kind="Pod"[^\n]*? reason="([^"]+)"[^\n]*? note="((?:[^"\\]|\\.)*)"`)
)

// keptPlacements reads, from the last note the planner gave each pod of the namespace
// since the scenario started (the controller logs every event it emits; the Events API
// folds a note repeated after another into the first one's series, so it cannot tell
// which came last), the placement kept for it: a zero keptPlacement where that note
// says it takes the first room that frees up; no entry where the last note is of
// another kind.
func (r *Runner) keptPlacements() map[string]keptPlacement {
	return parseKeptPlacements(readFrom(filepath.Join(r.Env.Cluster.LogDir(), "controller.log"), r.ctrlLogFrom), r.Namespace)
}

// parseKeptPlacements is keptPlacements on the controller's log of the scenario, for
// the pods of namespace ns.
func parseKeptPlacements(log []byte, ns string) map[string]keptPlacement {
	out := map[string]keptPlacement{}
	for _, m := range eventRE.FindAllSubmatch(log, -1) {
		if string(m[1]) != ns {
			continue
		}
		pod, reason, note := string(m[2]), string(m[3]), string(m[4])
		if reason != "WaitingForCapacity" && reason != "WaitingForRepartition" && reason != "NotServableByAutoMode" {
			continue
		}
		delete(out, pod)
		switch k := keptRE.FindStringSubmatch(note); {
		case k != nil:
			lo, _ := strconv.Atoi(k[1])
			hi, _ := strconv.Atoi(k[2])
			gpu, _ := strconv.Atoi(k[4])
			out[pod] = keptPlacement{Node: k[3], GPU: gpu, Placement: mig.Placement{Start: lo, Size: hi - lo + 1}}
		case reason == "WaitingForCapacity" && strings.Contains(note, "takes the first room that frees up"):
			out[pod] = keptPlacement{}
		}
	}
	return out
}

var plannedRE = regexp.MustCompile(`"Planned GPU layout" [^\n]*? node="([^"]+)" gpu=(\d+) from="([^"]*)" to="([^"]*)"`)

// countPlans counts the controller's planned GPU layout changes in its log, and those
// that plan a GPU back to a layout an earlier change of the run planned it away from.
func countPlans(log []byte) (plans, reverts int) {
	left := map[string]map[string]bool{} // node/gpu → layouts planned away from
	for _, m := range plannedRE.FindAllSubmatch(log, -1) {
		plans++
		key := string(m[1]) + "/" + string(m[2])
		if left[key] == nil {
			left[key] = map[string]bool{}
		}
		if left[key][string(m[4])] {
			reverts++
		}
		left[key][string(m[3])] = true
	}
	return plans, reverts
}
