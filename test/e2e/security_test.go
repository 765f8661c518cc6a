package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/deploy/helm"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/harness"
)

// The chart's RBAC and ValidatingAdmissionPolicy keep a node agent to its own
// node. The agent's identity is real: a token of the chart's agent
// ServiceAccount bound (TokenRequest boundObjectRef) to a Pod bound to node A,
// for which the API server itself records the
// authentication.kubernetes.io/node-name extra (no impersonation).

// securityFixture is the chart's RBAC and policy, installed for real, and
// two nodes.
type securityFixture struct {
	ns, sa       string
	nodeA, nodeB string
	agentPodCfg  *rest.Config // token bound to a pod on node A
	agentBareCfg *rest.Config // token bound to nothing
}

func newSecurityFixture(t *testing.T, ctx context.Context) *securityFixture {
	t.Helper()
	installChartCRDs(t, ctx)
	sfx := rand.String(5)
	f := &securityFixture{ns: "sec-" + sfx, nodeA: "sec-a-" + sfx, nodeB: "sec-b-" + sfx}
	r, err := helm.Render(helm.Options{ReleaseName: "sec-" + sfx, Namespace: f.ns, KubeVersion: serverVersion(t),
		Values: map[string]any{"driverName": "sec.miglayout.io", "agent": map[string]any{"deviceBindingConditions": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := harness.CreateNamespace(ctx, client, f.ns); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, cp.Config())
	var installed []*unstructured.Unstructured
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, o := range slices.Backward(installed) {
			if err := a.delete(ctx, o); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
		_ = client.CoreV1().Namespaces().Delete(ctx, f.ns, metav1.DeleteOptions{})
		for _, n := range []string{f.nodeA, f.nodeB} {
			_ = client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	for _, o := range r.Objects {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if strings.HasSuffix(o.GetName(), "-selector-syntax") {
				continue // about MigLayouts, not agents: TestSelectorPolicy
			}
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatal(err)
			}
			installed = append(installed, o)
			if o.GetKind() == "ServiceAccount" && strings.HasSuffix(o.GetName(), "-agent") {
				f.sa = o.GetName()
			}
		}
	}
	if f.sa == "" {
		t.Fatal("the chart rendered no agent ServiceAccount")
	}
	for _, n := range []string{f.nodeA, f.nodeB} {
		if _, err := harness.CreateNode(ctx, client, n, nil); err != nil {
			t.Fatal(err)
		}
	}

	f.agentPodCfg = f.agentToken(t, ctx, f.nodeA)
	if f.agentBareCfg, err = cp.ConfigForServiceAccount(ctx, f.ns, f.sa); err != nil {
		t.Fatal(err)
	}

	// The API server authenticates the pod-bound token with node A in extra.
	cs := kubernetes.NewForConfigOrDie(f.agentPodCfg)
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ui := review.Status.UserInfo
	if want := "system:serviceaccount:" + f.ns + ":" + f.sa; ui.Username != want {
		t.Fatalf("agent token authenticates as %q, want %q", ui.Username, want)
	}
	if got := ui.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != f.nodeA {
		t.Fatalf("agent token's node-name extra is %v, want [%s] (extra: %v)", got, f.nodeA, ui.Extra)
	}

	// Policies take effect asynchronously: wait until a dry-run write for
	// node B is refused by ours.
	agent := kubernetes.NewForConfigOrDie(f.agentPodCfg)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := agent.ResourceV1().ResourceSlices().Create(ctx, f.slice(f.nodeB, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "may only write ResourceSlices"), nil
	})
	if err != nil {
		t.Fatalf("the agent node policy never took effect: %v", err)
	}
	return f
}

// agentToken is a client config with a token of the agent ServiceAccount
// bound to an agent pod on node (bound, never run: there is no kubelet).
func (f *securityFixture) agentToken(t *testing.T, ctx context.Context, node string) *rest.Config {
	t.Helper()
	pod, err := client.CoreV1().Pods(f.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-"},
		Spec: corev1.PodSpec{
			ServiceAccountName: f.sa,
			NodeName:           node,
			Containers:         []corev1.Container{{Name: "agent", Image: "registry.invalid/miglayout-agent:test"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = harness.ForceDeletePod(context.Background(), client, f.ns, pod.Name) })
	exp := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(f.ns).CreateToken(ctx, f.sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tokenConfig(tr.Status.Token)
}

func tokenConfig(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(cp.Config())
	cfg.BearerToken = token
	return cfg
}

// slice is a one-device ResourceSlice of node's pool under the test driver.
func (f *securityFixture) slice(node, name string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + name},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "sec.miglayout.io",
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourceapi.Device{{Name: "gpu-0"}},
		},
	}
}

// refused fails unless err is the API server refusing the request with a
// message containing want.
func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want refused (%q)", what, want)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Errorf("%s: %v, want Forbidden", what, err)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: refused with %q, want a message containing %q", what, err, want)
	default:
		t.Logf("%s: refused: %v", what, err)
	}
}

// refusedForbidden is refused where only an authorization refusal will do: the
// chart's agent policy answers Forbidden, the API server's granular claim
// status authorization an Invalid whose every cause is a Forbidden field. A
// request refused as invalid for another reason was not stopped for the
// reason the test names.
func refusedForbidden(t *testing.T, what string, err error) {
	t.Helper()
	refused(t, what, err, "")
	if err == nil || apierrors.IsForbidden(err) {
		return
	}
	var causes []metav1.StatusCause
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		causes = st.Status().Details.Causes
	}
	forbidden := len(causes) > 0
	for _, c := range causes {
		forbidden = forbidden && c.Type == metav1.CauseType(field.ErrorTypeForbidden)
	}
	if !forbidden {
		t.Errorf("%s: %v, want Forbidden (an authorization refusal, not a validation error)", what, err)
	}
}

// granularStatusAuthorization reports whether the API server runs with
// DRAResourceClaimGranularStatusAuthorization, as by default; the package
// may run with it off (MIGLAYOUT_E2E_GATES).
func granularStatusAuthorization() bool {
	return !strings.Contains(strings.ReplaceAll(os.Getenv("MIGLAYOUT_E2E_GATES"), " ", ""), "DRAResourceClaimGranularStatusAuthorization=false")
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want allowed", what, err)
	}
}

func TestAgentConfinedToItsNode(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	f := newSecurityFixture(t, ctx)
	agent := kubernetes.NewForConfigOrDie(f.agentPodCfg)
	rs := agent.ResourceV1().ResourceSlices()
	admin := client.ResourceV1().ResourceSlices()
	wantNodeB := "may only write ResourceSlices with spec.nodeName " + f.nodeA + ", not " + f.nodeB
	t.Cleanup(func() {
		for _, n := range []string{f.nodeA + "-own", f.nodeB + "-other"} {
			_ = admin.Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})

	t.Run("ResourceSlices", func(t *testing.T) {
		own, err := rs.Create(ctx, f.slice(f.nodeA, "own"), metav1.CreateOptions{})
		allowed(t, "create a slice of node A", err)
		if err == nil {
			own.Spec.Devices = append(own.Spec.Devices, resourceapi.Device{Name: "gpu-1"})
			own.Spec.Pool.Generation++
			_, err = rs.Update(ctx, own, metav1.UpdateOptions{})
			allowed(t, "update the slice of node A", err)
		}

		_, err = rs.Create(ctx, f.slice(f.nodeB, "mine"), metav1.CreateOptions{})
		refused(t, "create a slice of node B", err, wantNodeB)

		noNode := f.slice(f.nodeA, "all")
		noNode.Spec.NodeName, noNode.Spec.AllNodes = nil, ptr.To(true)
		_, err = rs.Create(ctx, noNode, metav1.CreateOptions{})
		refused(t, "create a slice for all nodes", err, "not a slice without nodeName")

		other, err := admin.Create(ctx, f.slice(f.nodeB, "other"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err) // the policy does not apply to the admin
		}
		other.Spec.Devices = nil
		_, err = rs.Update(ctx, other, metav1.UpdateOptions{})
		refused(t, "update the slice of node B", err, wantNodeB)
		err = rs.Delete(ctx, other.Name, metav1.DeleteOptions{})
		refused(t, "delete the slice of node B", err, wantNodeB)
		err = rs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + f.nodeB})
		refused(t, "delete the slices of node B as a collection (RBAC)", err, `cannot deletecollection resource "resourceslices"`)
		if _, err := admin.Get(ctx, other.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the slice of node B is gone: %v", err)
		}

		// On its own node, only its driver's slices in its own pool:
		// allocations name devices by driver, pool and name, so a slice in
		// node B's pool would make node B's devices seem taken.
		wantOwned := "may only write ResourceSlices of driver sec.miglayout.io in pool " + f.nodeA
		spoof := f.slice(f.nodeA, "spoof")
		spoof.Spec.Pool.Name = f.nodeB
		_, err = rs.Create(ctx, spoof, metav1.CreateOptions{})
		refused(t, "create a slice on node A in node B's pool", err, wantOwned)
		nic := f.slice(f.nodeA, "nic")
		nic.Spec.Driver = "nic.example.com"
		_, err = rs.Create(ctx, nic, metav1.CreateOptions{})
		refused(t, "create another driver's slice on node A", err, wantOwned)
		if _, err := admin.Create(ctx, nic, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), nic.Name, metav1.DeleteOptions{}) })
		err = rs.Delete(ctx, nic.Name, metav1.DeleteOptions{})
		refused(t, "delete another driver's slice on node A", err, wantOwned)

		err = rs.Delete(ctx, f.nodeA+"-own", metav1.DeleteOptions{})
		allowed(t, "delete the slice of node A", err)

		// The agent's read access is cluster-wide (the kubelet-plugin helper lists with a field selector).
		_, err = rs.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + f.nodeA})
		allowed(t, "list slices", err)
	})

	t.Run("NodeMigLayout status", func(t *testing.T) {
		adminC := miglayoutClient(t)
		agentC, err := crclient.New(f.agentPodCfg, crclient.Options{Scheme: miglayoutScheme()})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{f.nodeA, f.nodeB} {
			nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}}}}
			if err := adminC.Create(ctx, nml); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = adminC.Delete(context.Background(), nml) })
		}
		report := func(name string) error {
			nml := &v1alpha1.NodeMigLayout{}
			if err := agentC.Get(ctx, crclient.ObjectKey{Name: name}, nml); err != nil {
				return err
			}
			nml.Status.GPUs = []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
				Layout: "7g.80gb@0", Phase: v1alpha1.PhasePending}}
			return agentC.Status().Update(ctx, nml)
		}
		allowed(t, "write the status of NodeMigLayout A", report(f.nodeA))
		refused(t, "write the status of NodeMigLayout B", report(f.nodeB),
			"may only write the status of NodeMigLayout "+f.nodeA+", not "+f.nodeB)

		// The spec is the controller's: RBAC refuses it to the agent, even on its own node.
		nml := &v1alpha1.NodeMigLayout{}
		if err := agentC.Get(ctx, crclient.ObjectKey{Name: f.nodeA}, nml); err != nil {
			t.Fatal(err)
		}
		nml.Spec.GPUs = nil
		refused(t, "update the spec of NodeMigLayout A", agentC.Update(ctx, nml), "cannot update resource \"nodemiglayouts\"")
	})

	// The heartbeat Lease: in the release namespace only (Role), its own
	// (name and holder: the policy).
	t.Run("heartbeat Lease", func(t *testing.T) {
		leases := agent.CoordinationV1().Leases(f.ns)
		lease := func(name, holder string) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime: &metav1.MicroTime{Time: time.Now()}}}
		}
		own, err := leases.Create(ctx, lease(v1alpha1.AgentLeaseName(f.nodeA, ""), f.nodeA), metav1.CreateOptions{})
		allowed(t, "create the Lease of node A", err)
		if err == nil {
			own.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			renewed, err := leases.Update(ctx, own, metav1.UpdateOptions{})
			allowed(t, "renew the Lease of node A", err)
			if err == nil {
				own = renewed
			}
			own.Spec.HolderIdentity = ptr.To(f.nodeB)
			_, err = leases.Update(ctx, own, metav1.UpdateOptions{})
			refused(t, "hand the Lease of node A to node B", err, "may only write its own heartbeat Lease")
		}
		_, err = leases.Create(ctx, lease(v1alpha1.AgentLeaseName(f.nodeB, ""), f.nodeB), metav1.CreateOptions{})
		refused(t, "create the Lease of node B", err, "may only write its own heartbeat Lease")
		_, err = leases.Create(ctx, lease(v1alpha1.AgentLeaseName(f.nodeB, ""), f.nodeA), metav1.CreateOptions{})
		refused(t, "create node B's Lease name held by node A", err, "may only write its own heartbeat Lease")
		_, err = agent.CoordinationV1().Leases("kube-node-lease").Create(ctx, lease(f.nodeA, f.nodeA), metav1.CreateOptions{})
		refused(t, "create a Lease outside the release namespace (RBAC)", err, `cannot create resource "leases"`)
		// delete is granted (an API server enforcing ownerReferences
		// permissions asks for it to let the Node own the Lease): on its own
		// Lease only.
		if _, err := client.CoordinationV1().Leases(f.ns).Create(ctx, lease(v1alpha1.AgentLeaseName(f.nodeB, ""), f.nodeB), metav1.CreateOptions{}); err != nil {
			t.Fatal(err) // the policy does not apply to the admin
		}
		refused(t, "delete the Lease of node B", leases.Delete(ctx, v1alpha1.AgentLeaseName(f.nodeB, ""), metav1.DeleteOptions{}), "may only write its own heartbeat Lease")
		allowed(t, "delete the Lease of node A", leases.Delete(ctx, v1alpha1.AgentLeaseName(f.nodeA, ""), metav1.DeleteOptions{}))

		// Node names over 237 characters: the Lease is named after the
		// node's UID, which the token carries, so one such node's agent
		// cannot take another's Lease name.
		long := func(first string) string {
			label := strings.Repeat("x", 63)
			return first + "." + label + "." + label + "." + label + "." + label[:240-len(first)-4-3*63]
		}
		nodeC, nodeD := long("sec-c-"+f.nodeA[len("sec-a-"):]), long("sec-d-"+f.nodeA[len("sec-a-"):])
		uids := map[string]types.UID{}
		for _, n := range []string{nodeC, nodeD} {
			created, err := harness.CreateNode(ctx, client, n, map[string]string{corev1.LabelHostname: n[:63]}) // a label value is 63 characters at most
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
			uids[n] = created.UID
		}
		if !v1alpha1.AgentLeaseNameNeedsUID(nodeC) {
			t.Fatalf("node name of %d characters does not need its UID", len(nodeC))
		}
		agentC := kubernetes.NewForConfigOrDie(f.agentToken(t, ctx, nodeC)).CoordinationV1().Leases(f.ns)
		_, err = agentC.Create(ctx, lease(v1alpha1.AgentLeaseName(nodeD, uids[nodeD]), nodeC), metav1.CreateOptions{})
		refused(t, "create the long-named node D's Lease name, held by long-named node C", err, "may only write its own heartbeat Lease")
		_, err = agentC.Create(ctx, lease(v1alpha1.AgentLeasePrefix+"0123456789abcdef", nodeC), metav1.CreateOptions{})
		refused(t, "create a hashed-form Lease name held by long-named node C", err, "may only write its own heartbeat Lease")
		_, err = agentC.Create(ctx, lease(v1alpha1.AgentLeaseName(nodeC, uids[nodeC]), nodeC), metav1.CreateOptions{})
		allowed(t, "create the Lease named after long-named node C's UID", err)
	})

	// Binding conditions (agent --device-binding-conditions): the agent answers them in
	// status.devices of claims allocated on its own node only (API server's granular
	// status authorization: resourceclaims/driver, verb associated-node:patch).
	t.Run("ResourceClaim binding conditions", func(t *testing.T) {
		allocate := func(node string) *resourceapi.ResourceClaim {
			return f.allocatedClaim(t, ctx, "on-"+node, node, nil)
		}
		agentC, err := crclient.New(f.agentPodCfg, crclient.Options{Scheme: miglayoutScheme()})
		if err != nil {
			t.Fatal(err)
		}
		answer := func(c *resourceapi.ResourceClaim, driver string) error {
			cond := metav1ac.Condition().WithType(migslices.BindingConditionReady).WithStatus(metav1.ConditionTrue).
				WithReason("DeviceReady").WithMessage("test").WithLastTransitionTime(metav1.Now())
			apply := resourceac.ResourceClaim(c.Name, c.Namespace).WithStatus(resourceac.ResourceClaimStatus().WithDevices(
				resourceac.AllocatedDeviceStatus().WithDriver(driver).WithPool(c.Status.Allocation.Devices.Results[0].Pool).
					WithDevice("gpu-0").WithConditions(cond)))
			return agentC.Status().Apply(ctx, apply, crclient.FieldOwner("miglayout-agent"), crclient.ForceOwnership)
		}
		onA := allocate(f.nodeA)
		allowed(t, "answer the binding conditions of a claim allocated on node A", answer(onA, "sec.miglayout.io"))
		// The API server's granular status authorization refuses both;
		// with it off, the chart's agent policy refuses node B's claim
		// (Forbidden) and field validation another driver's entry.
		want := `changing status.devices requires resource="resourceclaims/driver"`
		if !granularStatusAuthorization() {
			want = ""
		}
		onB := answer(allocate(f.nodeB), "sec.miglayout.io")
		if want == "" {
			refusedForbidden(t, "answer the binding conditions of a claim allocated on node B", onB)
		} else {
			refused(t, "answer the binding conditions of a claim allocated on node B", onB, want)
		}
		refused(t, "write another driver's entry of a claim allocated on node A", answer(onA, "nic.example.com"), want)
	})

	// Events: as the agent's recorder reports them (miglayout-agent), about
	// its own NodeMigLayout, its own Node (XidsCleared, ClearXidsRefused,
	// MIGModeTurnedOff, EmptiedGPUInMIGMode, JournalSetAside) or
	// a ResourceClaim; not about another node, nor in another component's
	// name.
	t.Run("Events", func(t *testing.T) {
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: agent.EventsV1()})
		stop := make(chan struct{})
		b.StartRecordingToSink(stop)
		t.Cleanup(func() { close(stop); b.Shutdown() })
		own := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: f.nodeA, UID: "uid-a"}}
		b.NewRecorder(miglayoutScheme(), "miglayout-agent").Eventf(own, nil, corev1.EventTypeNormal, "Draining", "Drain", "GPU 0: draining (security test)")
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + f.nodeA})
			return err == nil && len(list.Items) > 0, nil
		})
		allowed(t, "record an Event about NodeMigLayout A with the agent's recorder", err)

		event := func(name, controller, kind, regarding string) *eventsv1.Event {
			// Events about cluster-scoped objects live in default.
			return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + f.ns, Namespace: metav1.NamespaceDefault}, EventTime: metav1.NowMicro(),
				ReportingController: controller, ReportingInstance: controller + "-" + f.nodeA, Action: "Drain", Reason: "Draining", Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{Kind: kind, APIVersion: "miglayout.io/v1alpha1", Name: regarding}}
		}
		want := "may only record Events as miglayout-agent about NodeMigLayout " + f.nodeA + ", XidsCleared, ClearXidsRefused, MIGModeTurnedOff, EmptiedGPUInMIGMode or JournalSetAside about Node " + f.nodeA
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, event("about-b", "miglayout-agent", "NodeMigLayout", f.nodeB), metav1.CreateOptions{})
		refused(t, "record an Event about NodeMigLayout B", err, want)
		spoof := event("as-kubelet", "kubelet", "Node", f.nodeB)
		spoof.Regarding.APIVersion = "v1"
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, spoof, metav1.CreateOptions{})
		refused(t, "record an Event about node B as the kubelet", err, want)
		// About its own Node: only its answers to a request to clear the
		// Xid marks, and what it did to a GPU no spec names.
		nodeEvent := func(name, reason, node string) *eventsv1.Event {
			e := event(name, "miglayout-agent", "Node", node)
			e.Regarding.APIVersion, e.Reason = "v1", reason
			return e
		}
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent("cleared-a", "XidsCleared", f.nodeA), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed(t, "record XidsCleared about node A", err)
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent("mig-off-a", "MIGModeTurnedOff", f.nodeA), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed(t, "record MIGModeTurnedOff about node A", err)
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent("set-aside-a", "JournalSetAside", f.nodeA), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed(t, "record JournalSetAside about node A", err)
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent("mig-off-b", "MIGModeTurnedOff", f.nodeB), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record MIGModeTurnedOff about node B", err, want)
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent("cleared-b", "XidsCleared", f.nodeB), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record XidsCleared about node B", err, want)
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent("draining-a", "Draining", f.nodeA), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record another reason about node A", err, want)
		otherGroup := nodeEvent("cleared-a-other-group", "XidsCleared", f.nodeA)
		otherGroup.Regarding.APIVersion = "example.com/v1"
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, otherGroup, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record XidsCleared about a Node of another API group named as node A", err, want)
		// About a claim (binding conditions are on here): only the refusal
		// of a binding, which is all the agent says of claims.
		claimEvent := func(name, reason string) *eventsv1.Event {
			return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, EventTime: metav1.NowMicro(),
				ReportingController: "miglayout-agent", ReportingInstance: "miglayout-agent-" + f.nodeA, Action: "Bind", Reason: reason, Type: corev1.EventTypeWarning,
				Regarding: corev1.ObjectReference{Kind: "ResourceClaim", APIVersion: "resource.k8s.io/v1", Namespace: f.ns, Name: "some-claim"}}
		}
		_, err = agent.EventsV1().Events(f.ns).Create(ctx, claimEvent("refused-binding", "BindingRefused"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed(t, "record BindingRefused about a ResourceClaim", err)
		_, err = agent.EventsV1().Events(f.ns).Create(ctx, claimEvent("claim-warning", "Draining"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record another reason about a ResourceClaim", err, want+" or BindingRefused about a ResourceClaim in its namespace")
		// Not in another namespace: the API server's own validation of
		// Events keeps one about a cluster-scoped object in default, so a
		// node's credentials cannot put one about its NodeMigLayout in a
		// tenant's namespace; it does not check the namespace of one about
		// a namespaced object, which the policy does for claims.
		const sameNamespace = "does not match event.namespace"
		elsewhere := event("own-elsewhere", "miglayout-agent", "NodeMigLayout", f.nodeA)
		elsewhere.Namespace = f.ns
		_, err = agent.EventsV1().Events(f.ns).Create(ctx, elsewhere, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record an Event about NodeMigLayout A outside namespace default", err, sameNamespace)
		foreign := claimEvent("refused-elsewhere", "BindingRefused")
		foreign.Namespace = metav1.NamespaceDefault
		_, err = agent.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, foreign, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "record BindingRefused about a claim of another namespace in default", err, want+" or BindingRefused about a ResourceClaim in its namespace")
	})

	t.Run("token without a node", func(t *testing.T) {
		bare := kubernetes.NewForConfigOrDie(f.agentBareCfg)
		_, err := bare.ResourceV1().ResourceSlices().Create(ctx, f.slice(f.nodeA, "bare"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused(t, "create a slice with a token bound to no pod", err, "credentials name no node")
	})
}

// TestAgentClaimStatusConfinedToItsNode: with device binding conditions the
// agents may patch ResourceClaim status, cluster-wide in RBAC. An agent may
// neither drop a running pod from reservedFor of a claim allocated on
// another node (the claim controller could then deallocate a device in
// use) nor confirm another node's binding condition. The API server's
// DRAResourceClaimGranularStatusAuthorization refuses both; where that
// beta gate is off (MIGLAYOUT_E2E_GATES=
// DRAResourceClaimGranularStatusAuthorization=false), the chart's agent
// admission policy does.
func TestAgentClaimStatusConfinedToItsNode(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	f := newSecurityFixture(t, ctx)
	agent := kubernetes.NewForConfigOrDie(f.agentPodCfg)
	// The pod exists (bound to node B, never run: there is no kubelet), or
	// kube-controller-manager's claim controller drops it from reservedFor
	// itself, and clearing reservedFor changes nothing to refuse.
	running, err := client.CoreV1().Pods(f.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "running-pod"},
		Spec: corev1.PodSpec{ServiceAccountName: f.sa, NodeName: f.nodeB,
			Containers: []corev1.Container{{Name: "work", Image: "registry.invalid/work:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = harness.ForceDeletePod(context.Background(), client, f.ns, running.Name) })
	c := f.allocatedClaim(t, ctx, "victim-on-b", f.nodeB,
		[]resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: running.Name, UID: running.UID}})
	now := metav1.Now()
	// Drop the running pod from reservedFor of a claim on node B: the claim
	// controller may then deallocate a device a pod still uses.
	_, err = agent.ResourceV1().ResourceClaims(f.ns).Patch(ctx, c.Name, types.MergePatchType,
		[]byte(`{"status":{"reservedFor":null}}`), metav1.PatchOptions{}, "status")
	refusedForbidden(t, "node-A agent clears reservedFor of a claim allocated on node B", err)
	// Confirm node B's binding condition (the scheduler then binds the pod
	// to a device node B's agent never vetted).
	_, err = agent.ResourceV1().ResourceClaims(f.ns).Patch(ctx, c.Name, types.MergePatchType,
		[]byte(`{"status":{"devices":[{"driver":"sec.miglayout.io","pool":"`+f.nodeB+`","device":"gpu-0","conditions":[{"type":"`+migslices.BindingConditionReady+`","status":"True","reason":"Forged","message":"x","lastTransitionTime":"`+now.UTC().Format(time.RFC3339)+`"}]}]}}`),
		metav1.PatchOptions{}, "status")
	refusedForbidden(t, "node-A agent confirms the binding condition of node B's device", err)
}

// allocatedClaim creates claim name in the fixture's namespace, allocated
// device gpu-0 of driver sec.miglayout.io on node (the node's pool, with
// the binding conditions the agent answers) and reserved for reservedFor,
// as kube-scheduler writes it.
func (f *securityFixture) allocatedClaim(t *testing.T, ctx context.Context, name, node string, reservedFor []resourceapi.ResourceClaimConsumerReference) *resourceapi.ResourceClaim {
	t.Helper()
	claims := client.ResourceV1().ResourceClaims(f.ns)
	c, err := claims.Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "sec.miglayout.io"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	c.Status.Allocation = &resourceapi.AllocationResult{
		AllocationTimestamp: &now,
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "sec.miglayout.io", Pool: node, Device: "gpu-0",
			BindingConditions: []string{migslices.BindingConditionReady}, BindingFailureConditions: []string{migslices.BindingConditionRemoved},
		}}},
	}
	c.Status.ReservedFor = reservedFor
	if c, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}
