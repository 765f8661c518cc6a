package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

func newStatusCommand(e *env) *cobra.Command {
	var driver string
	cmd := &cobra.Command{
		Use:   "status [NODE]",
		Short: "Show each GPU's MIG devices as a map of its memory slices",
		Long: `Show, for every node a MigLayout selects (one with a NodeMigLayout; or the
given one), each GPU's devices laid over its memory slices, one box per device:

  gpu-0  A100-SXM4-80GB  Ready   [3g.40gb*                              ][2g.20gb           ][1g.10gb~] --------

A device marked * is allocated to a ResourceClaim or in use on the node, ~ is
draining (published with the drain taint: it is about to be destroyed), ? is
not published in the node's ResourceSlices; an unmarked device is free.
" -------- " is a memory slice no device holds. A GPU whose desired layout
differs from its actual one shows the desired layout and why below it. A
node whose agent stopped renewing its heartbeat Lease is marked AGENT LOST:
what it shows is the agent's last report. A node its MigLayout holds back
(spec.maxNodesChanging) shows the MigLayout's row ("waits its turn"), and
the problems of the MigLayouts' specs that no GPU shows (a rule that decides
no GPU, a node selector that selects no node) come first.

It reads NodeMigLayouts, MigLayouts, the driver's ResourceSlices and
ResourceClaims. A user who may not list the last two is warned, and the
marks they give are left out: without ResourceSlices no device is marked ~
or ?, without ResourceClaims * marks only what the agents report in use.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			node := ""
			if len(args) == 1 {
				node = args[0]
			}
			st, err := loadStatus(cmd.Context(), c, driver, node, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			writeStatus(printable{cmd.OutOrStdout()}, st)
			return nil
		},
	}
	cmd.Flags().StringVar(&driver, "driver", migslices.DefaultDriverName, "DRA driver name the agents publish under")
	return cmd
}

// deviceTaints are what a published device's taints say.
type deviceTaints struct {
	// draining: the drain taint; xid: the Xid taint's value.
	draining bool
	xid      string
}

// clusterDevices are the published devices and their allocations.
type clusterDevices struct {
	driver string
	// published maps pool (node) → device name → its taints of note.
	published map[string]map[string]deviceTaints
	// allocated maps pool → device → the claim (namespace/name) it is
	// allocated to.
	allocated map[string]map[string]string
	// devices are the published devices by pool, of the pool's newest
	// generation (while a pool is republished, slices of the old one may
	// linger).
	devices map[string][]resourceapi.Device
	// slices are all of the cluster's ResourceSlices, every driver's.
	slices []resourceapi.ResourceSlice
	// migNames maps pool → MIG device (GPU index, profile, placement
	// start, from its attributes) → its published name, which carries the
	// GI profile ID NVML gave the device: one made outside miglayout may
	// have another than the catalog's.
	migNames map[string]map[migKey]string
	// slicesUnread is set where the ResourceSlices could not be listed
	// (forbidden, for a lenient caller): nothing is known published or
	// draining, so no device is marked so.
	slicesUnread bool
}

// migKey tells a MIG device of a node by what its attributes say.
type migKey struct {
	gpu     int64
	profile string
	start   int64
}

// migKeyOf is the key of a published MIG device, false for a device that
// lacks the attributes (a whole GPU).
func migKeyOf(dev resourceapi.Device) (migKey, bool) {
	gpu, ok1 := dev.Attributes[migslices.AttrParentIndex]
	prof, ok2 := dev.Attributes[migslices.AttrProfile]
	start, ok3 := dev.Attributes[migslices.AttrPlacementStart]
	if !ok1 || !ok2 || !ok3 || gpu.IntValue == nil || prof.StringValue == nil || start.IntValue == nil {
		return migKey{}, false
	}
	return migKey{gpu: *gpu.IntValue, profile: *prof.StringValue, start: *start.IntValue}, true
}

// migName is the published name of the MIG device d of GPU gpu on node;
// where no device of the node's slices says it is that one, the name
// miglayout gives it (the catalog's GI profile ID).
func (d *clusterDevices) migName(node string, gpu int, dev mig.Device, profileID int) string {
	if n, ok := d.migNames[node][migKey{gpu: int64(gpu), profile: dev.Profile, start: int64(dev.Start)}]; ok {
		return n
	}
	return migslices.MIGDeviceName(gpu, dev.Profile, profileID, dev.Start)
}

// loadDevices reads the cluster's ResourceSlices and ResourceClaims. With
// warn set (status, which only marks devices with them), a list the user
// is forbidden is warned about on warn and left out; without (plan, whose
// plan they decide), it is an error like any other.
func loadDevices(ctx context.Context, c client.Client, driver string, warn io.Writer) (*clusterDevices, error) {
	d := &clusterDevices{driver: driver, published: map[string]map[string]deviceTaints{}, allocated: map[string]map[string]string{},
		devices: map[string][]resourceapi.Device{}, migNames: map[string]map[migKey]string{}}
	forgiven := func(err error) bool { return warn != nil && apierrors.IsForbidden(err) }
	var rs resourceapi.ResourceSliceList
	if err := c.List(ctx, &rs); forgiven(err) {
		fmt.Fprintf(warn, "warning: ResourceSlices cannot be listed (%v): no device is marked draining (~) or not published (?)\n", err)
		d.slicesUnread = true
	} else if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	d.slices = rs.Items
	newest := map[string]int64{}
	for _, s := range rs.Items {
		if s.Spec.Driver == driver {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	for _, s := range rs.Items {
		if s.Spec.Driver != driver {
			continue
		}
		pool := s.Spec.Pool.Name
		if s.Spec.Pool.Generation < newest[pool] {
			continue
		}
		if d.published[pool] == nil {
			d.published[pool] = map[string]deviceTaints{}
		}
		d.devices[pool] = append(d.devices[pool], s.Spec.Devices...)
		for _, dev := range s.Spec.Devices {
			if k, ok := migKeyOf(dev); ok {
				if d.migNames[pool] == nil {
					d.migNames[pool] = map[migKey]string{}
				}
				d.migNames[pool][k] = dev.Name
			}
			taints := d.published[pool][dev.Name]
			draining, xid := migslices.TaintsOf(dev)
			taints.draining = taints.draining || draining
			if xid != "" {
				taints.xid = xid
			}
			d.published[pool][dev.Name] = taints
		}
	}
	var claims resourceapi.ResourceClaimList
	if err := c.List(ctx, &claims); forgiven(err) {
		fmt.Fprintf(warn, "warning: ResourceClaims cannot be listed (%v): devices are marked in use (*) only where the agents report them so, not where a claim is allocated them\n", err)
	} else if err != nil {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	slices.SortFunc(claims.Items, func(a, b resourceapi.ResourceClaim) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			if r.Driver != driver {
				continue
			}
			if d.allocated[r.Pool] == nil {
				d.allocated[r.Pool] = map[string]string{}
			}
			if _, ok := d.allocated[r.Pool][r.Device]; !ok {
				d.allocated[r.Pool][r.Device] = cl.Namespace + "/" + cl.Name
			}
		}
	}
	return d, nil
}

type nodeStatus struct {
	nml     *v1alpha1.NodeMigLayout
	devices *clusterDevices
	// lost is the message of the node's row in its MigLayout's status when
	// that row says the agent is lost (phase Unknown), else empty.
	lost string
	// row is the node's row in the status of the MigLayout its
	// NodeMigLayout names, nil if none: the controller's view, which also
	// tells the GPUs it left out of the NodeMigLayout's spec because their
	// rule is invalid (the agent reports those Ready, as not managed).
	row *v1alpha1.NodeRow
}

type statusView struct {
	nodes []nodeStatus
	// specProblems are the Degraded conditions of MigLayouts that report
	// problems of their spec (a rule that decides no GPU, a selector of no
	// node), which no GPU's row shows: "MigLayout a: Degraded (reason): ...".
	specProblems []string
	// paused are the MigLayouts with spec.paused set: "MigLayout a: paused
	// (spec.paused): ...".
	paused []string
}

// specReasons are the Degraded reasons about a MigLayout's spec itself.
var specReasons = []string{v1alpha1.ReasonInvalidSelector, v1alpha1.ReasonNoNodes, v1alpha1.ReasonRuleMatchesNoGPU,
	v1alpha1.ReasonProfileNotOffered, v1alpha1.ReasonSparesNotHoldable}

func loadStatus(ctx context.Context, c client.Client, driver, node string, warn io.Writer) (*statusView, error) {
	var nmls []v1alpha1.NodeMigLayout
	if node != "" {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, client.ObjectKey{Name: node}, &nml); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("no NodeMigLayout %q: no MigLayout selects that node (the controller makes a NodeMigLayout for each node a MigLayout selects)", node)
			}
			return nil, fmt.Errorf("reading NodeMigLayout %s: %w", node, err)
		}
		nmls = []v1alpha1.NodeMigLayout{nml}
	} else {
		var list v1alpha1.NodeMigLayoutList
		if err := c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing NodeMigLayouts: %w", err)
		}
		nmls = list.Items
	}
	slices.SortFunc(nmls, func(a, b v1alpha1.NodeMigLayout) int { return strings.Compare(a.Name, b.Name) })
	devs, err := loadDevices(ctx, c, driver, warn)
	if err != nil {
		return nil, err
	}
	// The controller, not the agent, tells a lost agent: in its
	// MigLayout's node rows.
	var mls v1alpha1.MigLayoutList
	if err := c.List(ctx, &mls); err != nil {
		return nil, fmt.Errorf("listing MigLayouts: %w", err)
	}
	lost := map[string]string{}
	rows := map[string]*v1alpha1.NodeRow{} // by MigLayout and node
	for _, ml := range mls.Items {
		for i, r := range ml.Status.Nodes {
			if r.Phase == v1alpha1.PhaseUnknown {
				lost[r.Node] = r.Message
			}
			rows[ml.Name+"/"+r.Node] = &ml.Status.Nodes[i]
		}
	}
	v := &statusView{}
	for _, ml := range mls.Items {
		if node != "" && !slices.ContainsFunc(nmls, func(n v1alpha1.NodeMigLayout) bool { return n.Spec.MigLayout == ml.Name }) {
			continue
		}
		if ml.Spec.Paused {
			v.paused = append(v.paused, fmt.Sprintf("MigLayout %s: paused (spec.paused): no change is started on its nodes until it is resumed", ml.Name))
		}
		// Degraded's reason is the first present (GPU reasons before spec
		// ones); its message counts the spec problems it names.
		c := meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionTrue && (slices.Contains(specReasons, c.Reason) || strings.Contains(c.Message, " spec problem")) {
			v.specProblems = append(v.specProblems, fmt.Sprintf("MigLayout %s: Degraded (%s): %s", ml.Name, c.Reason, c.Message))
		}
	}
	for i := range nmls {
		v.nodes = append(v.nodes, nodeStatus{nml: &nmls[i], devices: devs, lost: lost[nmls[i].Name],
			row: rows[nmls[i].Spec.MigLayout+"/"+nmls[i].Name]})
	}
	return v, nil
}

// sliceWidth is the width of one memory slice in the placement map.
const sliceWidth = 10

// Marks of the placement map.
const (
	markUsed     = "*"
	markDraining = "~"
	markMissing  = "?"
	markXid      = "!"
)

// xidsOn returns the Xids (sorted, each once) that hit GPU g of node: the
// Xid taints' values of the devices of g that node's pool publishes, and
// the Xids g's status row lists (GPUStatus.Xids: a GPU with MIG mode on
// and no device, or taints the API server dropped).
func xidsOn(devices *clusterDevices, node string, g v1alpha1.GPUStatus) []string {
	var out []string
	for _, x := range g.Xids {
		out = append(out, strconv.FormatInt(x.Xid, 10))
	}
	if devices != nil {
		for name, t := range devices.published[node] {
			if idx, _, ok := migslices.DeviceGPUIndex(name); ok && idx == int(g.Index) && t.xid != "" {
				out = append(out, t.xid)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func writeStatus(w io.Writer, v *statusView) {
	for _, p := range append(slices.Clone(v.paused), v.specProblems...) {
		fmt.Fprintln(w, p)
	}
	if len(v.paused)+len(v.specProblems) > 0 {
		fmt.Fprintln(w)
	}
	if len(v.nodes) == 0 {
		fmt.Fprintln(w, "No NodeMigLayouts: no MigLayout selects a node yet (the controller makes one for each node a MigLayout selects).")
		return
	}
	cat := mig.DefaultCatalog()
	for i, n := range v.nodes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		nml := n.nml
		head := nml.Name
		if nml.Spec.MigLayout != "" {
			head += "  MigLayout " + nml.Spec.MigLayout
		} else {
			head += "  (no MigLayout)"
		}
		if c := meta.FindStatusCondition(nml.Status.Conditions, "Ready"); c != nil {
			head += fmt.Sprintf("  Ready=%s (%s)", c.Status, c.Reason)
		}
		// What the controller says where the agent's report looks fine:
		// a GPU whose rule is invalid is left out of the spec, and the
		// agent reports it Ready (not managed).
		// So is a node the MigLayout leaves as it is (another MigLayout
		// selects it too): its row has a message and no phase.
		failing := n.lost == "" && n.row != nil && (n.row.Phase == v1alpha1.PhaseFailed || n.row.Phase == v1alpha1.PhaseBlocked)
		unmanaged := n.lost == "" && n.row != nil && n.row.Phase == "" && n.row.Message != ""
		// A node whose agent has applied its spec while the controller
		// holds its new layout back (maxNodesChanging: "waits its
		// turn"), or has not written it yet.
		ready := meta.FindStatusCondition(nml.Status.Conditions, "Ready")
		held := n.lost == "" && n.row != nil && n.row.Phase == v1alpha1.PhasePending && n.row.Message != "" &&
			ready != nil && ready.Status == metav1.ConditionTrue
		if n.lost != "" {
			head += "  AGENT LOST"
		}
		if failing || held {
			head += "  MigLayout row: " + string(n.row.Phase)
			failing = true // its message follows
		}
		if unmanaged {
			head += "  LEFT AS IT IS"
			failing = true // its message follows
		}
		fmt.Fprintln(w, head)
		if n.lost != "" {
			fmt.Fprintf(w, "  %s\n", n.lost)
		}
		if failing && n.row.Message != "" {
			fmt.Fprintf(w, "  %s\n", n.row.Message)
		}
		if len(nml.Status.GPUs) == 0 {
			if controller.AgentReported(nml) {
				fmt.Fprintln(w, "  the agent reports no GPU on the node")
			} else {
				fmt.Fprintln(w, "  no GPU reported yet")
			}
			continue
		}
		gpus := slices.Clone(nml.Status.GPUs)
		slices.SortFunc(gpus, func(a, b v1alpha1.GPUStatus) int { return int(a.Index - b.Index) })
		desired := map[int32]v1alpha1.GPUSpec{}
		for _, g := range nml.Spec.GPUs {
			desired[g.Index] = g
		}
		modelW := 0
		for _, g := range gpus {
			modelW = max(modelW, len(modelName(cat, g)))
		}
		rowPhase := map[int32]v1alpha1.GPUPhase{}
		if n.row != nil {
			for _, r := range n.row.GPUs {
				rowPhase[r.Index] = r.Phase
			}
		}
		for _, g := range gpus {
			phase := string(g.Phase)
			if p := rowPhase[g.Index]; (p == v1alpha1.PhaseFailed || p == v1alpha1.PhaseBlocked) && g.Phase == v1alpha1.PhaseReady {
				phase = string(p) // the controller's: the spec leaves the GPU out
			}
			if phase == "" {
				phase = "-"
			}
			fmt.Fprintf(w, "  %-6s %-*s  %-14s  %s\n", migslices.GPUDeviceName(int(g.Index)), modelW, modelName(cat, g), phase,
				placementMap(cat, nml.Name, g, n.devices))
			indent := strings.Repeat(" ", 2+7+modelW+2+14+2)
			if d, ok := desired[g.Index]; ok && !sameLayout(d, g) {
				want := d.Layout
				if !d.MIGEnabled {
					want = "MIG off"
				} else if want == "" {
					want = "MIG on, no device"
				}
				fmt.Fprintf(w, "%s-> %s", indent, want)
				if d.Reason != "" {
					fmt.Fprintf(w, "  (%s)", d.Reason)
				}
				fmt.Fprintln(w)
			}
			if g.Message != "" && g.Phase != v1alpha1.PhaseReady {
				fmt.Fprintf(w, "%s%s: %s\n", indent, g.Reason, g.Message)
			}
			if xids := xidsOn(n.devices, nml.Name, g); len(xids) > 0 {
				fmt.Fprintf(w, "%sXid %s hit devices here (reported Unhealthy, kept from new claims); once the GPU was reset: kubectl miglayout clear-xids %s --gpu %d\n",
					indent, strings.Join(xids, ", "), nml.Name, g.Index)
			}
			if g.MIGEnabled != g.MIGPending {
				fmt.Fprintf(w, "%sMIG mode change pending (takes effect after a GPU reset)\n", indent)
			}
			if n := len(g.CatalogMismatches); n > 0 {
				fmt.Fprintf(w, "%sNVML differs from the catalog: %s", indent, g.CatalogMismatches[0])
				if n > 1 {
					fmt.Fprintf(w, " (+%d more)", n-1)
				}
				fmt.Fprintf(w, "; kubectl get nodemiglayout %s -o yaml\n", nml.Name)
			}
		}
	}
	fmt.Fprintf(w, "\n%s allocated or in use   %s draining   %s not published   %s an Xid hit it (tainted)   -------- no device\n", markUsed, markDraining, markMissing, markXid)
}

func modelName(cat *mig.Catalog, g v1alpha1.GPUStatus) string {
	if g.Model != "" {
		return g.Model
	}
	if m, err := cat.Model(g.Product); err == nil {
		return m.Name
	}
	if g.Product != "" {
		return g.Product
	}
	return "unknown GPU"
}

func gpuModel(cat *mig.Catalog, g v1alpha1.GPUStatus) *mig.Model {
	for _, n := range []string{g.Model, g.Product} {
		if n == "" {
			continue
		}
		if m, err := cat.Model(n); err == nil {
			return m
		}
	}
	return nil
}

// sameLayout reports whether GPU g holds what d asks for, no MIG mode
// change pending.
func sameLayout(d v1alpha1.GPUSpec, g v1alpha1.GPUStatus) bool {
	return d.MIGEnabled == g.MIGPending && sameSpec(d, v1alpha1.GPUSpec{MIGEnabled: g.MIGEnabled, Layout: g.Layout})
}

// deviceMark is the mark of a published device name on node.
func (d *clusterDevices) mark(node, name string, inUse bool) string {
	taints, published := d.published[node][name]
	_, allocated := d.allocated[node][name]
	switch {
	case taints.xid != "":
		return markXid
	case allocated || inUse:
		return markUsed
	case !published && !d.slicesUnread:
		return markMissing
	case taints.draining:
		return markDraining
	}
	return ""
}

// placementMap draws the GPU's devices over its memory slices.
func placementMap(cat *mig.Catalog, node string, g v1alpha1.GPUStatus, devs *clusterDevices) string {
	m := gpuModel(cat, g)
	slicesN := 8
	if m != nil {
		slicesN = m.MemorySlices
	}
	if g.Reason == v1alpha1.ReasonGPUUnreadable {
		return box("GPU unreadable", "", slicesN) // MIG mode and devices unknown
	}
	if g.Reason == v1alpha1.ReasonGPUMissing {
		return box("GPU missing", "", slicesN) // NVML does not count it
	}
	if !g.MIGEnabled {
		mark := devs.mark(node, migslices.GPUDeviceName(int(g.Index)), false)
		return box("whole GPU, MIG off", mark, slicesN)
	}
	layout, err := mig.ParseLayout(g.Layout)
	if err != nil || m == nil || m.Validate(layout) != nil {
		return "layout " + g.Layout // not drawable: an unknown GPU or a layout the catalog rejects
	}
	inUse, _ := mig.ParseLayout(g.InUse)
	var b strings.Builder
	next := 0
	for _, d := range layout.Canonical() {
		p, _ := m.Profile(d.Profile)
		for ; next < d.Start; next++ {
			b.WriteString(" -------- ")
		}
		name := devs.migName(node, int(g.Index), d, p.ID)
		b.WriteString(box(d.Profile, devs.mark(node, name, inUse.Contains(d)), p.MemorySlices))
		next = d.Start + p.MemorySlices
	}
	for ; next < slicesN; next++ {
		b.WriteString(" -------- ")
	}
	return b.String()
}

// box is [label mark] spanning n memory slices; a label too long for it is
// cut, the mark kept.
func box(label, mark string, n int) string {
	inner := n*sliceWidth - 2
	if len(label)+len(mark) > inner {
		label = label[:max(inner-len(mark), 0)]
	}
	label += mark
	return "[" + label + strings.Repeat(" ", max(inner-len(label), 0)) + "]"
}
