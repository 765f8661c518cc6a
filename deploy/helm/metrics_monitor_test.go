package helm

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestServiceMonitors: with metrics.serviceMonitor.enabled each component
// gets a ServiceMonitor that selects its metrics Service (labels, namespace,
// the "metrics" port) and no other, with the labels and interval asked
// for, and the pod's node as label node; the controller-down alert reads
// the job those ServiceMonitors give (the Service's name).
func TestServiceMonitors(t *testing.T) {
	for _, o := range render(t, nil).Objects {
		if o.GetKind() == "ServiceMonitor" {
			t.Fatalf("rendered by default: %s", o.GetName())
		}
	}
	r := render(t, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}, "interval": "30s"},
		"prometheusRule": map[string]any{"enabled": true},
	}})
	var services []*corev1.Service
	for _, o := range r.Objects {
		if o.GetKind() == "Service" {
			services = append(services, convert[corev1.Service](t, o))
		}
	}
	for _, component := range []string{"controller", "agent"} {
		sm := find(t, r, "ServiceMonitor", "miglayout-"+component)
		if sm.GetLabels()["release"] != "kube-prometheus" || sm.GetNamespace() != "miglayout-system" {
			t.Errorf("%s: labels %v, namespace %q", component, sm.GetLabels(), sm.GetNamespace())
		}
		match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(match) == 0 {
			t.Fatalf("%s: no selector", component)
		}
		var selected []string
		for _, svc := range services {
			if labels.SelectorFromSet(match).Matches(labels.Set(svc.Labels)) && svc.Namespace == namespaces[0] {
				selected = append(selected, svc.Name)
				if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Name != "metrics" {
					t.Errorf("%s: Service %s has no metrics port: %+v", component, svc.Name, svc.Spec.Ports)
				}
			}
		}
		if diff := cmp.Diff([]string{"miglayout-" + component + "-metrics"}, selected); diff != "" {
			t.Errorf("%s: Services selected (-want +got):\n%s", component, diff)
		}
		// The node label the agent's alerts name the node by.
		nodeLabel := map[string]any{"sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"}
		want := []any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s", "relabelings": []any{nodeLabel}}}
		if diff := cmp.Diff(want, endpoints); diff != "" {
			t.Errorf("%s: endpoints (-want +got):\n%s", component, diff)
		}
	}
	rule := find(t, r, "PrometheusRule", "miglayout")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	var expr string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, x := range rules {
			if x.(map[string]any)["alert"] == "MigLayoutControllerDown" {
				expr, _ = x.(map[string]any)["expr"].(string)
			}
		}
	}
	m := regexp.MustCompile(`up\{job="([^"]+)", namespace="([^"]+)"\}`).FindStringSubmatch(expr)
	if m == nil || m[1] != "miglayout-controller-metrics" || m[2] != "miglayout-system" {
		t.Errorf("MigLayoutControllerDown reads %q, want up of job miglayout-controller-metrics in miglayout-system", expr)
	}
}
