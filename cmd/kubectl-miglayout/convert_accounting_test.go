package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// convertedPod is what convert made of one pod: its ResourceClaimTemplates
// by name and the pod itself.
type convertedPod struct {
	templates map[string]resourceapi.ResourceClaimTemplate
	pod       corev1.Pod
}

// parseConverted reads convert's output of one pod; a ResourceClaimTemplate
// with two requests of one name (refused by the API server) fails t.
func parseConverted(t *testing.T, out string) convertedPod {
	t.Helper()
	c := convertedPod{templates: map[string]resourceapi.ResourceClaimTemplate{}}
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		switch meta.Kind {
		case "ResourceClaimTemplate":
			var tmpl resourceapi.ResourceClaimTemplate
			if err := yaml.UnmarshalStrict([]byte(doc), &tmpl); err != nil {
				t.Fatalf("%v:\n%s", err, doc)
			}
			seen := map[string]bool{}
			for _, r := range tmpl.Spec.Spec.Devices.Requests {
				if seen[r.Name] {
					t.Errorf("ResourceClaimTemplate %s: two requests named %s:\n%s", tmpl.Name, r.Name, doc)
				}
				seen[r.Name] = true
			}
			c.templates[tmpl.Name] = tmpl
		case "Pod":
			if err := yaml.UnmarshalStrict([]byte(doc), &c.pod); err != nil {
				t.Fatalf("%v:\n%s", err, doc)
			}
		}
	}
	return c
}

// resourceOf is the device-plugin resource a converted request stands
// for (its class, and for a MIG device the profile of its selector).
func resourceOf(r resourceapi.DeviceRequest) corev1.ResourceName {
	if r.Exactly.DeviceClassName == "gpu.miglayout.io" {
		return gpuResource
	}
	expr := r.Exactly.Selectors[0].CEL.Expression
	profile := expr[strings.LastIndex(expr[:len(expr)-1], "'")+1 : len(expr)-1]
	return corev1.ResourceName("nvidia.com/mig-" + profile)
}

// held are the devices of each resource claim entry name of the pod holds
// (request "" is the whole claim).
func (c convertedPod) held(t *testing.T, entry, request string) map[corev1.ResourceName]int64 {
	t.Helper()
	for _, pc := range c.pod.Spec.ResourceClaims {
		if pc.Name != entry {
			continue
		}
		tmpl, ok := c.templates[ptr.Deref(pc.ResourceClaimTemplateName, "")]
		if !ok {
			t.Fatalf("pod claim %s names no converted ResourceClaimTemplate", entry)
		}
		n := map[corev1.ResourceName]int64{}
		for _, r := range tmpl.Spec.Spec.Devices.Requests {
			if request == "" || r.Name == request {
				count := int64(1)
				if r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount {
					count = r.Exactly.Count
				}
				n[resourceOf(r)] += count
			}
		}
		return n
	}
	t.Fatalf("no pod claim %s", entry)
	return nil
}

// randomPod is a pod of up to four init containers, sidecars among them,
// and one or two app containers, each asking for up to 4 GPUs and up to 3
// MIG devices of one profile (requests equal to limits, as the API server
// defaults them).
func randomPod(r *rand.Rand) *corev1.Pod {
	ask := func() corev1.ResourceList {
		l := corev1.ResourceList{}
		if n := r.IntN(6) - 1; n > 0 {
			l[gpuResource] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
		if n := r.IntN(5) - 1; n > 0 {
			l["nvidia.com/mig-1g.10gb"] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
		return l
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml"},
	}
	for i := range r.IntN(5) {
		c := corev1.Container{Name: fmt.Sprintf("i%d", i), Image: "x"}
		if r.IntN(3) == 0 {
			c.Name = fmt.Sprintf("s%d", i)
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		l := ask()
		c.Resources = corev1.ResourceRequirements{Limits: l, Requests: l.DeepCopy()}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for i := range 1 + r.IntN(2) {
		l := ask()
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("a%d", i), Image: "x",
			Resources: corev1.ResourceRequirements{Limits: l, Requests: l.DeepCopy()},
		})
	}
	return pod
}

// TestConvertHoldsWhatKubernetesCounts: for random pods of init
// containers, sidecars and app containers, the converted pod's claims hold
// exactly the devices Kubernetes counts for the pod under the device
// plugin (component-helpers' PodRequests: the most of the app containers
// and sidecars together and of each init container with the sidecars
// started before it), every container sees at least the devices it asked
// for, and containers that run at the same time share no claim.
func TestConvertHoldsWhatKubernetesCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 400 {
		pod := randomPod(r)
		in, err := yaml.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		c := parseConverted(t, convertStdin(t, string(in)))
		want := map[corev1.ResourceName]int64{}
		for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
			if n := q.Value(); n > 0 {
				want[name] = n
			}
		}
		got := map[corev1.ResourceName]int64{}
		for _, pc := range c.pod.Spec.ResourceClaims {
			for name, n := range c.held(t, pc.Name, "") {
				got[name] += n
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %d: devices held (-Kubernetes' count +converted):\n%s\n%s", i, diff, in)
			continue
		}
		converted := append(append([]corev1.Container{}, c.pod.Spec.InitContainers...), c.pod.Spec.Containers...)
		original := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
		for k, ct := range converted {
			sees := map[corev1.ResourceName]int64{}
			for _, use := range ct.Resources.Claims {
				for name, n := range c.held(t, use.Name, use.Request) {
					sees[name] += n
				}
			}
			for name, q := range original[k].Resources.Limits {
				if sees[name] < q.Value() {
					t.Errorf("pod %d: container %s sees %d %s, asked for %d\n%s", i, ct.Name, sees[name], name, q.Value(), in)
				}
			}
			for _, other := range converted[k+1:] {
				if !runTogether(pod, ct.Name, other.Name) {
					continue
				}
				for _, a := range ct.Resources.Claims {
					for _, b := range other.Resources.Claims {
						if a.Name == b.Name {
							t.Errorf("pod %d: containers %s and %s run together and share claim %s\n%s", i, ct.Name, other.Name, a.Name, in)
						}
					}
				}
			}
		}
	}
}

// runTogether reports whether containers x and y of pod (x listed first)
// run at the same time: two app containers, a sidecar and any container
// listed after it, an app container and a sidecar.
func runTogether(pod *corev1.Pod, x, y string) bool {
	sidecar := func(name string) bool {
		for _, c := range pod.Spec.InitContainers {
			if c.Name == name {
				return c.RestartPolicy != nil
			}
		}
		return false
	}
	app := func(name string) bool { return name[0] == 'a' }
	return sidecar(x) || (app(x) && app(y))
}
