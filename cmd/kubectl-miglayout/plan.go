package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

func newPlanCommand(e *env) *cobra.Command {
	var files []string
	var driver string
	var agingAfter, declinedFor time.Duration
	var withExitCode bool
	var schedulerNames []string
	cmd := &cobra.Command{
		Use:   "plan -f MIGLAYOUT.yaml",
		Short: "Dry run: what applying MigLayouts would do to each selected GPU",
		Long: `Show what the miglayout controller and agents would do if the MigLayouts of the
file were applied now, without writing anything: the nodes each selects (and
those another MigLayout selects too, which are left alone), and for each GPU
its current and new layout, the devices that would be destroyed and created,
and the destroyed devices that block the change because a ResourceClaim is
allocated to them or they are in use on the node.

Static MigLayouts are planned with the controller's own rules (the same fit of
profile counts, keeping devices in use and moving as few as possible); Auto
MigLayouts with the planner, over the pods now pending for devices, leaving
out of a pod's plans the nodes the controller has left out because
kube-scheduler did not bind the pod there (read from its SchedulerDeclinedNode
events on the pods, which expire: an hour by default). A node
no MigLayout selected yet (no NodeMigLayout) is read from the ResourceSlices
its agent publishes. It reads Nodes, NodeMigLayouts, MigLayouts,
ResourceSlices, ResourceClaims and, for Auto, Pods, DeviceClasses, Events and
DeviceTaintRules (a user who may not read the last two is warned). Each
MigLayout is first admitted by the API server in a dry run (nothing is
stored), so one kubectl apply would refuse is refused here with the same
reason; several MigLayouts in the files are planned as applied together.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agingAfter < 0 {
				return fmt.Errorf("--auto-aging-after=%s: want 0 (never) or more, as the controller's", agingAfter)
			}
			if err := controller.ValidateSchedulerNames(schedulerNames); err != nil {
				return fmt.Errorf("--auto-scheduler-names: %w, as the controller's", err)
			}
			if declinedFor <= 0 {
				// As the controller takes its flag.
				declinedFor = controller.DefaultDeclinedFor
			}
			docs, err := e.readManifests(files)
			if err != nil {
				return err
			}
			var mls []v1alpha1.MigLayout
			var written []*unstructured.Unstructured // as given, for the API server
			for _, d := range docs {
				if d.kind() != "MigLayout" {
					return fmt.Errorf("%s: plan reads MigLayouts only", d.describe())
				}
				// kubectl apply refuses both; the dry run below would
				// fail on the client side, which is not a refusal.
				if v := d.apiVersion(); v != v1alpha1.GroupVersion.String() {
					return fmt.Errorf("%s: apiVersion %q: plan reads MigLayouts of %s, the version the API server serves", d.describe(), v, v1alpha1.GroupVersion)
				}
				if d.name() == "" {
					return fmt.Errorf("%s: no metadata.name: kubectl apply needs one (metadata.generateName is not enough)", d.describe())
				}
				if nulls := nullValues(d.Object); len(nulls) > 0 {
					return fmt.Errorf("%s: %s left without a value (null): the API server refuses it on create and server-side apply, and a client-side kubectl apply or edit deletes the key instead; give a value (quote an empty label value)",
						d.describe(), strings.Join(nulls, ", "))
				}
				// Strict about what plan reads, not about status: a stored
				// MigLayout (kubectl get -o yaml) of a newer release may carry
				// status fields this plugin does not know.
				spec := maps.Clone(d.Object)
				delete(spec, "status")
				var ml v1alpha1.MigLayout
				if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(spec, &ml, true); err != nil {
					return fmt.Errorf("%s: %w", d.describe(), err)
				}
				if ml.Spec.Mode == "" {
					ml.Spec.Mode = v1alpha1.ModeStatic
				}
				if slices.ContainsFunc(mls, func(o v1alpha1.MigLayout) bool { return o.Name == ml.Name }) {
					return fmt.Errorf("%s: MigLayout %q is given twice", d.describe(), ml.Name)
				}
				mls = append(mls, ml)
				written = append(written, &unstructured.Unstructured{Object: d.Object})
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			for _, w := range written {
				if err := validateOnServer(cmd.Context(), c, w, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			st, err := loadPlanState(cmd.Context(), c, driver)
			if err != nil {
				return err
			}
			st.now, st.agingAfter, st.declinedFor, st.warn = e.clock(), agingAfter, declinedFor, cmd.ErrOrStderr()
			st.schedulerNames = sets.New(schedulerNames...)
			all := st.withApplied(mls)
			for i := range mls {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if err := st.plan(cmd.Context(), printable{cmd.OutOrStdout()}, &mls[i], all, mls); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "\nNothing was written.")
			switch {
			case !withExitCode:
			case st.attention > 0:
				return exitCode(3)
			case st.changes > 0:
				return exitCode(2)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file of MigLayouts (YAML or JSON; - for standard input); repeatable")
	cmd.Flags().StringVar(&driver, "driver", migslices.DefaultDriverName, "DRA driver name the agents publish under")
	cmd.Flags().BoolVar(&withExitCode, "exit-code", false, "exit 0 when no GPU would change, 2 when some would (a change in flight cancelled included), 3 when something needs a look first (a node in conflict, a GPU that cannot be configured, a change blocked by a device in use, a rule that decides no GPU, an Auto policy profile or spare no GPU offers, a node selector that selects no node), 1 on error")
	cmd.Flags().DurationVar(&agingAfter, "auto-aging-after", planner.DefaultAgingAfter, "Auto mode: as the controller's flag of that name, a pod pending this long is planned by age (0: never)")
	cmd.Flags().StringSliceVar(&schedulerNames, "auto-scheduler-names", []string{corev1.DefaultSchedulerName}, "Auto mode: as the controller's flag of that name, the schedulers (spec.schedulerName) whose unschedulable pods are demand")
	cmd.Flags().DurationVar(&declinedFor, "auto-declined-for", controller.DefaultDeclinedFor, "Auto mode: as the controller's flag of that name (0 or less: 10m); a node left out of a pod's plans (its SchedulerDeclinedNode events) is left out for at most 8 times this")
	return cmd
}

// planState is the cluster as the plan reads it.
type planState struct {
	driver     string
	nodes      []corev1.Node
	labels     map[string]map[string]string
	nmls       map[string]*v1alpha1.NodeMigLayout
	migLayouts []v1alpha1.MigLayout
	devices    *clusterDevices
	// Auto mode only, read on first use.
	c       client.Client
	pods    []corev1.Pod
	claims  map[types.NamespacedName]*resourceapi.ResourceClaim
	classes []*resourceapi.DeviceClass
	// taintRules are the cluster's DeviceTaintRules (none where not served).
	taintRules []resourceapi.DeviceTaintRule
	// declined are the nodes the controller has left out of pending pods'
	// plans, from its events (controller.DeclinedNodes).
	declined map[types.UID][]string
	loaded   bool
	// warn receives what the plan could not read and went on without.
	warn io.Writer
	// now and agingAfter: pods pending longer than agingAfter at now are
	// planned by age (the controller's --auto-aging-after).
	now        time.Time
	agingAfter time.Duration
	// declinedFor is the controller's --auto-declined-for.
	declinedFor time.Duration
	// schedulerNames is the controller's --auto-scheduler-names.
	schedulerNames sets.Set[string]
	// handedPlanned are the nodes whose new MigLayout's plan was printed
	// already (planHandedOver), by one of the file's MigLayouts handing
	// them over.
	handedPlanned map[string]bool
	// changes counts the GPUs the plans change; attention the things to
	// look at before applying (a node in conflict, a GPU that cannot be
	// configured, a change blocked by a device in use, a rule that decides
	// no GPU, a selector of no node): --exit-code.
	changes, attention int
	// auto is the one Auto plan of every Auto MigLayout there would be
	// (autoPlan), made on first use: the controller plans them together.
	auto *autoPlan
}

// autoPlan is the controller's plan of all Auto MigLayouts at once, as
// applied: the snapshot, the planner's result, the blocked changes it
// cancels, and per applied MigLayout the nodes read from ResourceSlices.
type autoPlan struct {
	snap       planner.Snapshot
	res        planner.Result
	cancels    []planner.Change
	fromSlices map[string][]string
}

func loadPlanState(ctx context.Context, c client.Client, driver string) (*planState, error) {
	st := &planState{driver: driver, c: c, labels: map[string]map[string]string{}, nmls: map[string]*v1alpha1.NodeMigLayout{}}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	st.nodes = nodes.Items
	for _, n := range nodes.Items {
		st.labels[n.Name] = n.Labels
	}
	var nmls v1alpha1.NodeMigLayoutList
	if err := c.List(ctx, &nmls); err != nil {
		return nil, fmt.Errorf("listing NodeMigLayouts: %w", err)
	}
	for i := range nmls.Items {
		st.nmls[nmls.Items[i].Name] = &nmls.Items[i]
	}
	var mls v1alpha1.MigLayoutList
	if err := c.List(ctx, &mls); err != nil {
		return nil, fmt.Errorf("listing MigLayouts: %w", err)
	}
	st.migLayouts = mls.Items
	var err error
	if st.devices, err = loadDevices(ctx, c, driver, nil); err != nil {
		return nil, err
	}
	return st, nil
}

// withApplied returns the cluster's MigLayouts with mls applied together
// (each replacing the one of its name, whose UID it takes), so that
// MigLayouts of one file that select the same nodes conflict as they would
// once applied.
func (st *planState) withApplied(mls []v1alpha1.MigLayout) []v1alpha1.MigLayout {
	applied := map[string]bool{}
	for i := range mls {
		applied[mls[i].Name] = true
		for _, o := range st.migLayouts {
			if o.Name == mls[i].Name {
				mls[i].UID = o.UID
			}
		}
		if mls[i].UID == "" {
			mls[i].UID = types.UID("planned-" + mls[i].Name)
		}
	}
	var all []v1alpha1.MigLayout
	for _, o := range st.migLayouts {
		if !applied[o.Name] {
			all = append(all, o)
		}
	}
	return append(all, mls...)
}

// plan prints what applying ml, with all the MigLayouts there would then
// be (withApplied) and the others of the files (applied, ml among them),
// would change.
func (st *planState) plan(ctx context.Context, w io.Writer, ml *v1alpha1.MigLayout, all, applied []v1alpha1.MigLayout) error {
	sel, err := controller.SelectNodes(ml, all, st.labels)
	if err != nil {
		return fmt.Errorf("MigLayout %s: %w", ml.Name, err)
	}
	sel = controller.HeldByInvalidSelectors(ml, sel, all, st.nmls)
	fmt.Fprintf(w, "MigLayout %s (%s) selects %s", ml.Name, ml.Spec.Mode, plural(len(sel.Nodes), "node"))
	if len(sel.Nodes) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(sel.Nodes, ", "))
	}
	fmt.Fprintln(w)
	if len(sel.Nodes) == 0 {
		// Most often a label typo: applied, the MigLayout is
		// Degraded/NoNodes; --exit-code does not pass it as a no-op.
		fmt.Fprintf(w, "  %s: %s\n", v1alpha1.ReasonNoNodes, controller.NoNodesMessage)
		st.attention++
	}
	if msg := sel.ConflictMessage(); msg != "" {
		fmt.Fprintf(w, "  conflict: %s\n", msg)
	}
	if ml.Spec.Paused {
		if ml.Spec.Mode == v1alpha1.ModeAuto {
			fmt.Fprintln(w, "  paused (spec.paused): the planner changes nothing on its nodes while it is set; the pods only they could serve wait")
		} else {
			fmt.Fprintln(w, "  paused (spec.paused): no change below is started while it is set (a change not started yet is dropped); this is what resuming it would do")
		}
	}
	// Nodes it manages now that it would no longer select: the controller
	// releases their NodeMigLayouts; their agents change nothing.
	// A change in flight there stops where it is (the agent of a node no
	// MigLayout manages changes nothing). As for the controller, it
	// manages the NodeMigLayouts it controls: one an earlier MigLayout of
	// the name left behind (kubectl delete --cascade=orphan) is not
	// released.
	handed := st.handedOver(ml, all, sel)
	var released, cancelled []string
	for _, name := range slices.Sorted(maps.Keys(st.nmls)) {
		nml := st.nmls[name]
		if !metav1.IsControlledBy(nml, ml) || nml.DeletionTimestamp != nil || slices.Contains(sel.Nodes, name) {
			continue
		}
		if _, ok := handed[name]; ok {
			continue // its new MigLayout's plan says what becomes of it
		}
		released = append(released, name)
		for _, d := range nml.Spec.GPUs {
			i := slices.IndexFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return g.Index == d.Index })
			if i >= 0 && !sameLayout(d, nml.Status.GPUs[i]) {
				cancelled = append(cancelled, fmt.Sprintf("%s %s (to %s)", name, migslices.GPUDeviceName(int(d.Index)), layoutText(d.MIGEnabled, d.Layout)))
			}
		}
	}
	if len(released) > 0 {
		fmt.Fprintf(w, "  no longer selects %s: released, their GPUs keep the layouts they have\n", strings.Join(released, ", "))
	}
	if len(cancelled) > 0 {
		fmt.Fprintf(w, "  cancels the changes in flight (the agent stops where it is) on %s\n", strings.Join(cancelled, ", "))
		st.changes += len(cancelled) // the specs change: --exit-code tells it
	}
	st.planHandedOver(w, handed, applied)
	if ml.Spec.Mode == v1alpha1.ModeAuto {
		return st.planAuto(ctx, w, ml, all, applied, sel)
	}
	st.planStatic(w, ml, sel, false)
	return nil
}

// handedOver returns, with the MigLayout that takes them over, the nodes
// ml selects now or whose NodeMigLayouts it controls that another
// MigLayout selects alone once the files are applied, where it did not
// before (ml selected them too: a conflict, which leaves them as they are;
// or ml held them): its rules decide their layouts from then on. ml's
// nodes are the ones it selects (in st.migLayouts) or controls.
func (st *planState) handedOver(ml *v1alpha1.MigLayout, all []v1alpha1.MigLayout, sel controller.Selection) map[string]*v1alpha1.MigLayout {
	mine := map[string]bool{}
	if before := slices.IndexFunc(st.migLayouts, func(o v1alpha1.MigLayout) bool { return o.Name == ml.Name }); before >= 0 {
		if was, err := controller.SelectNodes(&st.migLayouts[before], st.migLayouts, st.labels); err == nil {
			for _, n := range was.Nodes {
				mine[n] = true
			}
		}
	}
	for name, nml := range st.nmls {
		if metav1.IsControlledBy(nml, ml) {
			mine[name] = true
		}
	}
	out := map[string]*v1alpha1.MigLayout{}
	for i := range all {
		other := &all[i]
		if other.Name == ml.Name {
			continue
		}
		after, err := controller.SelectNodes(other, all, st.labels)
		if err != nil {
			continue // reported as that MigLayout's InvalidSelector
		}
		// As the controller: a node another MigLayout holds while its
		// selector does not parse is left as it is.
		after = controller.HeldByInvalidSelectors(other, after, all, st.nmls)
		var was controller.Selection
		if j := slices.IndexFunc(st.migLayouts, func(o v1alpha1.MigLayout) bool { return o.Name == other.Name }); j >= 0 {
			was, _ = controller.SelectNodes(&st.migLayouts[j], st.migLayouts, st.labels)
			was = controller.HeldByInvalidSelectors(&st.migLayouts[j], was, st.migLayouts, st.nmls)
		}
		for _, n := range after.Nodes {
			if mine[n] && !after.Conflicted(n) && !slices.Contains(sel.Nodes, n) && (was.Conflicted(n) || !slices.Contains(was.Nodes, n)) {
				out[n] = other
			}
		}
	}
	return out
}

// planHandedOver prints what becomes of the nodes handed over to another
// MigLayout (handedOver): where that MigLayout is not in the files (applied)
// and no other of them printed it already (st.handedPlanned), a Static
// one's plan there (its changes counted), or, for an Auto or a paused one,
// what it does (counted as needing a look); one in the files plans them in
// its own section.
func (st *planState) planHandedOver(w io.Writer, handed map[string]*v1alpha1.MigLayout, applied []v1alpha1.MigLayout) {
	byOwner := map[string][]string{}
	owners := map[string]*v1alpha1.MigLayout{}
	for n, o := range handed {
		byOwner[o.Name] = append(byOwner[o.Name], n)
		owners[o.Name] = o
	}
	if st.handedPlanned == nil {
		st.handedPlanned = map[string]bool{}
	}
	for _, name := range slices.Sorted(maps.Keys(byOwner)) {
		other, nodes := owners[name], slices.Sorted(slices.Values(byOwner[name]))
		fmt.Fprintf(w, "  no longer selects %s, which MigLayout %s (%s) then selects alone and takes over:", strings.Join(nodes, ", "), other.Name, other.Spec.Mode)
		if slices.ContainsFunc(applied, func(a v1alpha1.MigLayout) bool { return a.Name == other.Name }) {
			fmt.Fprintf(w, " its plan in the files shows what it does there\n")
			continue
		}
		shown := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return !st.handedPlanned[n] })
		nodes = slices.DeleteFunc(nodes, func(n string) bool { return st.handedPlanned[n] })
		if len(shown) > 0 {
			fmt.Fprintf(w, " its plan on %s is shown above", strings.Join(shown, ", "))
			if len(nodes) == 0 {
				fmt.Fprintln(w)
				continue
			}
			fmt.Fprint(w, ";")
		}
		for _, n := range nodes {
			st.handedPlanned[n] = true
		}
		switch {
		case other.Spec.Paused:
			fmt.Fprintln(w, " it is paused, so nothing is started there while it is")
			st.attention++
		case other.Spec.Mode == v1alpha1.ModeAuto:
			fmt.Fprintln(w, " its planner plans their GPUs from then on (kubectl miglayout plan on it shows what)")
			st.attention++
		default:
			fmt.Fprintln(w, " its rules decide the layouts there")
			st.planStatic(w, other, controller.Selection{Nodes: nodes}, true)
		}
	}
}

// gpuChange is one GPU's planned change.
type gpuChange struct {
	from, to           string
	destroyed, created []string
	blocked            []string
	// reset says the MIG mode change waits for a GPU reset (Ampere).
	reset string
}

// planStatic prints the Static plan of ml on the nodes of sel; handedOver
// plans nodes another MigLayout hands ml (planHandedOver): its spec's
// problems are left to its own plan, and the summary names it.
func (st *planState) planStatic(w io.Writer, ml *v1alpha1.MigLayout, sel controller.Selection, handedOver bool) {
	cat := mig.DefaultCatalog()
	changing, blockedGPUs, nodesChanging, cancels := 0, 0, 0, 0
	for _, node := range sel.Nodes {
		fmt.Fprintln(w)
		if sel.Conflicted(node) {
			fmt.Fprintf(w, "%s: another MigLayout selects it too: left as it is\n", node)
			st.attention++
			continue
		}
		var inventory []v1alpha1.GPUStatus
		var prev []v1alpha1.GPUSpec
		fromSlices := false
		head := node
		if nml := st.nmls[node]; nml != nil {
			if !controller.AgentReported(nml) {
				// As the controller's row for it says; until it reports,
				// the MigLayout is not Ready. Not counted as needing a
				// look: a node just selected reports within seconds.
				fmt.Fprintf(w, "%s: the miglayout agent has not reported the node's GPUs yet (is it running there?): nothing to plan\n", node)
				continue
			}
			if len(nml.Status.GPUs) == 0 {
				fmt.Fprintf(w, "%s: the miglayout agent reports no GPU on the node: nothing to plan\n", node)
				continue
			}
			inventory = nml.Status.GPUs
			// As the controller does: the spec the node holds now,
			// whichever MigLayout wrote it, keeps devices where they are.
			prev = nml.Spec.GPUs
			if nml.Spec.MigLayout != "" && nml.Spec.MigLayout != ml.Name {
				head += fmt.Sprintf("  (now follows MigLayout %s)", nml.Spec.MigLayout)
			}
		} else {
			// No MigLayout selected the node yet: its agent publishes
			// its GPUs in ResourceSlices but reports nowhere else.
			inventory, fromSlices = publishedInventory(cat, st.devices.devices[node], st.devices.allocated[node]), true
			if len(inventory) == 0 {
				fmt.Fprintf(w, "%s: no GPU published under %s (no miglayout agent runs there, or its GPUs have MIG on and no device): nothing to plan\n", node, st.driver)
				continue
			}
			head += "  (GPUs as its ResourceSlices publish them: a GPU with MIG on and no device is not published)"
		}
		fmt.Fprintln(w, head)
		desired, problems := controller.DesiredGPUs(cat, ml.Spec.Rules, inventory, prev)
		want := map[int32]v1alpha1.GPUSpec{}
		for _, d := range desired {
			want[d.Index] = d
		}
		held := map[int32]v1alpha1.GPUSpec{}
		for _, p := range prev {
			held[p.Index] = p
		}
		problem, unknownModel := map[int32]string{}, map[int32]bool{}
		for _, p := range problems {
			problem[p.GPU] = p.Message
			unknownModel[p.GPU] = p.Reason == v1alpha1.ReasonUnknownGPU
		}
		gpus := slices.Clone(inventory)
		slices.SortFunc(gpus, func(a, b v1alpha1.GPUStatus) int { return int(a.Index - b.Index) })
		nodeChanges := 0
		for _, g := range gpus {
			label := fmt.Sprintf("  %-6s %s", migslices.GPUDeviceName(int(g.Index)), modelName(cat, g))
			unreadable := g.Reason == v1alpha1.ReasonGPUUnreadable
			if unreadable || g.Reason == v1alpha1.ReasonGPUMissing {
				// Its MIG mode and layout are unknown; the agent
				// changes nothing on it. A rule that cannot be applied
				// to it is reported all the same (Failed).
				what := "missing, left as it is until NVML counts it again"
				if unreadable {
					what = "unreadable, left as it is until its agent can read it again"
				}
				fmt.Fprintf(w, "%s: %s (%s)", label, what, g.Message)
				if msg, ok := problem[g.Index]; ok {
					fmt.Fprintf(w, "; its rule cannot be applied: %s", msg)
					st.attention++
				}
				fmt.Fprintln(w)
				continue
			}
			if msg, ok := problem[g.Index]; ok && fromSlices && unknownModel[g.Index] && g.MIGCapable == nil {
				// ResourceSlices do not say whether a GPU has MIG: one
				// without (an L4 beside A100s) is no rule's, and the
				// controller leaves it alone; not counted as needing a
				// look.
				fmt.Fprintf(w, "%s: left as it is if it has no MIG (its ResourceSlices do not say), else reported UnknownGPU once the node is selected: %s\n", label, msg)
				continue
			}
			if msg, ok := problem[g.Index]; ok {
				// The controller keeps what the spec asked for where the
				// GPU holds it or its change is under way, and drops a
				// change not begun (DesiredGPUs).
				st.attention++
				d, kept := want[g.Index]
				h, inFlight := held[g.Index]
				inFlight = inFlight && !sameLayout(h, g)
				switch {
				case inFlight && kept && sameSpec(h, d):
					fmt.Fprintf(w, "%s: cannot be configured: %s; the change begun, to %s, is carried out\n", label, msg, layoutText(h.MIGEnabled, h.Layout))
				case inFlight:
					fmt.Fprintf(w, "%s: cannot be configured, left as it is: %s; cancels the change in flight to %s\n",
						label, msg, layoutText(h.MIGEnabled, h.Layout))
					cancels++
					st.changes++ // the node's spec changes: --exit-code tells it
				default:
					fmt.Fprintf(w, "%s: cannot be configured, left as it is: %s\n", label, msg)
				}
				continue
			}
			d, ok := want[g.Index]
			if !ok {
				// The controller leaves the GPU out of the node's spec:
				// a change in flight on it stops where it is.
				if h, ok := held[g.Index]; ok && !sameLayout(h, g) {
					fmt.Fprintf(w, "%s: no rule matches: left as it is (%s); cancels the change in flight to %s\n",
						label, layoutText(g.MIGEnabled, g.Layout), layoutText(h.MIGEnabled, h.Layout))
					cancels++
					st.changes++ // the node's spec changes: --exit-code tells it
					continue
				}
				fmt.Fprintf(w, "%s: no rule matches: left as it is (%s)\n", label, layoutText(g.MIGEnabled, g.Layout))
				continue
			}
			ch := st.change(cat, node, g, d)
			// A change in flight the new layout does not ask for: the
			// agent stops it where it is.
			inFlight := ""
			if h, ok := held[g.Index]; ok && !sameLayout(h, g) && !sameSpec(h, d) {
				inFlight = layoutText(h.MIGEnabled, h.Layout)
				cancels++
			}
			if ch.from == ch.to && len(ch.destroyed) == 0 && len(ch.created) == 0 && ch.reset == "" {
				if inFlight != "" {
					fmt.Fprintf(w, "%s: no change (%s); cancels the change in flight to %s\n", label, ch.to, inFlight)
					st.changes++ // the node's spec changes: --exit-code tells it
				} else {
					fmt.Fprintf(w, "%s: no change (%s)\n", label, ch.to)
				}
				continue
			}
			changing++
			nodeChanges++
			fmt.Fprintf(w, "%s: %s -> %s\n", label, ch.from, ch.to)
			if d.Reason != "" {
				fmt.Fprintf(w, "           why:      %s\n", d.Reason)
			}
			if inFlight != "" {
				fmt.Fprintf(w, "           replaces: the change in flight to %s\n", inFlight)
			}
			for _, x := range ch.destroyed {
				fmt.Fprintf(w, "           destroy:  %s\n", x)
			}
			if len(ch.created) > 0 {
				fmt.Fprintf(w, "           create:   %s\n", strings.Join(ch.created, ", "))
			}
			if len(ch.blocked) > 0 {
				blockedGPUs++
				fmt.Fprintf(w, "           blocked until released: %s\n", strings.Join(ch.blocked, "; "))
			}
			if ch.reset != "" {
				fmt.Fprintf(w, "           reset:    %s\n", ch.reset)
			}
		}
		if nodeChanges > 0 {
			nodesChanging++
		}
	}
	st.changes += changing
	st.attention += blockedGPUs
	summary := "Summary"
	if handedOver {
		summary = "Summary of the nodes MigLayout " + ml.Name + " takes over"
	} else {
		st.printSpecProblems(w, cat, ml, sel)
	}
	fmt.Fprintf(w, "\n%s: %s would change on %s", summary, plural(changing, "GPU"), plural(nodesChanging, "node"))
	if blockedGPUs > 0 {
		fmt.Fprintf(w, "; %d blocked by devices in use (the agent waits, nothing is destroyed under a workload)", blockedGPUs)
	}
	if cancels > 0 {
		fmt.Fprintf(w, "; cancels %s in flight (the agent stops where it is)", plural(cancels, "change"))
	}
	if ml.Spec.MaxNodesChanging != nil && int(*ml.Spec.MaxNodesChanging) < nodesChanging {
		fmt.Fprintf(w, "; at most %d node(s) change at once (spec.maxNodesChanging), in node name order, the others wait their turn", *ml.Spec.MaxNodesChanging)
	}
	fmt.Fprintln(w, ".")
}

// printSpecProblems prints the problems of ml's spec the controller would
// report (Degraded: a rule that decides no GPU, an allowed profile or a
// spare no GPU offers, ...), judged as the controller judges them: on the
// agents' reports, once every node's is in; a node no MigLayout selected
// yet counts with its GPUs as its ResourceSlices publish them, as its agent
// will report them once the controller makes its NodeMigLayout. A node in
// conflict without one gets none, so its GPUs never count for the
// controller, nor here. Each needs attention (--exit-code 3).
func (st *planState) printSpecProblems(w io.Writer, cat *mig.Catalog, ml *v1alpha1.MigLayout, sel controller.Selection) {
	nmls := maps.Clone(st.nmls)
	for _, node := range sel.Nodes {
		if nmls[node] == nil && !sel.Conflicted(node) {
			if inv := publishedInventory(cat, st.devices.devices[node], st.devices.allocated[node]); len(inv) > 0 {
				nmls[node] = &v1alpha1.NodeMigLayout{Status: v1alpha1.NodeMigLayoutStatus{GPUs: inv}}
			}
		}
	}
	if specProblems := controller.CheckSpec(cat, &ml.Spec, controller.SelectedInventory(sel, nmls)); len(specProblems) > 0 {
		fmt.Fprintln(w)
		for _, p := range specProblems {
			fmt.Fprintf(w, "%s: %s\n", p.Reason, p.Message)
		}
		st.attention += len(specProblems)
	}
}

func layoutText(migOn bool, layout string) string {
	switch {
	case !migOn:
		return "MIG off"
	case layout == "":
		return "MIG on, no device"
	}
	return layout
}

// sameSpec reports whether two desired states of a GPU ask for the same
// thing.
func sameSpec(a, b v1alpha1.GPUSpec) bool {
	if a.MIGEnabled != b.MIGEnabled {
		return false
	}
	if !a.MIGEnabled {
		return true
	}
	x, err1 := mig.ParseLayout(a.Layout)
	y, err2 := mig.ParseLayout(b.Layout)
	return err1 == nil && err2 == nil && x.Equal(y)
}

// change compares GPU g with its desired state d.
func (st *planState) change(cat *mig.Catalog, node string, g v1alpha1.GPUStatus, d v1alpha1.GPUSpec) gpuChange {
	ch := gpuChange{from: layoutText(g.MIGEnabled, g.Layout), to: layoutText(d.MIGEnabled, d.Layout)}
	model := gpuModel(cat, g)
	current, _ := mig.ParseLayout(g.Layout)
	inUse, _ := mig.ParseLayout(g.InUse)
	var desired mig.Layout
	if d.MIGEnabled {
		desired, _ = mig.ParseLayout(d.Layout)
	}
	if !g.MIGEnabled {
		current = nil
	}
	if g.MIGEnabled != d.MIGEnabled && !g.MIGEnabled {
		// MIG off -> on: the whole GPU goes.
		name := migslices.GPUDeviceName(int(g.Index))
		ch.destroyed = append(ch.destroyed, "whole GPU ("+name+"), MIG mode on")
		if why := st.blocker(node, name, false); why != "" {
			ch.blocked = append(ch.blocked, "whole GPU: "+why)
		}
	}
	var plan mig.Plan
	if model != nil {
		plan = model.Diff(current, desired)
	}
	for _, x := range plan.Destroy {
		name := x.String()
		if model != nil {
			if p, err := model.Profile(x.Profile); err == nil {
				name = st.devices.migName(node, int(g.Index), x, p.ID)
			}
		}
		ch.destroyed = append(ch.destroyed, fmt.Sprintf("%s (%s)", x, name))
		if why := st.blocker(node, name, inUse.Contains(x)); why != "" {
			ch.blocked = append(ch.blocked, x.String()+": "+why)
		}
	}
	if g.MIGEnabled != d.MIGEnabled && !d.MIGEnabled {
		ch.created = append(ch.created, "whole GPU, MIG mode off")
	}
	resetHow := "the node reboots (an external nvidia-smi -r fails while the agent, an NVML client, runs on the node)"
	switch {
	case g.MIGEnabled != g.MIGPending && g.MIGPending == d.MIGEnabled:
		// As the agent: the change asked for is pending already.
		ch.reset = fmt.Sprintf("the MIG mode change to %s is pending: the GPU stays ResetRequired until nothing uses it (the agent then sets the mode again) or %s", onOff(d.MIGEnabled), resetHow)
	case g.MIGEnabled != g.MIGPending:
		ch.reset = fmt.Sprintf("cancels the pending MIG mode change to %s (the next reset would apply it)", onOff(g.MIGPending))
	case g.MIGEnabled != d.MIGEnabled && model != nil && model.MIGModeNeedsReset:
		ch.reset = fmt.Sprintf("%s changes MIG mode through a GPU reset, which a process on the GPU prevents; the GPU then stays ResetRequired until nothing uses it (the agent then sets the mode again) or %s", model.Name, resetHow)
	}
	for _, x := range plan.Create {
		ch.created = append(ch.created, x.String())
	}
	return ch
}

// blocker says why a device must not be destroyed now, or "".
func (st *planState) blocker(node, name string, inUse bool) string {
	if claim, ok := st.devices.allocated[node][name]; ok {
		return "allocated to ResourceClaim " + claim
	}
	if inUse {
		return "in use on the node (prepared for a container or running a process)"
	}
	return ""
}

func (st *planState) loadAuto(ctx context.Context) error {
	if st.loaded {
		return nil
	}
	var pods corev1.PodList
	if err := st.c.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing Pods: %w", err)
	}
	st.pods = pods.Items
	var claims resourceapi.ResourceClaimList
	if err := st.c.List(ctx, &claims); err != nil {
		return fmt.Errorf("listing ResourceClaims: %w", err)
	}
	st.claims = map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for i := range claims.Items {
		cl := &claims.Items[i]
		st.claims[types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}] = cl
	}
	var classes resourceapi.DeviceClassList
	if err := st.c.List(ctx, &classes); err != nil {
		return fmt.Errorf("listing DeviceClasses: %w", err)
	}
	for i := range classes.Items {
		st.classes = append(st.classes, &classes.Items[i])
	}
	// DeviceTaintRules, where the API server serves them (1.37+).
	var rules resourceapi.DeviceTaintRuleList
	// A user who may not read them plans as though no rule tainted a
	// device (as the controller, which may, does not).
	switch err := st.c.List(ctx, &rules); {
	case err == nil:
		st.taintRules = rules.Items
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		if st.warn != nil {
			fmt.Fprintf(st.warn, "warning: DeviceTaintRules cannot be read (%v); devices they taint are planned as untainted\n", err)
		}
	default:
		return fmt.Errorf("listing DeviceTaintRules: %w", err)
	}
	// The nodes the controller has left out of pods' plans, from its
	// events: without them, a pod kube-scheduler keeps off a node would
	// be shown getting that node's free devices. A dry run goes on
	// without them.
	if events, err := controller.ListDeclinedEvents(ctx, st.c); err != nil {
		if st.warn != nil {
			fmt.Fprintf(st.warn, "warning: the controller's %s events cannot be read (%v); no node is left out of a pod's plans\n", controller.EventSchedulerDeclinedNode, err)
		}
	} else {
		st.declined = controller.DeclinedNodes(events, st.now, st.declinedFor)
	}
	st.loaded = true
	return nil
}

// planAll makes the Auto plan of all (the MigLayouts there would be, with
// applied among them), once: as if applied, each applied Auto MigLayout
// adopts the NodeMigLayouts of the nodes it selects alone, and one
// snapshot holds every Auto MigLayout's nodes, as the controller's does.
func (st *planState) planAll(ctx context.Context, all []v1alpha1.MigLayout, applied []v1alpha1.MigLayout) (*autoPlan, error) {
	if st.auto != nil {
		return st.auto, nil
	}
	if err := st.loadAuto(ctx); err != nil {
		return nil, err
	}
	ap := &autoPlan{fromSlices: map[string][]string{}}
	nmls := map[string]*v1alpha1.NodeMigLayout{}
	for name, nml := range st.nmls {
		nmls[name] = nml
	}
	for i := range applied {
		ml := &applied[i]
		if ml.Spec.Mode != v1alpha1.ModeAuto {
			continue
		}
		sel, err := controller.SelectNodes(ml, all, st.labels)
		if err != nil {
			return nil, fmt.Errorf("MigLayout %s: %w", ml.Name, err)
		}
		sel = controller.HeldByInvalidSelectors(ml, sel, all, st.nmls)
		owner := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout",
			Name: ml.Name, UID: ml.UID, Controller: ptr.To(true)}}
		for _, node := range sel.Nodes {
			if sel.Conflicted(node) {
				continue
			}
			if nml := st.nmls[node]; nml != nil {
				cp := nml.DeepCopy()
				cp.OwnerReferences = owner
				nmls[node] = cp
				continue
			}
			// No MigLayout selected the node yet: its agent publishes
			// its GPUs in ResourceSlices but reports nowhere else.
			if inv := publishedInventory(mig.DefaultCatalog(), st.devices.devices[node], st.devices.allocated[node]); len(inv) > 0 {
				nmls[node] = &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: node, OwnerReferences: owner},
					Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: ml.Name}, Status: v1alpha1.NodeMigLayoutStatus{GPUs: inv}}
				ap.fromSlices[ml.Name] = append(ap.fromSlices[ml.Name], node)
			}
		}
	}
	// Nodes the controller reports with a lost agent are planned as it
	// plans them: frozen.
	var stored []*v1alpha1.MigLayout
	for i := range st.migLayouts {
		stored = append(stored, &st.migLayouts[i])
	}
	in := controller.AutoInputs{MigLayouts: all, Nodes: st.nodes, NodeMigLayouts: nmls, Pods: st.pods, Claims: st.claims,
		Classes: st.classes, Slices: st.devices.slices, TaintRules: st.taintRules, Driver: st.driver, LostAgents: controller.LostInStatus(stored...),
		SchedulerNames: st.schedulerNames}
	snap := controller.AutoSnapshot(ctx, in, mig.DefaultCatalog(), st.now, st.agingAfter)
	for i := range snap.Pending {
		snap.Pending[i].Declined = st.declined[snap.Pending[i].Pod.UID]
	}
	res, err := planner.Plan(ctx, snap)
	if err != nil {
		return nil, fmt.Errorf("planning: %w", err)
	}
	ap.snap, ap.res, ap.cancels = snap, res, controller.AutoCancels(in, snap, res)
	st.auto = ap
	return ap, nil
}

// planAuto prints the part of the Auto plan (planAll) on ml's nodes; the
// pods nothing serves now are the whole plan's.
func (st *planState) planAuto(ctx context.Context, w io.Writer, ml *v1alpha1.MigLayout, all []v1alpha1.MigLayout, applied []v1alpha1.MigLayout, sel controller.Selection) error {
	ap, err := st.planAll(ctx, all, applied)
	if err != nil {
		return err
	}
	if fromSlices := ap.fromSlices[ml.Name]; len(fromSlices) > 0 {
		fmt.Fprintf(w, "  GPUs of %s as ResourceSlices publish them (no MigLayout selected them yet; a GPU with MIG on and no device is not published)\n",
			strings.Join(fromSlices, ", "))
	}
	if len(sel.Nodes) == 0 {
		// The pods pending are other Auto MigLayouts' to serve, or no
		// one's: listing them here would read as this one's doing.
		fmt.Fprintln(w, "\nSummary: it selects no node, so it plans nothing.")
		return nil
	}
	snap, res, cancels := ap.snap, ap.res, ap.cancels
	mine := map[string]bool{}
	for _, n := range sel.Nodes {
		mine[n] = true
	}
	fmt.Fprintf(w, "  %s pending for MIG devices\n", plural(len(snap.Pending), "pod"))
	changes := 0
	for _, c := range cancels {
		if !mine[c.Node] {
			continue
		}
		changes++
		fmt.Fprintf(w, "\n%s\n  %-6s %s -> %s\n", c.Node, migslices.GPUDeviceName(c.GPU), layoutText(true, c.From.String()), layoutText(true, c.To.String()))
		fmt.Fprintf(w, "           why:      %s\n", c.Reason)
	}
	for _, c := range res.Changes {
		if !mine[c.Node] || controller.MakesReclaimAgain(snap, c) {
			continue
		}
		changes++
		fmt.Fprintf(w, "\n%s\n  %-6s %s -> %s\n", c.Node, migslices.GPUDeviceName(c.GPU), layoutText(true, c.From.String()), layoutText(true, c.To.String()))
		if c.Reason != "" {
			fmt.Fprintf(w, "           why:      %s\n", c.Reason)
		}
		for _, x := range c.Destroyed {
			fmt.Fprintf(w, "           destroy:  %s (free)\n", x)
		}
		if len(c.Created) > 0 {
			fmt.Fprintf(w, "           create:   %s\n", c.Created)
		}
		if len(c.Serves) > 0 {
			fmt.Fprintf(w, "           serves:   %s\n", strings.Join(c.Serves, ", "))
		}
	}
	for _, p := range res.Served {
		if mine[p.Node] && !p.NeedsChange {
			fmt.Fprintf(w, "  %s fits existing free devices on %s: %s\n", p.Pod, p.Node, strings.Join(p.Devices, ", "))
		}
	}
	waiting := map[string]string{}
	for pod, k := range res.Kept {
		if mine[k.Node] {
			waiting[pod] = k.String() + " kept for it"
		}
	}
	cannot := map[string]string{}
	for pod, why := range res.Unservable {
		switch why {
		case planner.NoRoom:
			waiting[pod] = "it takes the first room that frees up"
		case planner.WaitsForLostNode, planner.WaitsForAllModeNode, planner.WaitsForNodeResources, planner.WaitsForSharedClaim:
			waiting[pod] = why
		default:
			cannot[pod] = why
		}
	}
	for _, list := range []struct {
		head string
		pods map[string]string
	}{
		{"Pods no GPU can take now (devices in use, the limits on GPUs changed at once, a node that cannot be changed now: its agent lost, its MigLayout paused, or not adopted yet; or a claim they share not allocated yet):", waiting},
		{"Pods no Auto node can serve:", cannot},
	} {
		if len(list.pods) == 0 {
			continue
		}
		fmt.Fprintln(w, "\n"+list.head)
		for _, pod := range slices.Sorted(maps.Keys(list.pods)) {
			fmt.Fprintf(w, "  %s: %s\n", pod, list.pods[pod])
		}
	}
	var missing []string
	for _, node := range slices.Sorted(maps.Keys(res.MissingSpares)) {
		if !mine[node] {
			continue
		}
		profiles := res.MissingSpares[node]
		for _, prof := range slices.Sorted(maps.Keys(profiles)) {
			missing = append(missing, fmt.Sprintf("  %s: %d %s", node, profiles[prof], prof))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintln(w, "\nSpares not made (they would destroy a device, or the limits on GPUs changed at once are reached):")
		fmt.Fprintln(w, strings.Join(missing, "\n"))
	}
	st.changes += changes
	for _, n := range sel.Nodes {
		if sel.Conflicted(n) {
			st.attention++
		}
	}
	st.printSpecProblems(w, mig.DefaultCatalog(), ml, sel)
	fmt.Fprintf(w, "\nSummary: %s would change (devices in use are never destroyed in Auto mode).\n", plural(changes, "GPU"))
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// nullValues names the entries of a MigLayout document's maps that the CRD
// refuses without a value (null: a key left empty in YAML): the node
// selector's labels, the rules' profile counts and the Auto policy's
// spares. Decoded, they would read as "" or 0; plan refuses them itself,
// also where it cannot ask the API server.
func nullValues(obj map[string]any) []string {
	var out []string
	nulls := func(path string, m any) {
		mm, _ := m.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(mm)) {
			if mm[k] == nil {
				out = append(out, path+"["+k+"]")
			}
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	if sel, ok := spec["nodeSelector"].(map[string]any); ok {
		nulls("spec.nodeSelector.matchLabels", sel["matchLabels"])
	}
	rules, _ := spec["rules"].([]any)
	for i, r := range rules {
		if rule, ok := r.(map[string]any); ok {
			nulls(fmt.Sprintf("spec.rules[%d].profiles", i), rule["profiles"])
		}
	}
	if policy, ok := spec["policy"].(map[string]any); ok {
		nulls("spec.policy.spares", policy["spares"])
	}
	return out
}

// validateOnServer asks the API server to admit the MigLayout doc, as
// given (not as the typed object would serialize it: an empty profiles map
// or rules list is part of what the server judges), without storing it (a
// dry-run create, or update where it exists), so that plan refuses what
// kubectl apply would refuse: the CRD's schema and CEL rules, and admission
// (a ValidatingAdmissionPolicy or webhook that forbids it: a 403 although
// RBAC allows the write, asked with a SelfSubjectAccessReview). An API
// server that cannot be asked (no permission to write MigLayouts) is
// reported on warn and the MigLayout is planned as given.
func validateOnServer(ctx context.Context, c client.Client, doc *unstructured.Unstructured, warn io.Writer) error {
	obj := doc.DeepCopy()
	delete(obj.Object, "status")
	obj.SetUID("")
	obj.SetResourceVersion("")
	name := obj.GetName()
	// written: err is the dry-run write's answer (not the Get's), as verb.
	verb, written := "create", true
	err := c.Create(ctx, obj, client.DryRunAll)
	if apierrors.IsAlreadyExists(err) {
		var cur v1alpha1.MigLayout
		if err = c.Get(ctx, client.ObjectKey{Name: name}, &cur); err == nil {
			obj.SetResourceVersion(cur.ResourceVersion)
			verb = "update"
			err = c.Update(ctx, obj, client.DryRunAll)
		} else {
			written = false
		}
	}
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || written && apierrors.IsForbidden(err) && rbacAllows(ctx, c, verb, name):
		return fmt.Errorf("MigLayout %q would be refused by the API server: %w", name, err)
	default:
		fmt.Fprintf(warn, "warning: MigLayout %q was not checked by the API server (%v); planned as given\n", name, err)
		return nil
	}
}

// rbacAllows reports whether the user may verb the MigLayout name
// (SelfSubjectAccessReview): a 403 then comes from admission, not RBAC.
// A review that cannot be made counts as not allowed.
func rbacAllows(ctx context.Context, c client.Client, verb, name string) bool {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: v1alpha1.GroupVersion.Group, Resource: "miglayouts", Verb: verb, Name: name},
	}}
	if err := c.Create(ctx, review); err != nil {
		return false
	}
	return review.Status.Allowed
}
