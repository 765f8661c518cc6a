package planner

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/slices"
)

const driver = "mig.miglayout.io"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func migClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "mig.miglayout.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig'"}}}},
	}
}

// nodeB builds a Node with GPUs.
type nodeB struct{ n Node }

func node(name string) *nodeB {
	return &nodeB{n: Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}}}
}

func (b *nodeB) label(k, v string) *nodeB { b.n.Node.Labels[k] = v; return b }

func (b *nodeB) taint(k string) *nodeB {
	b.n.Node.Spec.Taints = append(b.n.Node.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	return b
}

// cordoned marks the node unschedulable (kubectl cordon), its taint not
// added yet.
func (b *nodeB) cordoned() *nodeB { b.n.Node.Spec.Unschedulable = true; return b }

func (b *nodeB) policy(p Policy) *nodeB { b.n.Policy = p; return b }

// gpu adds a GPU of model with layout and pinned devices (layout strings).
func (b *nodeB) gpu(model, layout, pinned string) *nodeB {
	m, err := mig.DefaultCatalog().Model(model)
	if err != nil {
		panic(err)
	}
	b.n.GPUs = append(b.n.GPUs, GPU{Info: slices.PlannedGPU(m, len(b.n.GPUs)), Layout: mig.MustParseLayout(layout), Pinned: mig.MustParseLayout(pinned)})
	return b
}

// shared marks devices of the last GPU held by claims with admin access
// only (GPU.Shared).
func (b *nodeB) shared(layout string) *nodeB {
	b.n.GPUs[len(b.n.GPUs)-1].Shared = mig.MustParseLayout(layout)
	return b
}

// idleFor marks the last GPU idle since d before t0 (GPU.IdleSince).
func (b *nodeB) idleFor(d time.Duration) *nodeB {
	b.n.GPUs[len(b.n.GPUs)-1].IdleSince = t0.Add(-d)
	return b
}

// reclaiming marks the last GPU as being given back whole by a change in
// flight that has destroyed nothing yet (GPU.Reclaiming).
func (b *nodeB) reclaiming() *nodeB { b.n.GPUs[len(b.n.GPUs)-1].Reclaiming = true; return b }

// releasing marks pinned devices of the last GPU whose claims end soon
// (GPU.Releasing).
func (b *nodeB) releasing(layout string) *nodeB {
	b.n.GPUs[len(b.n.GPUs)-1].Releasing = mig.MustParseLayout(layout)
	return b
}

// tainted marks devices of the last GPU that DeviceTaintRules name before
// they exist (GPU.Tainted).
func (b *nodeB) tainted(layout string) *nodeB {
	b.n.GPUs[len(b.n.GPUs)-1].Tainted = mig.MustParseLayout(layout)
	return b
}

// driver sets the driver version the last GPU's devices are published with.
func (b *nodeB) driver(v string) *nodeB { b.n.GPUs[len(b.n.GPUs)-1].Info.DriverVersion = v; return b }

// brand sets the brand the last GPU reports.
func (b *nodeB) brand(v string) *nodeB { b.n.GPUs[len(b.n.GPUs)-1].Info.Brand = v; return b }

func (b *nodeB) changing() *nodeB { b.n.GPUs[len(b.n.GPUs)-1].Changing = true; return b }

// changingFor marks the last GPU's change in flight as made for pods
// (namespace/name, GPU.Serves).
func (b *nodeB) changingFor(pods ...string) *nodeB {
	g := &b.n.GPUs[len(b.n.GPUs)-1]
	g.Changing, g.Serves = true, pods
	return b
}

// servesDone names the pods (GPU.Serves) the last GPU's change, done, was
// for: on a Frozen node that carries on, its free devices wait for them.
func (b *nodeB) servesDone(pods ...string) *nodeB {
	b.n.GPUs[len(b.n.GPUs)-1].Serves = pods
	return b
}

// retrying marks the last GPU's change failed and retried by the agent.
func (b *nodeB) retrying() *nodeB {
	g := &b.n.GPUs[len(b.n.GPUs)-1]
	g.Changing, g.Retrying = true, true
	return b
}

// frozen marks the node's agent lost (Node.Frozen).
func (b *nodeB) frozen() *nodeB { b.n.Frozen = true; return b }

// frozenBy marks the node Frozen for reason (Node.FrozenReason).
func (b *nodeB) frozenBy(reason string) *nodeB {
	b.n.Frozen, b.n.FrozenReason = true, reason
	return b
}

// carriesOn marks a Frozen node whose agent carries out its changes in
// flight (Node.CarriesOn).
func (b *nodeB) carriesOn() *nodeB { b.n.CarriesOn = true; return b }

// allocatableCPU makes cpu CPUs and 512Gi of memory allocatable on the node.
func (b *nodeB) allocatableCPU(cpu string) *nodeB {
	b.n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Gi")}
	return b
}

func (b *nodeB) build() Node { return b.n }

// podB builds a pending pod with one claim.
type podB struct{ p Pod }

func pod(name string, ageMinutes int) *podB {
	return &podB{p: Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(ageMinutes) * time.Minute))}}}}
}

func (b *podB) priority(p int32) *podB { b.p.Pod.Spec.Priority = &p; return b }

func (b *podB) nodeSelector(k, v string) *podB {
	b.p.Pod.Spec.NodeSelector = map[string]string{k: v}
	return b
}

// claim adds a claim with one request of count devices matching expression.
func (b *podB) claim(expression string, count int64) *podB {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: b.p.Pod.Name + "-gpu"}}
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.miglayout.io",
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	if expression != "" {
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}}
	}
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	b.p.Claims = append(b.p.Claims, c)
	return b
}

// sharedClaim adds the claim named name (in default) with one request of one
// device matching expression; pods given the same name share one claim.
func (b *podB) sharedClaim(name, expression string) *podB {
	b.claim(expression, 1)
	b.p.Claims[len(b.p.Claims)-1].Name = name
	return b
}

// firstAvailable adds a claim with one request whose subrequests ask for
// count devices matching each expression, in order of preference.
func (b *podB) firstAvailable(count int64, expressions ...string) *podB {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: b.p.Pod.Name + "-list"}}
	req := resourceapi.DeviceRequest{Name: "gpu"}
	for i, e := range expressions {
		req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{Name: "s" + itoa(i), DeviceClassName: "mig.miglayout.io",
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: e}}}})
	}
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	b.p.Claims = append(b.p.Claims, c)
	return b
}

// allocatedOn adds an allocated claim of the pod whose allocation is on node.
func (b *podB) allocatedOn(node string) *podB {
	b.p.AllocatedOn = append(b.p.AllocatedOn, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}})
	return b
}

// declined adds nodes kube-scheduler keeps the pod off (Pod.Declined).
func (b *podB) declined(nodes ...string) *podB {
	b.p.Declined = append(b.p.Declined, nodes...)
	return b
}

// tolerates adds a toleration of key (any value, NoSchedule).
func (b *podB) tolerates(key string) *podB {
	b.p.Pod.Spec.Tolerations = append(b.p.Pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	return b
}

// requestsCPU gives the pod one container requesting cpu CPUs.
func (b *podB) requestsCPU(cpu string) *podB {
	b.p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	return b
}

func (b *podB) build() Pod { return b.p }

func profileIs(p string) string {
	return "device.attributes['mig.miglayout.io'].profile == '" + p + "'"
}

func itoa(i int) string { return fmt.Sprint(i) }

func join(s []string) string { return strings.Join(s, ", ") }

// servedNodes maps each pod a plan serves (namespace/name) to its node.
func servedNodes(res Result) map[string]string {
	out := map[string]string{}
	for _, s := range res.Served {
		out[s.Pod] = s.Node
	}
	return out
}
