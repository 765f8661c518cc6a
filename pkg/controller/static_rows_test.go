package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestImpossibleCountsNotBlamedOnDevicesInUse: {3g.40gb:2, 1g.10gb:1}
// passes the budget checks but no arrangement of placements holds it on an
// A100, in use or not. The problem must say so, the same whatever devices
// happen to be in use: blaming "the devices in use" sends the operator to
// wait for workloads that have nothing to do with it, and a message that
// changes with the in-use set gives a new problem key, so a new
// InvalidLayout Warning event and a new Degraded message, each time a pod
// starts or ends on the GPU.
func TestImpossibleCountsNotBlamedOnDevicesInUse(t *testing.T) {
	rs := rules(rule("r").counts("3g.40gb", 2).counts("1g.10gb", 1))
	var msgs []string
	for _, g := range []*gpuBuilder{
		a100(0).layout("1g.10gb@5,1g.10gb@6"),
		a100(0).layout("1g.10gb@5,1g.10gb@6").inUse("1g.10gb@6"),
		a100(0).layout("1g.10gb@5,1g.10gb@6").inUse("1g.10gb@5"),
	} {
		specs, problems := DesiredGPUs(mig.DefaultCatalog(), rs, inventory(g), nil)
		if len(specs) != 0 || len(problems) != 1 {
			t.Fatalf("in use %q: specs %+v problems %+v, want one problem", g.g.InUse, specs, problems)
		}
		msgs = append(msgs, problems[0].Message)
		if strings.Contains(problems[0].Message, "in use") {
			t.Errorf("in use %q: problem %q blames the devices in use; the counts fit on no A100 at all", g.g.InUse, problems[0].Message)
		}
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Errorf("the problem of one impossible rule changes with the devices in use (each change is a new InvalidLayout event):\n%s", strings.Join(msgs, "\n"))
	}
}

// TestFirstReportAtDesiredLayoutIsNotRepartitioned: a MigLayout is applied
// to a node whose GPU already holds the layout its rule asks for (set up
// before by mig-parted, or the MigLayout deleted and made again). The first
// reconcile creates the NodeMigLayout (row Pending: the agent has not
// reported yet); the agent then reports the GPU, already as desired. Nothing
// was drained or repartitioned, yet a Normal "Repartitioned" event is
// recorded (TestTransitions: "node seen for the first time ready: nothing
// was repartitioned").
func TestFirstReportAtDesiredLayoutIsNotRepartitioned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, node("n1", map[string]string{"pool": "a"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	// The agent reports: GPU 0 holds two 3g.40gb already (not in the spec yet).
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	nml.Status.GPUs = inventory(a100(0).layout("3g.40gb@0,3g.40gb@4"))
	if err := c.Status().Update(context.Background(), &nml); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyNodes != 1 {
		t.Fatalf("ready nodes %d, want 1 (rows %+v)", got.Status.ReadyNodes, got.Status.Nodes)
	}
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventRepartitioned) {
			t.Errorf("event %q, yet the GPU held the desired layout before the MigLayout existed and nothing was repartitioned", e)
		}
	}
}

// TestRefusedGPURowDoesNotDesireNoDevice: a rule whose explicit layout is
// invalid on the GPU is refused and the GPU left as it is (7g.80gb@0). Its
// status row has Desired "", which the API documents as "MIG on, no device"
// (GPURow.Desired: empty = MIG on, no device): kubectl describe / -o yaml
// tell the operator the controller wants every device of the GPU destroyed.
func TestRefusedGPURowDoesNotDesireNoDevice(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.Rules = rules(rule("bad").layout("3g.40gb@0,3g.40gb@2"))
	nml := ownedBy(nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0")).build(), ml)
	got := reconcileOnce(t, ctx, ml, node("n1", map[string]string{"pool": "a"}), nml)
	if len(got.Status.Nodes) != 1 || len(got.Status.Nodes[0].GPUs) != 1 {
		t.Fatalf("rows %+v, want one node with one GPU", got.Status.Nodes)
	}
	row := got.Status.Nodes[0].GPUs[0]
	if row.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("row %+v, want Failed", row)
	}
	if row.Desired == "" {
		t.Errorf("refused GPU 0 (left as it is, actual %q) shows Desired %q, which GPURow documents as \"MIG on, no device\"", row.Actual, row.Desired)
	}
}
