package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// bulkyPendingPod is an unschedulable pod of claim c as a batch system
// writes one: environment, commands, volumes, probes, kubectl's
// last-applied annotation, the scheduler's long message; and the fields the
// planner reads: a node selector, a toleration, a priority, resources and a
// nominated node.
func bulkyPendingPod(name string) *corev1.Pod {
	p := autoPod(name, h0(), "c")
	p.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: strings.Repeat("x", 4096)}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	p.Labels = map[string]string{"app": "train"}
	p.Spec.NodeSelector = map[string]string{"pool": "auto"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	prio := int32(100)
	p.Spec.Priority = &prio
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	var env []corev1.EnvVar
	for i := range 20 {
		env = append(env, corev1.EnvVar{Name: "VAR" + strings.Repeat("X", i), Value: strings.Repeat("v", 64)})
	}
	p.Spec.Containers = []corev1.Container{{Name: "main", Image: "registry.example/train:1", Command: []string{"python", "train.py"}, Env: env,
		VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Claims: []corev1.ResourceClaim{{Name: "c0"}}}}}
	p.Status.Conditions[0].Message = "0/2000 nodes are available: " + strings.Repeat("1 node(s) had untolerated taint, ", 100)
	p.Status.NominatedNodeName = ""
	return p
}

// TestTrimPendingPodKeepsTheDemand: a pending pod trimmed for the cache
// (TrimPendingPod) is the same demand to the Auto planner as the whole pod,
// is much smaller, and keeps each field the planner reads; an object that
// is not a pod is left as it is.
func TestTrimPendingPodKeepsTheDemand(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	full := bulkyPendingPod("p")
	got, err := TrimPendingPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := got.(*corev1.Pod)
	if before, after := full.Size(), trimmed.Size(); after*4 > before {
		t.Errorf("trimmed pod is %d bytes, the whole one %d: want it under a quarter", after, before)
	}
	keep := func(p *corev1.Pod) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels, CreationTimestamp: p.CreationTimestamp},
			Spec: corev1.PodSpec{NodeSelector: p.Spec.NodeSelector, Tolerations: p.Spec.Tolerations, Priority: p.Spec.Priority,
				ResourceClaims: p.Spec.ResourceClaims, Containers: []corev1.Container{{Name: p.Spec.Containers[0].Name, Resources: p.Spec.Containers[0].Resources}}},
			Status: corev1.PodStatus{NominatedNodeName: p.Status.NominatedNodeName, Phase: p.Status.Phase,
				Conditions: []corev1.PodCondition{{Type: p.Status.Conditions[0].Type, Status: p.Status.Conditions[0].Status, Reason: p.Status.Conditions[0].Reason}}}}
	}
	if diff := cmp.Diff(keep(full), trimmed); diff != "" {
		t.Errorf("trimmed pod (-what the planner reads of the whole pod +trimmed):\n%s", diff)
	}
	pending := func(p *corev1.Pod) []string {
		in := AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{*ml},
			Nodes:          []corev1.Node{*node("n1", map[string]string{"pool": "auto"})},
			NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": autoNML("n1", ml, a100(0).layout("7g.80gb@0"))},
			Pods:           []corev1.Pod{*p}, Claims: claimsOf(autoClaim("c", profileSelector("3g.40gb"))),
			Classes: []*resourceapi.DeviceClass{migDeviceClass()}}
		var out []string
		for _, pp := range AutoSnapshot(t.Context(), in, mig.DefaultCatalog(), h0(), 0).Pending {
			out = append(out, pp.Pod.Namespace+"/"+pp.Pod.Name)
		}
		return out
	}
	if want, got := pending(full), pending(trimmed); len(want) != 1 || !cmp.Equal(want, got) {
		t.Errorf("pending demand of the trimmed pod %v, of the whole one %v; want the same, one pod", got, want)
	}
	n := node("n1", nil)
	if got, err := TrimPendingPod(n); err != nil || got != any(n) {
		t.Errorf("TrimPendingPod(a node) = %v, %v; want the node as it is", got, err)
	}
}
